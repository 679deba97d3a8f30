// The tensor names that mark each family the engine does not run yet. Checked before anything is
// loaded, so a DINOv2 in Hugging Face's layout or a BEiT never reaches the classic ViT's loader, whose
// errors ("missing tensor ...") would not say what the file is.
#include "families.h"

#include "engine/io/safetensors.h"

namespace vit {
namespace {

struct Marker {
  const char* tensor;  // a tensor only this family (and layout) has
  const char* family;
};
const Marker kMarkers[] = {
    // timm's eva.py: SwiGLU's fc1_g, separate q/k/v; q/v biases without a relative position table.
    {"blocks.0.mlp.fc1_g.weight", "EVA-02"},
    {"blocks.0.attn.q_proj.weight", "EVA-02"},
    // timm's beit.py: per-block relative position bias, gamma_1/gamma_2 layer scales.
    {"blocks.0.attn.relative_position_bias_table", "BEiT"},
    {"rel_pos_bias.relative_position_bias_table", "BEiT"},
    {"blocks.0.gamma_1", "BEiT"},
    // Variants of the layouts in layouts.h that the engine does not run: OpenCLIP towers built on a timm
    // model or with an attentional pool, DINOv2 giant's SwiGLU MLP, DINOv2 with a classifier.
    {"visual.trunk.patch_embed.proj.weight", "OpenCLIP image tower on a timm model (visual.trunk)"},
    {"visual.attn_pool.query", "OpenCLIP image tower with an attentional pool"},
    {"encoder.layer.0.mlp.weights_in.weight", "Hugging Face DINOv2 with a SwiGLU MLP (giant)"},
    {"dinov2.embeddings.cls_token", "Hugging Face Dinov2ForImageClassification"},
    {"dinov2_with_registers.embeddings.cls_token", "Hugging Face Dinov2WithRegistersForImageClassification"},
};

}  // namespace

std::string unsupported_family(const SafeTensors& st) {
  for (const Marker& m : kMarkers)
    if (st.has(m.tensor)) return m.family;
  // EVA-02 with fused qkv: q and v biases as BEiT has them, but no relative position table (above).
  if (st.has("blocks.0.attn.q_bias")) return "EVA-02";
  return "";
}

std::string unsupported_family(const std::string& arch) {
  const struct {
    const char* prefix;
    const char* family;
  } kArchs[] = {{"eva02_", "EVA-02"}, {"eva_", "EVA"}, {"beit", "BEiT"}};
  for (const auto& a : kArchs)
    if (arch.rfind(a.prefix, 0) == 0) return a.family;
  return "";
}

}  // namespace vit

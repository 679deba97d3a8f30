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
    // OpenCLIP's and Hugging Face's CLIP layouts (timm's CLIP towers load: norm_pre).
    {"visual.conv1.weight", "OpenCLIP image tower"},
    {"vision_model.embeddings.class_embedding", "Hugging Face CLIP image tower"},
    // Hugging Face's SigLIP (timm's, with attn_pool, loads).
    {"vision_model.head.probe", "Hugging Face SigLIP image tower"},
    // Hugging Face's Dinov2Model.
    {"embeddings.mask_token", "Hugging Face DINOv2"},
    {"encoder.layer.0.layer_scale1.lambda1", "Hugging Face DINOv2"},
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

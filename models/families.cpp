// The tensor names and architecture names that mark each family, or variant of one, the engine does not
// run yet. Checked before anything is loaded, so a DINOv2 in Hugging Face's layout or an EVA-02 CLIP tower
// never reaches the loader, whose errors ("missing tensor ...") would not say what the file is.
#include "families.h"

#include <regex>

#include "engine/io/safetensors.h"

namespace vit {
namespace {

struct Marker {
  const char* tensor;  // a tensor only this family (and layout, or variant) has
  const char* family;
};
const Marker kMarkers[] = {
    // timm's eva.py options beyond EVA-02's image models (EvaAttention, Eva).
    {"blocks.0.attn.norm.weight", "EVA-02 with a LayerNorm inside attention (scale_attn_inner, EVA-02 CLIP)"},
    {"blocks.0.attn.q_norm.weight", "EVA with qk_norm"},
    {"blocks.0.attn.gate.weight", "EVA with gated attention"},
    {"rope.freqs", "EVA with learned rotary frequencies (rope_type 'mixed')"},
    // timm's beit.py: one relative position table shared by every block.
    {"rel_pos_bias.relative_position_bias_table", "BEiT with a shared relative position bias (use_shared_rel_pos_bias)"},
    // Variants of the layouts in layouts.h that the engine does not run: OpenCLIP towers built on a timm
    // model or with an attentional pool, DINOv2 giant's SwiGLU MLP, DINOv2 with a classifier.
    {"visual.trunk.patch_embed.proj.weight", "OpenCLIP image tower on a timm model (visual.trunk)"},
    {"visual.attn_pool.query", "OpenCLIP image tower with an attentional pool"},
    {"encoder.layer.0.mlp.weights_in.weight", "Hugging Face DINOv2 with a SwiGLU MLP (giant)"},
    {"dinov2.embeddings.cls_token", "Hugging Face Dinov2ForImageClassification"},
    {"dinov2_with_registers.embeddings.cls_token", "Hugging Face Dinov2WithRegistersForImageClassification"},
};

const std::regex kBeit(R"(^beit(v2)?_(base|large)_patch16_(224|384|512)(\..*)?$)");
const std::regex kEva02(R"(^eva02_(tiny|small|base|large)_patch14_(224|336|448)(\..*)?$)");

}  // namespace

bool is_beit_arch(const std::string& arch) { return std::regex_match(arch, kBeit); }
bool is_eva02_arch(const std::string& arch) { return std::regex_match(arch, kEva02); }

std::string unsupported_family(const SafeTensors& st) {
  for (const Marker& m : kMarkers)
    if (st.has(m.tensor)) return m.family;
  return "";
}

std::string unsupported_family(const std::string& arch) {
  if (is_beit_arch(arch) || is_eva02_arch(arch)) return "";
  const struct {
    const char* prefix;
    const char* family;
  } kArchs[] = {{"eva02_", "EVA-02 CLIP tower"}, {"eva_", "EVA"}, {"beit", "BEiT"}};
  for (const auto& a : kArchs)
    if (arch.rfind(a.prefix, 0) == 0) return a.family;
  return "";
}

}  // namespace vit

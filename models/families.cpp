// The family rows: each family's timm architecture names (the allow-list), head and preset shapes; the
// families and variants refused by name, by architecture name and by the tensor names that mark them
// (checked before anything is loaded, so that a DINOv2 in Hugging Face's layout or an EVA-02 CLIP tower never
// reaches the loader, whose errors, "missing tensor ...", would not say what the file is).
#include "families.h"

#include <algorithm>
#include <array>
#include <regex>
#include <vector>

#include "engine/io/safetensors.h"
#include "vit_config.h"

namespace vit {
namespace {

// The allow-list: every name here runs within 1e-4 of timm 1.0.31 (tests/test_sweep.cpp, docs/MODELS.md).
const FamilyRow kFamilies[] = {
    {Family::ViT, "ViT",
     "vit_tiny_patch16_(224|384)|vit_small_patch(8_224|16_224|16_384|32_224|32_384|16_36x1_224)"
     "|vit_base_patch(8_224|16_224|16_384|32_224|32_384|16_224_miil|16_plus_240|32_plus_256)"
     "|vit_large_patch(14_224|16_224|16_384|32_224|32_384)|vit_(huge|giant|gigantic)_patch14_224"
     "|vit_(base_patch16_gap_224|medium_patch16_gap_(240|256|384)|betwixt_patch16_gap_256|huge_patch14_gap_224"
     "|huge_patch16_gap_448|giant_patch16_gap_224)"
     "|vit_(base_patch16_reg4_gap_256|betwixt_patch16_reg1_gap_256|betwixt_patch16_reg4_gap_(256|384)"
     "|little_patch16_reg[14]_gap_256|medium_patch16_reg[14]_gap_256|mediumd_patch16_reg4_gap_(256|384)"
     "|wee_patch16_reg1_gap_256|so150m_patch16_reg4_gap_(256|384)|so150m2_patch16_reg1_gap_(256|384|448))"
     "|vit_(base|large|huge|giant)_patch16_radio_v3|vit_(huge|so400m)_patch16_radio_v4|vit_intern300m_patch14_448"
     "|vit_(base|large|so400m)_patch14_reg1_tipsv2|flexivit_(small|base|large)|test_vit[23]?",
     HeadKind::Classifier, "vit_(tiny|small|base|large|huge|giant|gigantic)_patch[0-9]+_[0-9]+"},
    {Family::DeiT, "DeiT", "deit_(tiny|small|base)_(distilled_)?patch16_224|deit_base_(distilled_)?patch16_384",
     HeadKind::Classifier, nullptr},
    {Family::DeiT3, "DeiT III",
     "deit3_(small|medium|base|large)_patch16_224|deit3_(small|base|large)_patch16_384|deit3_huge_patch14_224",
     HeadKind::Classifier, nullptr},
    {Family::DINOv2, "DINOv2", "vit_(small|base|large)_patch14_(reg4_)?dinov2", HeadKind::Classifier, nullptr},
    {Family::Clip, "CLIP image tower",
     "vit_base_patch16_clip_(224|384|quickgelu_224)|vit_base_patch16_plus_clip_240"
     "|vit_base_patch32_clip_(224|256|384|448|quickgelu_224)|vit_betwixt_patch32_clip_224"
     "|vit_medium_patch(16|32)_clip_224|vit_xsmall_patch16_clip_224|vit_large_patch14_clip_(quickgelu_)?(224|336)"
     "|vit_huge_patch14_clip_(quickgelu_)?(224|378)|vit_huge_patch14_clip_336|vit_giant_patch14_clip_224"
     "|vit_gigantic_patch14_clip_(224|378|quickgelu_224)",
     HeadKind::Projection, "vit_[a-z]+_patch[0-9]+_clip_.*"},
    {Family::SigLIP, "SigLIP image tower",
     "vit_base_patch16_siglip_(gap_)?(224|256|384|512)|vit_large_patch16_siglip_(gap_)?(256|384)"
     "|vit_so400m_patch14_siglip_(224|378)|vit_so400m_patch14_siglip_gap_(224|378|448|896)",
     HeadKind::Classifier, nullptr},
    {Family::BEiT, "BEiT", "beit_base_patch16_(224|384)|beit_large_patch16_(224|384|512)|beitv2_(base|large)_patch16_224",
     HeadKind::Classifier, nullptr},
    {Family::EVA02, "EVA-02", "eva02_(tiny|small)_patch14_(224|336)|eva02_(base|large)_patch14_(224|448)",
     HeadKind::Classifier, nullptr},
    // timm's naflexvit.py (NaFlexVit), the SigLIP 2 towers only: within 1e-4 of timm's NaFlex pipeline
    // (tests/test_naflex_timm.cpp).
    {Family::NaFlex, "SigLIP 2 NaFlex image tower", "naflexvit_(base|so400m)_patch16_siglip", HeadKind::Classifier,
     nullptr},
};

// timm architectures the engine knows and does not run, each refused with its family's name.
const struct {
  const char* archs;
  const char* family;
} kRefusedArchs[] = {
    {"eva02_.*_clip_.*", "EVA-02 CLIP tower"},
    {"eva_.*", "EVA"},
    {"aimv2_.*", "AIMv2"},
    {"beit3_.*", "BEiT-3"},
    {"vit_.*_dinov3(_qkvb)?", "DINOv3"},
    {"vit_pe_.*", "Perception Encoder"},
    {"vit_.*_sapiens2", "Sapiens2"},
    {"vit_.*_lingbot", "LingBot ViT"},
    {"vit_.*_rope_.*", "ViT with a rotary position embedding"},
    {"vit_giant_patch14_(reg4_)?dinov2|vit_giant_patch14_reg1_tipsv2", "DINOv2 with a SwiGLU MLP (giant)"},
    {"vit_.*_siglip_.*", "SigLIP image tower with GELU's tanh form (SigLIP 2) or a crop"},
    {"vit_.*_rpn_.*", "ViT with post-norm residual blocks"},
    {"vit_.*_(xp|18x2)_.*|vit_d?pwee_.*", "ViT with parallel blocks"},
    {"vit_d(little|wee)_.*", "ViT with differential attention"},
    {"vit_.*_map_.*", "ViT with an attention pool beside register tokens"},
    {"test_vit4", "ViT with RMSNorm"},
    {"naflexvit_.*_radio_.*", "NaFlex ViT with a rotary embedding (C-RADIO)"},
    {"naflexvit_.*_parfac_.*", "NaFlex ViT with a factorized, aspect-preserving position table"},
    {"naflexvit_.*_par_.*", "NaFlex ViT with an aspect-preserving position table"},
    {"naflexvit_.*", "NaFlex ViT with class or register tokens"},
};

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

bool matches(const char* pattern, const std::string& s) { return std::regex_match(s, std::regex(pattern)); }

// timm's model sizes (vision_transformer.py, deit.py, beit.py, eva.py): width, depth, heads, MLP width.
struct Size {
  const char* word;
  int64_t width, depth, heads, mlp;
};
const Size kSizes[] = {{"tiny", 192, 12, 3, 768},       {"xsmall", 256, 10, 4, 1024},     {"wee", 256, 14, 4, 1280},
                       {"little", 320, 14, 5, 1792},    {"small", 384, 12, 6, 1536},      {"medium", 512, 12, 8, 2048},
                       {"mediumd", 512, 20, 8, 2048},   {"betwixt", 640, 12, 10, 2560},   {"base", 768, 12, 12, 3072},
                       {"so150m2", 832, 21, 13, 2176},  {"so150m", 896, 18, 14, 2304},    {"large", 1024, 24, 16, 4096},
                       {"intern300m", 1024, 24, 16, 4096}, {"so400m", 1152, 27, 16, 4304}, {"huge", 1280, 32, 16, 5120},
                       {"giant", 1408, 40, 16, 6144},   {"gigantic", 1664, 48, 16, 8192}};
// Names whose shape is not their size word's.
struct Shape {
  const char* arch;
  int64_t width, depth, heads, mlp, patch, size;  // 0: the size word's, or the name's
};
const Shape kShapes[] = {{"vit_base_patch16_gap_224", 0, 0, 16, 0, 0, 0},
                         {"vit_small_patch16_36x1_224", 0, 36, 0, 0, 0, 0},
                         {"vit_base_patch16_plus_240", 896, 0, 14, 3584, 0, 0},
                         {"vit_base_patch32_plus_256", 896, 0, 14, 3584, 0, 0},
                         {"vit_base_patch16_plus_clip_240", 896, 0, 14, 3584, 0, 0},
                         {"vit_giant_patch16_radio_v3", 1536, 0, 24, 0, 0, 512},
                         {"test_vit", 64, 6, 2, 192, 16, 160},
                         {"test_vit2", 64, 8, 2, 192, 16, 160},
                         {"test_vit3", 96, 9, 3, 192, 16, 160}};
// A CLIP tower's projection width by size (timm's pretrained towers).
int64_t clip_projection(const std::string& size) {
  return size == "large" ? 768 : size == "huge" || size == "giant" ? 1024 : size == "gigantic" ? 1280 : 512;
}

constexpr std::array<float, 3> kClipMean{0.48145466f, 0.4578275f, 0.40821073f}, kClipStd{0.26862954f, 0.26130258f, 0.27577711f};

// Each family's settings as its timm model definition has them (what a checkpoint's tensors and config.json
// would give).
void family_settings(Family f, const std::string& arch, const std::string& size, ViTConfig* c) {
  c->pre.mean = c->pre.std = {0.5f, 0.5f, 0.5f};  // timm's ViTs: the Inception mean and std
  c->pre.crop_pct = 1.0;
  switch (f) {
    case Family::ViT:
      c->pre.crop_pct = c->img_h() >= 384 ? 1.0 : 0.9;
      if (c->img_h() >= 384) c->pre.crop_mode = CropMode::Squash;
      c->family = "ViT";
      break;
    case Family::DeiT:  // deit.py: the ImageNet mean and std
      c->pre = PreprocessConfig{};
      c->pre.height = c->pre.width = int(c->pos_grid_h * c->patch);
      c->pre.interpolation = Filter::Bicubic;
      c->pre.crop_pct = 0.9;
      c->dist_token = arch.find("_distilled_") != std::string::npos;
      c->family = "DeiT";
      break;
    case Family::DeiT3:  // deit.py's deit3_*: layer scale, a position table without the class token
      c->layer_scale = true;
      c->no_embed_class = true;
      c->family = "DeiT III";
      break;
    case Family::DINOv2:  // vit_*_patch14_dinov2 (init_values 1e-5, 518 px), *_reg4_: registers, no_embed_class
      c->layer_scale = true;
      c->reg_tokens = arch.find("_reg4_") != std::string::npos ? 4 : 0;
      c->no_embed_class = c->reg_tokens > 0;
      c->family = "DINOv2";
      break;
    case Family::Clip:  // vit_*_clip_*: pre_norm, no patch-embedding bias, LayerNorm eps 1e-5, OpenAI's mean and std
      c->norm_pre = true;
      c->patch_bias = false;
      c->eps = 1e-5f;
      c->quick_gelu = arch.find("_quickgelu_") != std::string::npos;
      c->pre.mean = kClipMean;
      c->pre.std = kClipStd;
      c->head_is_projection = true;
      c->family = "CLIP image tower";
      break;
    case Family::SigLIP:  // vit_*_siglip_*: no class token, the MAP head (AttentionPoolLatent, MLP 4D), or avg
      c->class_token = false;
      c->attn_pool_mlp = arch.find("_gap_") == std::string::npos ? c->mlp : 0;
      c->pool = c->attn_pool_mlp ? Pool::Map : Pool::Avg;
      c->family = "SigLIP image tower";
      break;
    case Family::BEiT:  // beit.py: relative position tables, layer scale, q/v biases, mean pooling with fc_norm
      c->abs_pos = false;
      c->rel_pos_window = c->pos_grid_h;
      c->layer_scale = true;
      c->k_bias = false;
      c->pool = Pool::Avg;
      c->final_norm = false;
      c->fc_norm = true;
      c->pre.crop_pct = 0.9;
      c->family = "BEiT";
      break;
    case Family::NaFlex:  // naflexvit_*_siglip (NaFlexVitCfg): no class token, the MAP head, GELU's tanh form,
                          // a 16 x 16 table resized bilinearly per image, the SigLIP mean and std, bicubic resizes
      c->naflex = true;
      c->class_token = false;
      c->no_embed_class = true;
      c->attn_pool_mlp = c->mlp;
      c->pool = Pool::Map;
      c->gelu_tanh = true;
      c->pos_grid_h = c->pos_grid_w = 16;
      c->pos_filter = Filter::Bilinear;
      c->pre.height = c->pre.width = int(16 * c->patch);
      c->family = "SigLIP 2 NaFlex image tower";
      break;
    case Family::EVA02:  // eva02_*_patch14_*: rotary (16x16), SwiGLU, q/v biases, mean pooling with fc_norm
      c->rope = true;
      c->rope_ref_h = c->rope_ref_w = 16;
      c->swiglu = true;
      c->mlp = c->width * 8 / 3;  // mlp_ratio 4 * 2 / 3
      c->scale_mlp = size != "tiny" && size != "small";
      c->qkv_fused = !c->scale_mlp;
      c->k_bias = false;
      c->pool = Pool::Avg;
      c->final_norm = false;
      c->fc_norm = true;
      c->pre.mean = kClipMean;
      c->pre.std = kClipStd;
      c->pre.crop_pct = 0.9;
      c->family = "EVA-02";
      break;
  }
}

}  // namespace

const char* head_kind_name(HeadKind k) {
  return k == HeadKind::Classifier ? "classifier" : k == HeadKind::Projection ? "projection" : "none";
}

const FamilyRow& family_row(Family f) {
  for (const FamilyRow& r : kFamilies)
    if (r.family == f) return r;
  return kFamilies[0];
}

const FamilyRow* family_of_arch(const std::string& arch) {
  for (const FamilyRow& r : kFamilies)
    if (matches(r.runs, arch)) return &r;
  return nullptr;
}

std::string refusal_of_arch(const std::string& arch) {
  for (const auto& r : kRefusedArchs)
    if (matches(r.archs, arch)) return std::string(r.family) + " checkpoint: not supported yet (" + arch + ")";
  return "architecture '" + arch + "': not supported (docs/MODELS.md lists the timm architectures the engine "
         "runs; a ViT described by its tensors and model_args alone is \"" + kCustomArch + "\")";
}

HeadKind head_kind(Family f, int64_t classes, const std::string& tag) {
  if (classes == 0) return HeadKind::None;
  const HeadKind k = family_row(f).head;
  if (k == HeadKind::Projection && tag.find("ft_in") != std::string::npos) return HeadKind::Classifier;
  return k;
}

namespace {

// An architecture's shape from its name: <prefix>_<size>[_distilled][_patch<P>][_...][_<input size>][_...], the
// size word's width, depth, heads and MLP (or the name's own), the patch and the last three-digit part.
struct NamedShape {
  std::string size;
  int64_t width = 0, depth = 0, heads = 0, mlp = 0, patch = 16, input = 0;
};
bool named_shape(const std::string& arch, Family f, NamedShape* n) {
  std::vector<std::string> parts;
  for (size_t b = 0, e; b <= arch.size(); b = e + 1) {
    e = std::min(arch.find('_', b), arch.size());
    parts.push_back(arch.substr(b, e - b));
  }
  n->size = parts.size() > 1 ? parts[1] : "";
  for (const std::string& part : parts) {
    if (part.rfind("patch", 0) == 0 && part.size() > 5) n->patch = std::stoll(part.substr(5));
    if (part.size() == 3 && std::all_of(part.begin(), part.end(), ::isdigit)) n->input = std::stoll(part);
  }
  n->input = f == Family::DINOv2 ? 518
             : arch.find("tipsv2") != std::string::npos ? 448
             : arch.find("_radio_") != std::string::npos ? 512
             : arch.rfind("flexivit_", 0) == 0           ? 240
             : n->input                                  ? n->input
                                                         : 224;
  for (const Size& z : kSizes)
    if (n->size == z.word) *n = NamedShape{n->size, z.width, z.depth, z.heads, z.mlp, n->patch, n->input};
  for (const Shape& x : kShapes)
    if (arch == x.arch)
      *n = NamedShape{n->size,  x.width ? x.width : n->width, x.depth ? x.depth : n->depth, x.heads ? x.heads : n->heads,
                      x.mlp ? x.mlp : n->mlp, x.patch ? x.patch : n->patch, x.size ? x.size : n->input};
  return n->width > 0;
}

}  // namespace

int64_t arch_heads(const std::string& arch) {
  const FamilyRow* row = family_of_arch(arch);
  NamedShape n;
  return row && named_shape(arch, row->family, &n) ? n.heads : 0;
}

bool arch_preset(const std::string& arch, ViTConfig* c) {
  const FamilyRow* row = family_of_arch(arch);
  NamedShape n;
  if (!row || (row->presets && !matches(row->presets, arch)) || !named_shape(arch, row->family, &n)) return false;
  *c = ViTConfig{};
  c->arch = arch;
  c->width = n.width;
  c->depth = n.depth;
  c->heads = n.heads;
  c->mlp = n.mlp;
  c->patch = n.patch;
  c->pre = PreprocessConfig{};
  c->pre.interpolation = Filter::Bicubic;
  c->pre.height = c->pre.width = int(n.input);
  c->pos_grid_h = c->pos_grid_w = c->img_h() / c->patch;
  c->classes = row->head == HeadKind::Projection ? clip_projection(n.size)
               : row->family == Family::DINOv2 || row->family == Family::SigLIP || row->family == Family::EVA02 ||
                         row->family == Family::NaFlex
                   ? 0
                   : 1000;
  family_settings(row->family, arch, n.size, c);
  return true;
}

std::string unsupported_family(const SafeTensors& st) {
  for (const Marker& m : kMarkers)
    if (st.has(m.tensor)) return m.family;
  return "";
}

}  // namespace vit

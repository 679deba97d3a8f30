// The family rows: each family's timm architecture names (the allow-list), head and preset shapes; the
// families and variants refused by name, by architecture name and by the tensor names that mark them
// (checked before anything is loaded, so that a DINOv2 in Hugging Face's layout or an EVA-02 CLIP tower never
// reaches the loader, whose errors, "missing tensor ...", would not say what the file is).
#include "families.h"

#include <algorithm>
#include <array>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <vector>

#include "checkpoint.h"
#include "engine/io/safetensors.h"
#include "vit_config.h"

namespace vit {
namespace {

// The allow-list: every name here runs within 1e-4 of timm 1.0.31 (tests/test_sweep.cpp, docs/MODELS.md).
// Each family's defaults as its timm model definition has them (each architecture's shape, structure and
// preprocessing are timm's own, in models/timm_archs.inc).
using D = FamilyDefaults;

// A row of SigLIP image towers: no class token and no head; pooled by the MAP head (AttentionPoolLatent, its MLP
// the blocks' width) or, for the *_gap_* names, by the mean of the tokens.
FamilyRow siglip(const char* runs, const char* marker, Activation act, Pool pool) {
  return {Family::SigLIP, runs, marker, HeadKind::Classifier, D().with_act(act).with_pool(pool), TimmClass::VisionTransformer};
}

const FamilyRow kFamilies[] = {
    // vision_transformer.py's classic ViTs, and those with registers, global average pooling, ...
    {Family::ViT,
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
     nullptr, HeadKind::Classifier, D(), TimmClass::VisionTransformer},
    // vision_transformer.py's test_vit4: RMSNorm (norm_layer 'rmsnorm', eps 1e-6), no class token and one register,
    // layer scale, the mean of the patches with fc_norm.
    {Family::ViT, "test_vit4", nullptr, HeadKind::Classifier,
     D().with_pool(Pool::Avg).with_norm(NormKind::Rms),
     TimmClass::VisionTransformer},
    // deit.py: the ImageNet mean and std; the distilled ones a second token and head.
    {Family::DeiT,
     "deit_(tiny|small|base)_patch16_224|deit_base_patch16_384|deit_(tiny|small|base)_distilled_patch16_224"
     "|deit_base_distilled_patch16_384",
     "dist_token", HeadKind::Classifier, D(), TimmClass::VisionTransformer},
    // deit.py's deit3_*: layer scale, a position table without the class token.
    {Family::DeiT3,
     "deit3_(small|medium|base|large)_patch16_224|deit3_(small|base|large)_patch16_384|deit3_huge_patch14_224",
     nullptr, HeadKind::Classifier, D(), TimmClass::VisionTransformer},
    // vit_*_patch14_dinov2 (init_values 1e-5, 518 px, no head); *_reg4_: 4 registers, no_embed_class.
    {Family::DINOv2, "vit_(small|base|large)_patch14_(reg4_)?dinov2", "reg_token", HeadKind::Classifier,
     D(), TimmClass::VisionTransformer},
    // vit_*_clip_*: pre_norm, no patch-embedding bias, LayerNorm eps 1e-5 (in no config), OpenAI's mean and std;
    // the head is the projection into the joint space; *_clip_quickgelu_*: act_layer='quick_gelu'.
    {Family::Clip,
     "vit_base_patch16_clip_(224|384)|vit_base_patch16_plus_clip_240|vit_base_patch32_clip_(224|256|384|448)"
     "|vit_betwixt_patch32_clip_224|vit_medium_patch(16|32)_clip_224|vit_xsmall_patch16_clip_224"
     "|vit_large_patch14_clip_(224|336)|vit_huge_patch14_clip_(224|336|378)|vit_giant_patch14_clip_224"
     "|vit_gigantic_patch14_clip_(224|378)",
     "norm_pre.weight", HeadKind::Projection, D().with_eps(1e-5f), TimmClass::VisionTransformer},
    {Family::Clip,
     "vit_base_patch(16|32)_clip_quickgelu_224|vit_large_patch14_clip_quickgelu_(224|336)"
     "|vit_huge_patch14_clip_quickgelu_(224|378)|vit_gigantic_patch14_clip_quickgelu_224",
     "norm_pre.weight", HeadKind::Projection, D().with_act(Activation::QuickGelu).with_eps(1e-5f),
     TimmClass::VisionTransformer},
    // vit_*_siglip_*: no class token, the MAP head (AttentionPoolLatent, its MLP the blocks' width), no head;
    // *_siglip_gap_*: the mean of the tokens instead. vit_so400m_patch14_siglip_384: 384 px in patches of 14, a
    // 27x27 grid over the top-left 378 px, as timm's patch embedding reads it (partial_grid_refusal).
    siglip("vit_base_patch16_siglip_(224|256|384|512)|vit_large_patch16_siglip_(256|384)"
           "|vit_so400m_patch14_siglip_(224|378|384)",
           "attn_pool.latent", Activation::Gelu, Pool::Map),
    siglip("vit_base_patch16_siglip_gap_(224|256|384|512)|vit_large_patch16_siglip_gap_(256|384)"
           "|vit_so400m_patch14_siglip_gap_(224|378|384|448|896)",
           nullptr, Activation::Gelu, Pool::Avg),
    // SigLIP 2's square towers (act_layer 'gelu_tanh'): the same with GELU's tanh form.
    siglip("vit_base_patch32_siglip_256|vit_large_patch16_siglip_512|vit_so400m_patch16_siglip_(256|384|512)"
           "|vit_giantopt_patch16_siglip_(256|384)",
           nullptr, Activation::GeluTanh, Pool::Map),
    siglip("vit_base_patch32_siglip_gap_256|vit_large_patch16_siglip_gap_512"
           "|vit_so400m_patch16_siglip_gap_(256|384|512)|vit_giantopt_patch16_siglip_gap_(256|384)",
           nullptr, Activation::GeluTanh, Pool::Avg),
    // beit.py: relative position tables (window = the grid), layer scale, q/v biases, the mean of the patches
    // with fc_norm instead of a final norm.
    {Family::BEiT, "beit_base_patch16_(224|384)|beit_large_patch16_(224|384|512)|beitv2_(base|large)_patch16_224",
     "blocks.0.attn.relative_position_bias_table", HeadKind::Classifier, D().with_pool(Pool::Avg),
     TimmClass::Beit},
    // eva.py's eva02_*_patch14_*: rotary embedding (ref_feat_shape 16x16), SwiGLU (mlp_ratio 4 * 2 / 3), q/v
    // biases, mean pooling with fc_norm; base and large a LayerNorm in the MLP and separate q, k, v.
    {Family::EVA02, "eva02_(tiny|small)_patch14_(224|336)|eva02_(base|large)_patch14_(224|448)", nullptr,
     HeadKind::Classifier, D().with_act(Activation::SwiGLU).with_rope(16).with_pool(Pool::Avg), TimmClass::Eva},
    // eva.py's vit_base_patch16_rope_reg1_gap_256 (timm's SBB ViTs): EVA-02's rotary embedding (ref_feat_shape
    // 16x16) instead of a position table, one register token and no class token, a GELU MLP, q/v biases, gamma
    // layer scale, the mean of the patches with fc_norm.
    // The medium ones alike (mediumd: no q/k/v biases); betwixt with 4 registers, eva.py's default mean (OpenAI's).
    {Family::RopeViT, "vit_(medium|mediumd|base)_patch16_rope_reg1_gap_256|vit_betwixt_patch16_rope_reg4_gap_256", nullptr,
     HeadKind::Classifier, D().with_rope(16).with_pool(Pool::Avg), TimmClass::Eva},
    // eva.py's vit_*_patch16_rope_224 (Naver's RoPE-Axial ViT, AttentionRope): the rotary embedding of
    // RotaryEmbeddingCat with temperature 100, 'xy' indexing (each patch's x angles first), no reference grid,
    // interleaved pairs; no position table, or (_ape) one over the patches only; the class token, layer scale,
    // q/k/v biases, the final norm, the class token pooled; the ImageNet mean and std.
    {Family::RopeViT, "vit_(small|base|large)_patch16_rope_(ape_)?224", nullptr, HeadKind::Classifier,
     D().with_rope(0, RopeKind::EvaCat, 100.f).with_rope_xy(), TimmClass::Eva},
    // Naver's RoPE-Mixed ViTs (vit_*_patch16_rope_mixed_224, _mixed_ape_224): the same, with RotaryEmbeddingMixed's
    // frequencies learned per block and head (rope.freqs [2, depth, heads, Dh/2]: x's and y's), 'xy' grid.
    {Family::RopeViT, "vit_(small|base|large)_patch16_rope_mixed_(ape_)?224", nullptr, HeadKind::Classifier,
     D().with_rope(0, RopeKind::Mixed, 10.f).with_rope_xy(), TimmClass::Eva},
    // eva.py's vit_*_patch16_dinov3: no position table, its own rotary embedding (RotaryEmbeddingDinoV3:
    // temperature 100, patch centres normalised to the grid, rotate-half pairs), class and 4 register tokens,
    // layer scale, LayerNorm eps 1e-5, the final norm then timm's global_pool 'avg' (upstream: the class
    // token), the ImageNet mean and std at 256 px; _qkvb: q and v biases; S+, H+ and 7B: a SwiGLU MLP.
    {Family::DINOv3, "vit_(tiny|small|base|large)_patch16_dinov3(_qkvb)?", nullptr, HeadKind::Classifier,
     D().with_eps(1e-5f).with_rope(0, RopeKind::DinoV3, 100.f).with_pool(Pool::Avg),
     TimmClass::Eva},
    {Family::DINOv3, "vit_(small_plus|huge_plus|7b)_patch16_dinov3(_qkvb)?", nullptr, HeadKind::Classifier,
     D().with_act(Activation::SwiGLU).with_eps(1e-5f).with_rope(0, RopeKind::DinoV3, 100.f).with_pool(Pool::Avg),
     TimmClass::Eva},
    // eva.py's vit_pe_core_*: Perception Encoder's image tower. A position table and a 2-D rotary embedding
    // (RotaryEmbeddingCat: 'xy' indexing, grid offset 1, ref_feat_shape the model's own grid) on the patch
    // tokens, norm_pre, no patch-embedding bias, q/k/v biases, LayerNorm eps 1e-5, the final norm, then the
    // attention pool with 8 heads of its own (attn_pool_num_heads) and the projection into the joint space.
    {Family::PE, "vit_pe_core_(tiny|small)_patch16_384|vit_pe_core_large_patch14_336", nullptr, HeadKind::Projection,
     D().with_eps(1e-5f).with_rope(24).with_rope_xy().with_rope_grid_offset(1.f).with_pool(Pool::Map).with_attn_pool_heads(8),
     TimmClass::Eva},
    {Family::PE, "vit_pe_core_base_patch16_224", nullptr, HeadKind::Projection,
     D().with_eps(1e-5f).with_rope(14).with_rope_xy().with_rope_grid_offset(1.f).with_pool(Pool::Map).with_attn_pool_heads(8),
     TimmClass::Eva},
    // The gigantic one: no class token, grid offset 0, ref_feat_shape 32x32.
    {Family::PE, "vit_pe_core_gigantic_patch14_448", nullptr, HeadKind::Projection,
     D().with_eps(1e-5f).with_rope(32).with_rope_xy().with_pool(Pool::Map).with_attn_pool_heads(8),
     TimmClass::Eva},
    // vision_transformer.py's aimv2_*: RMSNorm everywhere (eps 1e-5), also right after the patch embedding
    // (embed_norm_layer); a SwiGLU MLP; no q/k/v, attn.proj or MLP biases (the patch embedding has one); a
    // position table and no class token; the final norm, then the mean of the tokens; no head. OpenAI's mean.
    {Family::AIMv2, "aimv2_(large|huge|1b|3b)_patch14_(224|336|448)", "patch_embed.norm.weight",
     HeadKind::Classifier,
     D().with_act(Activation::SwiGLU).with_eps(1e-5f).with_pool(Pool::Avg).with_norm(NormKind::Rms),
     TimmClass::VisionTransformer},
    // eva.py's eva02_*_clip_*: EVA-02 base/large (separate q, k, v with q and v biases, SwiGLU with its inner
    // LayerNorm, rotary embedding with ref_feat_shape 16x16, a position table) with a LayerNorm on attention's
    // output before attn.proj (scale_attn_inner); the class token after the final norm, then the projection
    // into the joint image-text space (head). The enormous one (post-norm blocks) is refused below.
    {Family::EVA02Clip, "eva02_base_patch16_clip_224|eva02_large_patch14_clip_(224|336)", nullptr,
     HeadKind::Projection, D().with_act(Activation::SwiGLU).with_rope(16),
     TimmClass::Eva},
    // naflexvit.py's naflexvit_*_patch16_siglip (NaFlexVitCfg): SigLIP 2's image towers taking each image at its
    // own aspect ratio within a budget of patches (--max-patches); GELU's tanh form, no class token, a 16x16
    // position table (embeds.pos_embed) resized bilinearly to each image's grid, the MAP head, no head.
    {Family::NaFlex, "naflexvit_(base|so400m)_patch16_siglip", nullptr, HeadKind::Classifier,
     D().with_act(Activation::GeluTanh).with_pool(Pool::Map).with_naflex(Filter::Bilinear),
     TimmClass::NaFlexVit},
};

// timm architectures the engine knows and does not run, each refused with its family's name.
const struct {
  const char* archs;
  const char* family;
} kRefusedArchs[] = {
    {"eva02_.*_clip_.*", "EVA-02 CLIP tower with post-norm residual blocks (enormous)"},
    {"eva_.*", "EVA"},
    {"beit3_.*", "BEiT-3"},
    {"vit_pe_(lang|spatial)_.*", "Perception Encoder (lang or spatial)"},
    {"vit_.*_sapiens2", "Sapiens2"},
    {"vit_.*_lingbot", "LingBot ViT"},
    {"vit_.*_rope_.*", "ViT with a rotary position embedding"},
    {"vit_giant_patch14_(reg4_)?dinov2|vit_giant_patch14_reg1_tipsv2", "DINOv2 with a SwiGLU MLP (giant)"},
    {"vit_.*_siglip_.*", "SigLIP image tower of a shape timm 1.0.31 does not define"},
    {"vit_.*_rpn_.*", "ViT with post-norm residual blocks"},
    {"vit_.*_(xp|18x2)_.*|vit_d?pwee_.*", "ViT with parallel blocks"},
    {"vit_d(little|wee)_.*", "ViT with differential attention"},
    {"vit_.*_map_.*", "ViT with an attention pool beside register tokens"},
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
    {"blocks.0.attn.q_norm.weight", "EVA with qk_norm"},
    {"blocks.0.attn.gate.weight", "EVA with gated attention"},
    // timm's beit.py: one relative position table shared by every block.
    {"rel_pos_bias.relative_position_bias_table", "BEiT with a shared relative position bias (use_shared_rel_pos_bias)"},
    // Variants of the layouts in layouts.h that the engine does not run: OpenCLIP towers with an attentional
    // pool, DINOv2 giant's SwiGLU MLP, DINOv2 with a classifier.
    {"visual.attn_pool.query", "OpenCLIP image tower with an attentional pool"},
    {"encoder.layer.0.mlp.weights_in.weight", "Hugging Face DINOv2 with a SwiGLU MLP (giant)"},
    {"dinov2.embeddings.cls_token", "Hugging Face Dinov2ForImageClassification"},
    {"dinov2_with_registers.embeddings.cls_token", "Hugging Face Dinov2WithRegistersForImageClassification"},
    // transformers' DINOv3ViTModel (4.56 and later; the pinned reference, 4.48.3, has no DINOv3 to check
    // against): timm's hub folders of the same weights (vit_*_dinov3) run.
    {"layer.0.layer_scale1.lambda1", "Hugging Face DINOv3ViTModel (use timm's vit_*_dinov3 folder of the same weights)"},
};

bool matches(const char* pattern, const std::string& s) { return std::regex_match(s, std::regex(pattern)); }

}  // namespace

const char* family_name(Family f) {
  switch (f) {
    case Family::ViT: return "ViT";
    case Family::DeiT: return "DeiT";
    case Family::DeiT3: return "DeiT III";
    case Family::DINOv2: return "DINOv2";
    case Family::Clip: return "CLIP image tower";
    case Family::SigLIP: return "SigLIP image tower";
    case Family::BEiT: return "BEiT";
    case Family::EVA02: return "EVA-02";
    case Family::RopeViT: return "ViT with rotary embedding";
    case Family::DINOv3: return "DINOv3";
    case Family::PE: return "Perception Encoder";
    case Family::AIMv2: return "AIMv2";
    case Family::EVA02Clip: return "EVA-02 CLIP image tower";
    case Family::NaFlex: return "SigLIP 2 NaFlex image tower";
  }
  return "?";
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::Gelu: return "GELU";
    case Activation::GeluTanh: return "GELU (tanh)";
    case Activation::QuickGelu: return "QuickGELU";
    case Activation::SwiGLU: return "SwiGLU";
  }
  return "?";
}

const FamilyRow& family_row(Family f) {
  for (const FamilyRow& r : kFamilies)
    if (r.family == f) return r;
  return kFamilies[0];
}

bool image_text_family(Family f) {
  return f == Family::Clip || f == Family::SigLIP || f == Family::NaFlex || f == Family::EVA02Clip || f == Family::PE;
}

const FamilyRow* family_of_arch(const std::string& arch) {
  for (const FamilyRow& r : kFamilies)
    if (matches(r.runs, arch)) return &r;
  return nullptr;
}

const FamilyRow& family_of_tensors(const Checkpoint& ck) {
  for (const FamilyRow& r : kFamilies)
    if (r.marker && ck.has(r.marker)) return r;
  return kFamilies[0];
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

// models/timm_archs.inc, generated from timm by tests/make_sweep_models.py (arch_facts) and checked against
// timm by tests/test_sweep.cpp: per architecture, create_model(arch)'s shape and structure as its tensors show
// them, its global_pool, and its default pretrained config's eval preprocessing.
const char kTimmArchs[] =
#include "timm_archs.inc"
    ;

// The table's fields: ViTConfig's numbers and flags (top level, or in its attention or pooling part) by their names
// there.
template <auto Field>
auto& top(ViTConfig& c) {
  return c.*Field;
}
template <auto Field>
auto& in_attn(ViTConfig& c) {
  return c.attn.*Field;
}
template <auto Field>
auto& in_pool(ViTConfig& c) {
  return c.pool.*Field;
}
const std::pair<int64_t& (*)(ViTConfig&), const char*> kArchInts[] = {
    {top<&ViTConfig::width>, "width"},     {top<&ViTConfig::depth>, "depth"},
    {top<&ViTConfig::heads>, "heads"},     {top<&ViTConfig::mlp>, "mlp"},
    {top<&ViTConfig::patch>, "patch"},     {top<&ViTConfig::reg_tokens>, "reg_tokens"},
    {in_attn<&Attention::rel_pos_window>, "rel_pos_window"}, {in_pool<&Pooling::attn_mlp>, "attn_pool_mlp"},
    {top<&ViTConfig::classes>, "classes"}};
const std::pair<bool& (*)(ViTConfig&), const char*> kArchFlags[] = {
    {top<&ViTConfig::class_token>, "class_token"}, {top<&ViTConfig::dist_token>, "dist_token"},
    {top<&ViTConfig::pos_embed>, "pos_embed"},     {top<&ViTConfig::no_embed_class>, "no_embed_class"},
    {top<&ViTConfig::layer_scale>, "layer_scale"}, {top<&ViTConfig::norm_pre>, "norm_pre"},
    {in_pool<&Pooling::final_norm>, "final_norm"}, {in_pool<&Pooling::fc_norm>, "fc_norm"},
    {in_attn<&Attention::qkv_bias>, "qkv_bias"},   {in_attn<&Attention::k_bias>, "k_bias"},
    {in_attn<&Attention::qkv_fused>, "qkv_fused"}, {top<&ViTConfig::proj_bias>, "proj_bias"},
    {top<&ViTConfig::patch_bias>, "patch_bias"},   {top<&ViTConfig::patch_norm>, "patch_norm"},
    {in_attn<&Attention::norm>, "attn_norm"},      {top<&ViTConfig::mlp_norm>, "mlp_norm"}};

// An architecture of the table: timm's create_model(arch) before its row's defaults, and its default pretrained
// config's tag (which says whether a CLIP tower's head is its projection or a classifier fine-tuned from it).
struct TimmArch {
  ViTConfig c;
  std::string tag;
};

TimmArch arch_from_json(const nlohmann::json& j) {
  ViTConfig c;
  const auto& has = j.at("has");
  c.arch = j.at("arch").get<std::string>();
  for (const auto& [field, key] : kArchInts) field(c) = j.at(key).get<int64_t>();
  for (const auto& [field, key] : kArchFlags) field(c) = std::find(has.begin(), has.end(), key) != has.end();
  c.attn.k_bias = c.attn.k_bias || !c.attn.qkv_bias;  // no q, k, v biases at all: none for k is no q/v-only bias
  const auto grid = j.at("grid").get<std::vector<int64_t>>();
  c.pos_grid_h = grid.at(0);
  c.pos_grid_w = grid.at(1);
  c.pool.kind = pool_from_name(j.at("pool").get<std::string>());
  const auto size = j.at("input_size").get<std::vector<int>>();
  c.pre.height = size.at(0);
  c.pre.width = size.at(1);
  c.pre.mean = j.at("mean").get<std::array<float, 3>>();
  c.pre.std = j.at("std").get<std::array<float, 3>>();
  c.pre.crop_pct = j.at("crop_pct").get<double>();
  c.pre.crop_mode = crop_mode_from_name(j.at("crop_mode").get<std::string>());
  c.pre.interpolation = filter_from_name(j.at("interpolation").get<std::string>());
  return {c, j.at("tag").get<std::string>()};
}

// Every architecture of the table by name.
const std::map<std::string, TimmArch>& timm_archs() {
  static const std::map<std::string, TimmArch> archs = [] {
    std::map<std::string, TimmArch> m;
    for (const nlohmann::json& j : nlohmann::json::parse(kTimmArchs)) m.emplace(j.at("arch").get<std::string>(), arch_from_json(j));
    return m;
  }();
  return archs;
}

// The table's entry for an architecture some row runs, else null.
const TimmArch* timm_arch(const std::string& arch, const FamilyRow** row) {
  *row = family_of_arch(arch);
  const auto it = timm_archs().find(arch);
  return *row && it != timm_archs().end() ? &it->second : nullptr;
}

}  // namespace

std::vector<std::string> known_archs() {
  std::vector<std::string> names;
  for (const auto& [name, c] : timm_archs())
    if (family_of_arch(name)) names.push_back(name);
  return names;
}

int64_t arch_heads(const std::string& arch) {
  const FamilyRow* row = nullptr;
  const TimmArch* t = timm_arch(arch, &row);
  return t ? t->c.heads : 0;
}

std::string arch_tag(const std::string& arch) {
  const FamilyRow* row = nullptr;
  const TimmArch* t = timm_arch(arch, &row);
  return t ? t->tag : "";
}

bool arch_preprocessing(const std::string& arch, PreprocessConfig* pre) {
  const FamilyRow* row = nullptr;
  const TimmArch* t = timm_arch(arch, &row);
  if (!t) return false;
  *pre = t->c.pre;
  if (row->defaults.naflex.on) {  // nominally its table's grid: each image gets a grid of its own
    pre->height = int(t->c.pos_grid_h * t->c.patch);
    pre->width = int(t->c.pos_grid_w * t->c.patch);
  }
  return true;
}

void apply_family_defaults(const FamilyRow& row, ViTConfig* c) {
  const FamilyDefaults& d = row.defaults;
  c->family = row.family;
  c->act = d.act;
  c->eps = d.eps;
  c->rope = d.rope;
  c->pool.attn_heads = d.pool.attn_heads;
  c->norm = d.norm;
  c->naflex = d.naflex;
}

bool arch_preset(const std::string& arch, ViTConfig* c) {
  const FamilyRow* row = nullptr;
  const TimmArch* t = timm_arch(arch, &row);
  if (!t) return false;
  *c = t->c;
  arch_preprocessing(arch, &c->pre);
  apply_family_defaults(*row, c);
  c->pool.kind = t->c.pool.kind;
  c->pool.head = head_kind(row->family, c->classes, t->tag);
  return true;
}

std::string unsupported_family(const SafeTensors& st) {
  for (const Marker& m : kMarkers)
    if (st.has(m.tensor)) return m.family;
  // Hugging Face's Siglip2VisionModel (transformers 4.49 and later; this engine is checked against 4.48, which
  // has none): SigLIP 2's NaFlex tower in transformers' names, its patch embedding a linear layer [D, 3 P P]
  // where SiglipVisionModel's is a convolution, its table resized by its own code. Not mapped onto the NaFlex
  // row yet: refused, never run as a square SigLIP.
  const std::string siglip_patches = "vision_model.embeddings.patch_embedding.weight";
  if (st.has(siglip_patches) && st.get(siglip_patches).shape.size() == 2)
    return "Hugging Face Siglip2VisionModel (SigLIP 2 NaFlex in transformers' layout; timm's naflexvit_*_siglip "
           "folders run)";
  return "";
}

}  // namespace vit

// The family rows: each family's timm architecture names (the allow-list), head and preset shapes; the
// families and variants refused by name, by architecture name and by the tensor names that mark them
// (checked before anything is loaded, so that a DINOv2 in Hugging Face's layout or an EVA-02 CLIP tower never
// reaches the loader, whose errors, "missing tensor ...", would not say what the file is).
#include "families.h"

#include <algorithm>
#include <array>
#include <regex>
#include <vector>

#include "checkpoint.h"
#include "engine/io/safetensors.h"
#include "vit_config.h"

namespace vit {
namespace {

// The allow-list: every name here runs within 1e-4 of timm 1.0.31 (tests/test_sweep.cpp, docs/MODELS.md).
// Each family's defaults and structure as its timm model definition has them.
using D = FamilyDefaults;
using S = FamilyStructure;
constexpr int64_t kProj = FamilyStructure::kProjection;

// A row of SigLIP image towers: no class token and no head; pooled by the MAP head (AttentionPoolLatent, its MLP
// the blocks' width) or, for the *_gap_* names, by the mean of the tokens.
FamilyRow siglip(const char* runs, const char* marker, Activation act, Pool pool) {
  S s;
  s.class_token = false;
  s.attn_pool = pool == Pool::Map;
  s.classes = 0;
  return {Family::SigLIP, runs, nullptr, marker, HeadKind::Classifier, D{act, 1e-6f, false, 0, pool, D::Inception, 1.0},
          s, TimmClass::VisionTransformer};
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
     "vit_(tiny|small|base|large|huge|giant|gigantic)_patch[0-9]+_[0-9]+", nullptr, HeadKind::Classifier,
     D{Activation::Gelu, 1e-6f, false, 0, Pool::Token, D::Inception, 0.9}, S{}, TimmClass::VisionTransformer},
    // vision_transformer.py's test_vit4: RMSNorm (norm_layer 'rmsnorm', eps 1e-6), no class token and one register,
    // layer scale, the mean of the patches with fc_norm.
    {Family::ViT, "test_vit4", nullptr, nullptr, HeadKind::Classifier,
     D{Activation::Gelu, 1e-6f, false, 0, Pool::Avg, D::Inception, 0.95, RopeKind::EvaCat, 10000.f, false, 0.f, 0,
       NormKind::Rms},
     [] {
       S s;
       s.class_token = s.final_norm = false;
       s.reg_tokens = 1;
       s.layer_scale = s.fc_norm = true;
       return s;
     }(),
     TimmClass::VisionTransformer},
    // deit.py: the ImageNet mean and std; the distilled ones a second token and head.
    {Family::DeiT, "deit_(tiny|small|base)_patch16_224|deit_base_patch16_384", nullptr, nullptr, HeadKind::Classifier,
     D{Activation::Gelu, 1e-6f, false, 0, Pool::Token, D::ImageNet, 0.9}, S{}, TimmClass::VisionTransformer},
    {Family::DeiT, "deit_(tiny|small|base)_distilled_patch16_224|deit_base_distilled_patch16_384", nullptr, "dist_token",
     HeadKind::Classifier, D{Activation::Gelu, 1e-6f, false, 0, Pool::Token, D::ImageNet, 0.9},
     [] { S s; s.dist_token = true; return s; }(), TimmClass::VisionTransformer},
    // deit.py's deit3_*: layer scale, a position table without the class token.
    {Family::DeiT3,
     "deit3_(small|medium|base|large)_patch16_224|deit3_(small|base|large)_patch16_384|deit3_huge_patch14_224",
     nullptr, nullptr, HeadKind::Classifier, D{Activation::Gelu, 1e-6f, false, 0, Pool::Token, D::ImageNet, 1.0},
     [] { S s; s.layer_scale = s.no_embed_class = true; return s; }(), TimmClass::VisionTransformer},
    // vit_*_patch14_dinov2 (init_values 1e-5, 518 px, no head); *_reg4_: 4 registers, no_embed_class.
    {Family::DINOv2, "vit_(small|base|large)_patch14_dinov2", nullptr, nullptr, HeadKind::Classifier,
     D{Activation::Gelu, 1e-6f, false, 0, Pool::Token, D::ImageNet, 1.0},
     [] { S s; s.layer_scale = true; s.classes = 0; return s; }(), TimmClass::VisionTransformer},
    {Family::DINOv2, "vit_(small|base|large)_patch14_reg4_dinov2", nullptr, "reg_token", HeadKind::Classifier,
     D{Activation::Gelu, 1e-6f, false, 0, Pool::Token, D::ImageNet, 1.0},
     [] { S s; s.layer_scale = s.no_embed_class = true; s.reg_tokens = 4; s.classes = 0; return s; }(),
     TimmClass::VisionTransformer},
    // vit_*_clip_*: pre_norm, no patch-embedding bias, LayerNorm eps 1e-5 (in no config), OpenAI's mean and std;
    // the head is the projection into the joint space; *_clip_quickgelu_*: act_layer='quick_gelu'.
    {Family::Clip,
     "vit_base_patch16_clip_(224|384)|vit_base_patch16_plus_clip_240|vit_base_patch32_clip_(224|256|384|448)"
     "|vit_betwixt_patch32_clip_224|vit_medium_patch(16|32)_clip_224|vit_xsmall_patch16_clip_224"
     "|vit_large_patch14_clip_(224|336)|vit_huge_patch14_clip_(224|336|378)|vit_giant_patch14_clip_224"
     "|vit_gigantic_patch14_clip_(224|378)",
     "vit_[a-z]+_patch[0-9]+_clip_.*", "norm_pre.weight", HeadKind::Projection,
     D{Activation::Gelu, 1e-5f, false, 0, Pool::Token, D::OpenAI, 1.0},
     [] { S s; s.norm_pre = true; s.patch_bias = false; s.classes = kProj; return s; }(), TimmClass::VisionTransformer},
    {Family::Clip,
     "vit_base_patch(16|32)_clip_quickgelu_224|vit_large_patch14_clip_quickgelu_(224|336)"
     "|vit_huge_patch14_clip_quickgelu_(224|378)|vit_gigantic_patch14_clip_quickgelu_224",
     nullptr, "norm_pre.weight", HeadKind::Projection, D{Activation::QuickGelu, 1e-5f, false, 0, Pool::Token, D::OpenAI, 1.0},
     [] { S s; s.norm_pre = true; s.patch_bias = false; s.classes = kProj; return s; }(), TimmClass::VisionTransformer},
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
     nullptr, "blocks.0.attn.relative_position_bias_table", HeadKind::Classifier,
     D{Activation::Gelu, 1e-6f, false, 0, Pool::Avg, D::Inception, 0.9},
     [] { S s; s.rel_pos = s.layer_scale = s.qv_bias = s.fc_norm = true; s.final_norm = false; return s; }(),
     TimmClass::Beit},
    // eva.py's eva02_*_patch14_*: rotary embedding (ref_feat_shape 16x16), SwiGLU (mlp_ratio 4 * 2 / 3), q/v
    // biases, mean pooling with fc_norm; base and large a LayerNorm in the MLP and separate q, k, v.
    {Family::EVA02, "eva02_(tiny|small)_patch14_(224|336)", nullptr, nullptr, HeadKind::Classifier,
     D{Activation::SwiGLU, 1e-6f, true, 16, Pool::Avg, D::OpenAI, 0.9},
     [] { S s; s.qv_bias = s.fc_norm = true; s.final_norm = false; s.mlp_thirds = 8; s.classes = 0; return s; }(),
     TimmClass::Eva},
    {Family::EVA02, "eva02_(base|large)_patch14_(224|448)", nullptr, nullptr, HeadKind::Classifier,
     D{Activation::SwiGLU, 1e-6f, true, 16, Pool::Avg, D::OpenAI, 0.9},
     [] {
       S s;
       s.qv_bias = s.fc_norm = s.mlp_norm = s.separate_qkv = true;
       s.final_norm = false;
       s.mlp_thirds = 8;
       s.classes = 0;
       return s;
     }(),
     TimmClass::Eva},
    // eva.py's vit_base_patch16_rope_reg1_gap_256 (timm's SBB ViTs): EVA-02's rotary embedding (ref_feat_shape
    // 16x16) instead of a position table, one register token and no class token, a GELU MLP, q/v biases, gamma
    // layer scale, the mean of the patches with fc_norm.
    // The medium ones alike (mediumd: no q/k/v biases); betwixt with 4 registers, eva.py's default mean (OpenAI's).
    {Family::RopeViT, "vit_(medium|mediumd|base)_patch16_rope_reg1_gap_256",
     "vit_(medium|base)_patch16_rope_reg1_gap_256", nullptr, HeadKind::Classifier,
     D{Activation::Gelu, 1e-6f, true, 16, Pool::Avg, D::Inception, 0.95},
     [] {
       S s;
       s.pos_embed = s.class_token = s.final_norm = false;
       s.reg_tokens = 1;
       s.layer_scale = s.qv_bias = s.fc_norm = true;
       return s;
     }(),
     TimmClass::Eva},
    {Family::RopeViT, "vit_betwixt_patch16_rope_reg4_gap_256", nullptr, nullptr, HeadKind::Classifier,
     D{Activation::Gelu, 1e-6f, true, 16, Pool::Avg, D::OpenAI, 0.95},
     [] {
       S s;
       s.pos_embed = s.class_token = s.final_norm = false;
       s.reg_tokens = 4;
       s.layer_scale = s.qv_bias = s.fc_norm = true;
       return s;
     }(),
     TimmClass::Eva},
    // eva.py's vit_*_patch16_rope_224 (Naver's RoPE-Axial ViT, AttentionRope): the rotary embedding of
    // RotaryEmbeddingCat with temperature 100, 'xy' indexing (each patch's x angles first), no reference grid,
    // interleaved pairs; no position table, or (_ape) one over the patches only; the class token, layer scale,
    // q/k/v biases, the final norm, the class token pooled; the ImageNet mean and std.
    {Family::RopeViT, "vit_(small|base|large)_patch16_rope_224", nullptr, nullptr, HeadKind::Classifier,
     D{Activation::Gelu, 1e-6f, true, 0, Pool::Token, D::ImageNet, 0.9, RopeKind::EvaCat, 100.f, true},
     [] { S s; s.pos_embed = false; s.layer_scale = true; return s; }(), TimmClass::Eva},
    {Family::RopeViT, "vit_(small|base|large)_patch16_rope_ape_224", nullptr, nullptr, HeadKind::Classifier,
     D{Activation::Gelu, 1e-6f, true, 0, Pool::Token, D::ImageNet, 0.9, RopeKind::EvaCat, 100.f, true},
     [] { S s; s.no_embed_class = s.layer_scale = true; return s; }(), TimmClass::Eva},
    // Naver's RoPE-Mixed ViTs (vit_*_patch16_rope_mixed_224, _mixed_ape_224): the same, with RotaryEmbeddingMixed's
    // frequencies learned per block and head (rope.freqs [2, depth, heads, Dh/2]: x's and y's), 'xy' grid.
    {Family::RopeViT, "vit_(small|base|large)_patch16_rope_mixed_224", nullptr, nullptr, HeadKind::Classifier,
     D{Activation::Gelu, 1e-6f, true, 0, Pool::Token, D::ImageNet, 0.9, RopeKind::Mixed, 10.f, true},
     [] { S s; s.pos_embed = false; s.layer_scale = true; return s; }(), TimmClass::Eva},
    {Family::RopeViT, "vit_(small|base|large)_patch16_rope_mixed_ape_224", nullptr, nullptr, HeadKind::Classifier,
     D{Activation::Gelu, 1e-6f, true, 0, Pool::Token, D::ImageNet, 0.9, RopeKind::Mixed, 10.f, true},
     [] { S s; s.no_embed_class = s.layer_scale = true; return s; }(), TimmClass::Eva},
    // eva.py's vit_*_patch16_dinov3: no position table, its own rotary embedding (RotaryEmbeddingDinoV3:
    // temperature 100, patch centres normalised to the grid, rotate-half pairs), class and 4 register tokens,
    // layer scale, LayerNorm eps 1e-5, the final norm then timm's global_pool 'avg' (upstream: the class
    // token), the ImageNet mean and std at 256 px; _qkvb: q and v biases; S+, H+ and 7B: a SwiGLU MLP.
    {Family::DINOv3, "vit_(tiny|small|base|large)_patch16_dinov3(_qkvb)?", "vit_(small|base|large)_patch16_dinov3",
     nullptr, HeadKind::Classifier,
     D{Activation::Gelu, 1e-5f, true, 0, Pool::Avg, D::ImageNet, 1.0, RopeKind::DinoV3, 100.f},
     [] { S s; s.layer_scale = true; s.pos_embed = s.qkv_bias = false; s.reg_tokens = 4; s.classes = 0; return s; }(),
     TimmClass::Eva},
    // Their SwiGLU width is int(width * mlp_ratio) rounded up to swiglu_align_to (8, 64 for 7B), which the
    // size word's MLP (and 7B's mlp_ratio 2) already is: 1536, 5120, 8192. Presets without _qkvb, like the row above.
    {Family::DINOv3, "vit_(small_plus|huge_plus|7b)_patch16_dinov3(_qkvb)?", "vit_(small_plus|huge_plus|7b)_patch16_dinov3",
     nullptr, HeadKind::Classifier,
     D{Activation::SwiGLU, 1e-5f, true, 0, Pool::Avg, D::ImageNet, 1.0, RopeKind::DinoV3, 100.f},
     [] { S s; s.layer_scale = true; s.pos_embed = s.qkv_bias = false; s.reg_tokens = 4; s.classes = 0; return s; }(),
     TimmClass::Eva},
    // eva.py's vit_pe_core_*: Perception Encoder's image tower. A position table and a 2-D rotary embedding
    // (RotaryEmbeddingCat: 'xy' indexing, grid offset 1, ref_feat_shape the model's own grid) on the patch
    // tokens, norm_pre, no patch-embedding bias, q/k/v biases, LayerNorm eps 1e-5, the final norm, then the
    // attention pool with 8 heads of its own (attn_pool_num_heads) and the projection into the joint space.
    {Family::PE, "vit_pe_core_(tiny|small)_patch16_384|vit_pe_core_large_patch14_336", "", nullptr, HeadKind::Projection,
     D{Activation::Gelu, 1e-5f, true, 24, Pool::Map, D::Inception, 1.0, RopeKind::EvaCat, 10000.f, true, 1.f, 8},
     [] { S s; s.norm_pre = s.attn_pool = true; s.patch_bias = false; s.classes = kProj; return s; }(), TimmClass::Eva},
    {Family::PE, "vit_pe_core_base_patch16_224", "", nullptr, HeadKind::Projection,
     D{Activation::Gelu, 1e-5f, true, 14, Pool::Map, D::Inception, 1.0, RopeKind::EvaCat, 10000.f, true, 1.f, 8},
     [] { S s; s.norm_pre = s.attn_pool = true; s.patch_bias = false; s.classes = kProj; return s; }(), TimmClass::Eva},
    // The gigantic one: no class token, grid offset 0, ref_feat_shape 32x32.
    {Family::PE, "vit_pe_core_gigantic_patch14_448", "", nullptr, HeadKind::Projection,
     D{Activation::Gelu, 1e-5f, true, 32, Pool::Map, D::Inception, 1.0, RopeKind::EvaCat, 10000.f, true, 0.f, 8},
     [] { S s; s.norm_pre = s.attn_pool = true; s.patch_bias = false; s.class_token = false; s.classes = kProj; return s; }(),
     TimmClass::Eva},
    // vision_transformer.py's aimv2_*: RMSNorm everywhere (eps 1e-5), also right after the patch embedding
    // (embed_norm_layer); a SwiGLU MLP; no q/k/v, attn.proj or MLP biases (the patch embedding has one); a
    // position table and no class token; the final norm, then the mean of the tokens; no head. OpenAI's mean.
    {Family::AIMv2, "aimv2_(large|huge|1b|3b)_patch14_(224|336|448)", nullptr, "patch_embed.norm.weight",
     HeadKind::Classifier,
     D{Activation::SwiGLU, 1e-5f, false, 0, Pool::Avg, D::OpenAI, 1.0, RopeKind::EvaCat, 10000.f, false, 0.f, 0,
       NormKind::Rms},
     [] {
       S s;
       s.class_token = s.qkv_bias = s.proj_bias = false;
       s.patch_norm = true;
       s.classes = 0;
       return s;
     }(),
     TimmClass::VisionTransformer},
    // eva.py's eva02_*_clip_*: EVA-02 base/large (separate q, k, v with q and v biases, SwiGLU with its inner
    // LayerNorm, rotary embedding with ref_feat_shape 16x16, a position table) with a LayerNorm on attention's
    // output before attn.proj (scale_attn_inner); the class token after the final norm, then the projection
    // into the joint image-text space (head). The enormous one (post-norm blocks) is refused below.
    {Family::EVA02Clip, "eva02_base_patch16_clip_224|eva02_large_patch14_clip_(224|336)", nullptr, nullptr,
     HeadKind::Projection, D{Activation::SwiGLU, 1e-6f, true, 16, Pool::Token, D::OpenAI, 0.9},
     [] {
       S s;
       s.qv_bias = s.mlp_norm = s.separate_qkv = s.attn_norm = true;
       s.mlp_thirds = 8;
       s.classes = kProj;
       return s;
     }(),
     TimmClass::Eva},
    // naflexvit.py's naflexvit_*_patch16_siglip (NaFlexVitCfg): SigLIP 2's image towers taking each image at its
    // own aspect ratio within a budget of patches (--max-patches); GELU's tanh form, no class token, a 16x16
    // position table (embeds.pos_embed) resized bilinearly to each image's grid, the MAP head, no head.
    {Family::NaFlex, "naflexvit_(base|so400m)_patch16_siglip", nullptr, nullptr, HeadKind::Classifier,
     [] {
       D d{Activation::GeluTanh, 1e-6f, false, 0, Pool::Map, D::Inception, 1.0};
       d.naflex = true;
       d.pos_filter = Filter::Bilinear;
       return d;
     }(),
     [] { S s; s.class_token = false; s.no_embed_class = s.attn_pool = true; s.classes = 0; return s; }(),
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
                       {"giant", 1408, 40, 16, 6144},   {"giantopt", 1536, 40, 16, 6144},
                       {"gigantic", 1664, 48, 16, 8192}};
// Names whose shape is not their size word's.
struct Shape {
  const char* arch;  // a regex over whole names
  int64_t width, depth, heads, mlp, patch, size;  // 0: the size word's, or the name's
};
const Shape kShapes[] = {{"vit_base_patch16_gap_224", 0, 0, 16, 0, 0, 0},
                         {"vit_small_patch16_36x1_224", 0, 36, 0, 0, 0, 0},
                         {"vit_base_patch16_plus_240", 896, 0, 14, 3584, 0, 0},
                         {"vit_base_patch32_plus_256", 896, 0, 14, 3584, 0, 0},
                         {"vit_base_patch16_plus_clip_240", 896, 0, 14, 3584, 0, 0},
                         {"vit_giant_patch16_radio_v3", 1536, 0, 24, 0, 0, 512},
                         {"vit_huge_plus_patch16_dinov3", 1280, 32, 20, 0, 0, 0},
                         {"vit_huge_plus_patch16_dinov3_qkvb", 1280, 32, 20, 0, 0, 0},
                         {"vit_7b_patch16_dinov3", 4096, 40, 32, 8192, 0, 0},
                         {"vit_pe_core_gigantic_patch14_448", 1536, 50, 16, 8960, 0, 0},
                         // AIMv2: int(width * mlp_ratio) of 2.75 (large, 1b) or 2.6667 (huge, 3b)
                         {"aimv2_large_patch14_.*", 1024, 24, 8, 2816, 0, 0},
                         {"aimv2_huge_patch14_.*", 1536, 24, 12, 4096, 0, 0},
                         {"aimv2_1b_patch14_.*", 2048, 24, 16, 5632, 0, 0},
                         {"aimv2_3b_patch14_.*", 3072, 24, 24, 8192, 0, 0},
                         {"test_vit", 64, 6, 2, 192, 16, 160},
                         {"test_vit2", 64, 8, 2, 192, 16, 160},
                         {"test_vit3", 96, 9, 3, 192, 16, 160},
                         {"test_vit4", 96, 9, 3, 288, 16, 160}};
// A CLIP tower's projection width by size (timm's pretrained towers).
int64_t clip_projection(const std::string& size) {
  return size == "large" ? 768 : size == "huge" || size == "giant" ? 1024 : size == "gigantic" ? 1280 : 512;
}

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

const char* head_kind_name(HeadKind k) {
  return k == HeadKind::Classifier ? "classifier" : k == HeadKind::Projection ? "projection" : "none";
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
  if (n->size == "pe" && parts.size() > 3) n->size = parts[3];  // vit_pe_core_<size>_patch..
  for (const std::string& part : parts) {
    if (part.rfind("patch", 0) == 0 && part.size() > 5) n->patch = std::stoll(part.substr(5));
    if (part.size() == 3 && std::all_of(part.begin(), part.end(), ::isdigit)) n->input = std::stoll(part);
  }
  n->input = f == Family::DINOv2 ? 518
             : f == Family::DINOv3 || f == Family::NaFlex ? 256  // NaFlex: its table's 16x16 grid, nominally
             : arch.find("tipsv2") != std::string::npos ? 448
             : arch.find("_radio_") != std::string::npos ? 512
             : arch.rfind("flexivit_", 0) == 0           ? 240
             : n->input                                  ? n->input
                                                         : 224;
  for (const Size& z : kSizes)
    if (n->size == z.word) *n = NamedShape{n->size, z.width, z.depth, z.heads, z.mlp, n->patch, n->input};
  for (const Shape& x : kShapes)
    if (matches(x.arch, arch))
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

bool arch_preprocessing(const std::string& arch, PreprocessConfig* pre) {
  const FamilyRow* row = family_of_arch(arch);
  NamedShape n;
  if (!row || !named_shape(arch, row->family, &n)) return false;
  const FamilyDefaults& d = row->defaults;
  *pre = PreprocessConfig{};
  pre->interpolation = Filter::Bicubic;
  pre->height = pre->width = int(n.input);
  if (d.mean == FamilyDefaults::Inception) pre->mean = pre->std = {0.5f, 0.5f, 0.5f};
  if (d.mean == FamilyDefaults::OpenAI) {
    pre->mean = {0.48145466f, 0.4578275f, 0.40821073f};
    pre->std = {0.26862954f, 0.26130258f, 0.27577711f};
  }
  pre->crop_pct = d.crop_pct;
  if (row->family == Family::ViT && n.input >= 384) {  // timm's ViTs at 384 and more: squashed, uncropped
    pre->crop_pct = 1.0;
    pre->crop_mode = CropMode::Squash;
  }
  return true;
}

void apply_family_defaults(const FamilyRow& row, ViTConfig* c) {
  const FamilyDefaults& d = row.defaults;
  c->family = row.family;
  c->act = d.act;
  c->eps = d.eps;
  c->rope = d.rope;
  c->rope_ref_h = c->rope_ref_w = d.rope_ref;
  c->rope_kind = d.rope_kind;
  c->rope_temperature = d.rope_temperature;
  c->rope_xy = d.rope_xy;
  c->rope_grid_offset = d.rope_grid_offset;
  c->attn_pool_heads = d.attn_pool_heads;
  c->norm = d.norm;
  c->naflex = d.naflex;
  c->pos_filter = d.pos_filter;
}

bool arch_preset(const std::string& arch, ViTConfig* c) {
  const FamilyRow* row = family_of_arch(arch);
  NamedShape n;
  if (!row || (row->presets && !matches(row->presets, arch)) || !named_shape(arch, row->family, &n)) return false;
  const FamilyStructure& s = row->structure;
  *c = ViTConfig{};
  c->arch = arch;
  c->width = n.width;
  c->depth = n.depth;
  c->heads = n.heads;
  c->mlp = s.mlp_thirds ? n.width * s.mlp_thirds / 3 : n.mlp;
  c->patch = n.patch;
  arch_preprocessing(arch, &c->pre);
  c->pos_grid_h = c->pos_grid_w = c->img_h() / c->patch;
  c->classes = s.classes == FamilyStructure::kProjection ? clip_projection(n.size) : s.classes;
  c->class_token = s.class_token;
  c->dist_token = s.dist_token;
  c->reg_tokens = s.reg_tokens;
  c->layer_scale = s.layer_scale;
  c->no_embed_class = s.no_embed_class;
  c->norm_pre = s.norm_pre;
  c->patch_bias = s.patch_bias;
  c->attn_pool_mlp = s.attn_pool ? c->mlp : 0;
  c->abs_pos = s.pos_embed && !s.rel_pos;
  c->qkv_bias = s.qkv_bias;
  c->proj_bias = s.proj_bias;
  c->patch_norm = s.patch_norm;
  c->attn_norm = s.attn_norm;
  c->rel_pos_window = s.rel_pos ? c->pos_grid_h : 0;
  c->k_bias = !s.qv_bias;
  c->qkv_fused = !s.separate_qkv;
  c->scale_mlp = s.mlp_norm;
  c->final_norm = s.final_norm;
  c->fc_norm = s.fc_norm;
  apply_family_defaults(*row, c);
  c->pool = row->defaults.pool;
  c->head = head_kind(row->family, c->classes, "");
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

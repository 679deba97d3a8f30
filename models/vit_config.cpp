// Resolves a ViTConfig in steps, each recording where its settings came from: the shape from the
// tensors, timm's own settings for the architecture a config or --arch names, the config.json (timm or Hugging
// Face form), a Hugging Face preprocessor_config.json, the heads a layout's own code gives, --img-size, and a
// final validation. A config or --arch that contradicts the tensors is an error naming both; what nothing
// names is refused, never guessed.
#include "vit_config.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>

#include "checkpoint.h"
#include "families.h"
#include "layout_config.h"
#include "config_json.h"
#include "vit/error.h"

namespace vit {

void set_input_size(ViTConfig* c, int64_t h, int64_t w, const std::string& where) {
  if (h <= 0 || w <= 0 || h > kMaxInputSize || w > kMaxInputSize)
    throw Error(where, "input size " + std::to_string(h) + "x" + std::to_string(w) + " is out of range (1 to " +
                           std::to_string(kMaxInputSize) + ")");
  c->pre.height = int(h);
  c->pre.width = int(w);
}

namespace {

using json = nlohmann::json;

int64_t isqrt_exact(int64_t n) {
  const auto r = int64_t(std::llround(std::sqrt(double(n))));
  return r * r == n ? r : -1;
}

// What the tensors say beyond the shape: whether the MLP is gated (SwiGLU), and whether they are named as
// timm's beit.py and eva.py name them (q_bias and v_bias, q_proj, fc1_g, gamma_1, mlp.norm): BEiT's with a
// relative position table, else eva.py's, whose rotary embedding is in no tensor.
struct TensorFacts {
  bool swiglu = false;
  bool eva_names = false;
  bool naflex_names = false;  // timm's naflexvit.py's NaFlexEmbeds: embeds.proj (a linear layer), embeds.pos_embed
};

// The MLP's hidden width M (fc2's input), and whether it is SwiGLU: timm's SwiGLU keeps the gate and the
// values apart (fc1_g, fc1_x), its GluMlp packs them into one fc1 of 2M rows (EVA-02 tiny and small).
void mlp_from_tensors(const Checkpoint& ck, ViTConfig* c, TensorFacts* f) {
  if (ck.has("blocks.0.mlp.fc1_g.weight")) {
    f->swiglu = true;
    c->mlp = ck.shape("blocks.0.mlp.fc1_g.weight")[0];
  } else {
    c->mlp = ck.shape("blocks.0.mlp.fc1.weight")[0];
    if (ck.has("blocks.0.mlp.fc2.weight") && ck.shape("blocks.0.mlp.fc2.weight").size() == 2 &&
        ck.shape("blocks.0.mlp.fc2.weight")[1] * 2 == c->mlp) {
      f->swiglu = true;
      c->mlp /= 2;
    }
  }
  c->mlp_norm = ck.has("blocks.0.mlp.norm.weight");
}

// q/k/v biases and relative position tables. BEiT and EVA-02 have q and v biases but none for k (timm
// concatenates a zero k_bias): q_bias, v_bias beside a fused qkv, or q_proj.bias, v_proj.bias.
void attention_from_tensors(const Checkpoint& ck, ViTConfig* c, TensorFacts* f) {
  const std::string& file = ck.path();
  c->attn.qkv_fused = !ck.has("blocks.0.attn.q_proj.weight");
  const bool qv = ck.has("blocks.0.attn.q_bias") || ck.has("blocks.0.attn.q_proj.bias");
  c->attn.qkv_bias = qv || ck.has("blocks.0.attn.qkv.bias");
  c->attn.k_bias = !qv;
  c->pos_embed = ck.has(f->naflex_names ? "embeds.pos_embed" : "pos_embed");
  const std::string table = "blocks.0.attn.relative_position_bias_table";
  if (ck.has(table)) {  // [(2W - 1)^2 + 3, H]
    const auto s = ck.shape(table);
    const int64_t side = s.size() == 2 && s[0] > 3 ? isqrt_exact(s[0] - 3) : -1;
    if (side <= 0 || side % 2 == 0 || s[1] < 1)
      throw Error(file, table + " has shape " + shape_string(s) + ", expected [(2W - 1)^2 + 3, H] for a square window");
    c->attn.rel_pos_window = (side + 1) / 2;
    c->heads = s[1];
    c->origin.heads = "file (relative_position_bias_table: a column per head)";
  }
  // (SwiGLU's fc1_g and fc1_x too, but timm's VisionTransformer has them in AIMv2: family_of decides.)
  f->eva_names = !c->attn.rel_pos_window && (!c->attn.k_bias || !c->attn.qkv_fused || c->mlp_norm || ck.has("blocks.0.gamma_1"));
  if (c->attn.rel_pos_window || !c->attn.k_bias || !c->attn.qkv_fused)
    c->origin.attention = std::string("file (") + (c->attn.k_bias ? "" : "q and v biases, no k bias; ") +
                          (c->attn.qkv_fused ? "" : "q_proj, k_proj, v_proj; ") +
                          (c->attn.rel_pos_window ? "relative_position_bias_table per block; " : "") + "tensor names)";
}

// NaFlexEmbeds (timm's naflexvit.py): proj, a linear layer over channels-last patches [D, P * P * 3], and the
// learned table pos_embed [1, h, w, D], whose grid is the table's (resized to each image's at run time).
void naflex_embeds_from_tensors(const Checkpoint& ck, ViTConfig* c) {
  const std::string& file = ck.path();
  const auto pw = ck.shape("embeds.proj.weight");
  const int64_t P = pw.size() == 2 && pw[1] % 3 == 0 ? isqrt_exact(pw[1] / 3) : -1;
  if (P <= 0) throw Error(file, "embeds.proj.weight has shape " + shape_string(pw) + ", expected [D, P * P * 3]");
  c->width = pw[0];
  c->in_chans = 3;
  c->patch = P;
  if (!ck.has("embeds.pos_embed")) return;  // refused with its family (family_of)
  const auto pos = ck.shape("embeds.pos_embed");
  if (pos.size() != 4 || pos[0] != 1 || pos[1] < 1 || pos[2] < 1 || pos[3] != c->width)
    throw Error(file, "embeds.pos_embed has shape " + shape_string(pos) + ", expected [1, h, w, " +
                          std::to_string(c->width) + "]");
  c->pos_grid_h = pos[1];
  c->pos_grid_w = pos[2];
}

// Step 1: the shape, always from the tensors.
TensorFacts shape_from_tensors(const Checkpoint& ck, ViTConfig* c) {
  TensorFacts f;
  const std::string& file = ck.path();
  f.naflex_names = ck.has("embeds.proj.weight");
  if (f.naflex_names) {
    naflex_embeds_from_tensors(ck, c);
  } else {
    const auto pw = ck.shape("patch_embed.proj.weight");  // [D, C, P, P]
    if (pw.size() != 4 || pw[2] != pw[3])
      throw Error(file, "patch_embed.proj.weight has shape " + shape_string(pw) + ", expected [D, C, P, P]");
    c->width = pw[0];
    c->in_chans = pw[1];
    c->patch = pw[2];
  }
  if (c->in_chans != 3) throw Error(file, "the model takes " + std::to_string(c->in_chans) + " channels, not RGB");
  c->depth = ck.count_blocks();
  if (c->depth == 0) throw Error(file, "missing tensor blocks.0.norm1.weight (no encoder blocks)");
  mlp_from_tensors(ck, c, &f);
  c->classes = ck.has("head.weight") ? ck.shape("head.weight")[0] : 0;  // none: embeddings only (DINOv2)
  c->class_token = ck.has("cls_token");
  if (ck.has("reg_token")) {  // timm: reg_token [1, R, D]
    const auto r = ck.shape("reg_token");
    if (r.size() != 3 || r[0] != 1 || r[1] < 1 || r[2] != c->width)
      throw Error(file, "reg_token has shape " + shape_string(r) + ", expected [1, R, " + std::to_string(c->width) + "]");
    c->reg_tokens = r[1];
  }
  c->layer_scale = ck.has("blocks.0.ls1.gamma") || ck.has("blocks.0.gamma_1");
  attention_from_tensors(ck, c, &f);
  c->norm_pre = ck.has("norm_pre.weight");
  if (ck.has("attn_pool.latent")) c->pool.attn_mlp = ck.shape("attn_pool.mlp.fc1.weight")[0];
  c->dist_token = ck.has("dist_token");
  c->pool.final_norm = ck.has("norm.weight");
  c->pool.fc_norm = ck.has("fc_norm.weight");
  c->patch_bias = ck.has(f.naflex_names ? "embeds.proj.bias" : "patch_embed.proj.bias");
  c->patch_norm = ck.has("patch_embed.norm.weight");
  c->attn.norm = ck.has("blocks.0.attn.norm.weight");
  c->proj_bias = ck.has("blocks.0.attn.proj.bias");
  c->pool.kind = c->pool.attn() ? Pool::Map : c->class_token ? Pool::Token : Pool::Avg;
  c->stored_as = std::string(layout_name(ck.layout())) + " names, " + ck.dtypes();
  for (std::string* k : {&c->origin.patch, &c->origin.width, &c->origin.depth, &c->origin.mlp, &c->origin.classes,
                         &c->origin.tokens, &c->origin.norms})
    *k = "file (tensor shapes)";
  c->origin.pool = c->class_token ? "default (class token present)" : "default (no class token)";
  c->origin.eps = "default";
  c->origin.act = f.swiglu ? "file (SwiGLU: mlp.fc1_g and fc1_x, or fc1 twice fc2's inputs)" : "default (GELU, erf)";
  c->origin.labels = "none in the files (ImageNet-1k names for 1000 classes, else class_<i>)";
  return f;
}

// Step 6: the position table's grid, from its tensor. Without a class slot in it, the table covers the
// patches only (timm's no_embed_class).
void position_grid(const Checkpoint& ck, ViTConfig* c) {
  const std::string& file = ck.path();
  if (c->naflex.on) return;  // embeds.pos_embed's grid, read with the shape (step 1)
  if (!c->pos_embed) {  // BEiT: its grid is its relative position tables' window
    c->pos_grid_h = c->pos_grid_w = c->attn.rel_pos_window ? c->attn.rel_pos_window : c->img_h() / c->patch;
    return;
  }
  const auto pe = ck.shape("pos_embed");
  if (pe.size() != 3 || pe[0] != 1 || pe[2] != c->width)
    throw Error(file, "pos_embed has shape " + shape_string(pe) + ", expected [1, T, " + std::to_string(c->width) + "]");
  int64_t g = c->no_embed_class ? isqrt_exact(pe[1]) : isqrt_exact(pe[1] - c->prefix_tokens());
  if (g < 0 && !c->no_embed_class && c->prefix_tokens() > 0 && isqrt_exact(pe[1]) > 0) {
    c->no_embed_class = true;
    g = isqrt_exact(pe[1]);
  }
  if (g <= 0)
    throw Error(file, "pos_embed of " + std::to_string(pe[1]) + " positions is not a square grid plus " +
                          std::to_string(c->prefix_tokens()) + " prefix tokens");
  c->pos_grid_h = c->pos_grid_w = g;
}

// Step 2: the architecture a timm config names (or an OpenCLIP config its timm trunk's), or --arch; "vit_custom"
// names none. With its weights' pretrained tag, and its row. use_naflex: its model_args say use_naflex true
// (timm's create_model(arch, use_naflex=True): the same weights as a NaFlexVit, each image at its own aspect ratio).
struct Named {
  std::string arch, tag;
  const FamilyRow* row = nullptr;
  bool use_naflex = false;
  bool flag = false;  // named by --arch alone
};

// --arch's architecture for a checkpoint in timm's names (timm's, Hugging Face ViT's or torchvision's layout), whose
// config, if any, names the same one or none: timm's create_model(arch) and its default pretrained config.
void arch_flag(const Checkpoint& ck, const json* config, const std::string& arch, const std::string& where, Named* n) {
  const std::string flag = "--arch " + arch;
  const Layout l = ck.layout();
  if (l != Layout::Timm && l != Layout::HfViT && l != Layout::Torchvision)
    throw ArgumentError(flag, ck.path() + " holds " + layout_name(l) + " names, whose config says what the model is "
                        "(--config); --arch names the architecture of a checkpoint in timm's names");
  if (config && !is_timm_config(l, config))
    throw ArgumentError(flag, where + " is Hugging Face's config of the model, which says what it is: give one or "
                        "the other");
  if (!n->arch.empty() && n->arch != arch)
    throw ArgumentError(flag, where + " names the architecture " + n->arch + ": give one or the other");
  if (config && has(*config, "architecture") && get_as<std::string>(*config, "architecture", where) == kCustomArch)
    throw ArgumentError(flag, where + " describes the model by its model_args (\"" + kCustomArch + "\"): give one or the other");
  if (arch.find('.') != std::string::npos)
    throw ArgumentError(flag, "an architecture without a pretrained tag ('" + arch.substr(arch.find('.')) + "'): --arch "
                        "brings timm's create_model(name) and its default pretrained config; other weights' settings "
                        "come with their config.json (--config)");
  if (!(n->row = family_of_arch(arch))) throw Error("--arch", refusal_of_arch(arch));
  n->flag = n->arch.empty();
  if (n->flag) n->tag = arch_tag(arch);  // its default pretrained config's
  n->arch = arch;
}

Named named_architecture(const Checkpoint& ck, const json* config, const ConfigSources& src, const std::string& where) {
  Named n;
  const bool timm_config = is_timm_config(ck.layout(), config);
  n.arch = layout_architecture(ck.layout(), config, where, ck.path());
  if (!n.arch.empty()) {
    if (!(n.row = family_of_arch(n.arch))) throw Error(where, "vision_cfg.timm_model_name: " + refusal_of_arch(n.arch));
  } else if (config && timm_config && has(*config, "architecture")) {
    n.arch = get_as<std::string>(*config, "architecture", where);
    if (config->contains("model_args") && has((*config)["model_args"], "use_naflex"))
      n.use_naflex = get_as<bool>((*config)["model_args"], "use_naflex", where);
    if (n.arch == kCustomArch) n.arch.clear();
    else if (!(n.row = family_of_arch(n.arch))) throw Error(where, refusal_of_arch(n.arch));
    if (config->contains("pretrained_cfg") && has((*config)["pretrained_cfg"], "tag"))
      n.tag = get_as<std::string>((*config)["pretrained_cfg"], "tag", where);
  }
  if (!src.arch.empty()) arch_flag(ck, config, src.arch, where, &n);
  return n;
}

// What the tensors cannot say (the heads, the block order, the MLP's activation, the norms' eps, the pooling, a
// rotary embedding, the preprocessing) is said by a config, --arch, or the layout of one of torchvision's ViTs;
// anything else is refused, naming what is unknown and the flags that say it.
void require_named(const Checkpoint& ck, const ConfigSources& src, const Named& n) {
  const Layout l = ck.layout();
  if (n.row || src.config || l == Layout::Torchvision) return;
  const bool timm_names = l == Layout::Timm || l == Layout::HfViT;
  throw Error(ck.path(), std::string("no config.json") + (src.preprocessor ? " (only " + src.preprocessor_name + ")" : "") +
                             ": the number of heads, the block order (pre- or post-norm), the MLP's activation, the "
                             "norms' eps, the pooling, any rotary embedding and the preprocessing are not in the "
                             "tensors; " +
                             (timm_names ? "name the architecture (--arch, e.g. --arch vit_base_patch16_224: any that "
                                           "docs/MODELS.md lists as running) or give --config"
                                         : std::string("give its config (--config: the ") +
                                               (l == Layout::OpenClip ? "open_clip_config.json" : "config.json") +
                                               " published with the weights)"));
}

// The families whose timm NaFlexVit form (use_naflex=True) the engine runs: SigLIP's towers with the MAP head
// (no class token, a learned table), whose form is SigLIP 2's NaFlex tower's but for the table's resize.
bool naflex_form_runs(const FamilyRow& row) {
  return row.family == Family::SigLIP && row.defaults.pool.kind == Pool::Map;
}

// What a NaFlex checkpoint may hold beyond the SigLIP 2 towers' tensors, refused by name.
void naflex_tensors_supported(const Checkpoint& ck, const std::string& arch, const ViTConfig& c) {
  const std::string& file = ck.path();
  if (ck.has("embeds.cls_token") || ck.has("embeds.reg_token"))
    throw Error(file, "a NaFlex ViT with class or register tokens: not supported yet (" + arch + " has none)");
  if (!ck.has("embeds.pos_embed"))
    throw Error(file, "a NaFlex ViT without a learned position table (embeds.pos_embed): not supported yet");
  if (c.mlp_norm) throw Error(file, "a NaFlex ViT with a norm inside its MLP (scale_mlp_norm): not supported yet");
  if (!c.pool.attn()) throw Error(file, arch + " pools with an attention pool, and the file has no attn_pool");
}

// The family: the named architecture's row, else the layout's (Hugging Face's DINOv2 ...), else the one the
// tensors mark. What the tensors hold must be that family's: eva.py's names need an architecture (their
// rotary embedding is in no tensor), beit.py's and eva.py's names a row of theirs, a gated MLP a family with one.
const FamilyRow& family_of(const Named& n, const Checkpoint& ck, const TensorFacts& f, const std::string& where,
                           const ViTConfig& c) {
  const std::string& file = ck.path();
  if (!n.row && f.naflex_names)
    throw Error(file, "NaFlex ViT checkpoint (timm's naflexvit.py tensor names: embeds.proj, embeds.pos_embed) without "
                      "a timm config.json naming its architecture: how its position table is resized is in no tensor");
  Family layout_says = Family::ViT;
  const FamilyRow& row = n.row                                       ? *n.row
                         : layout_family(ck.layout(), &layout_says) ? family_row(layout_says)
                                                                     : family_of_tensors(ck);
  // A SwiGLU MLP is eva.py's, but in a VisionTransformer family whose MLP is SwiGLU (AIMv2) timm's own.
  const bool vit_swiglu = row.timm_class == TimmClass::VisionTransformer && row.defaults.act == Activation::SwiGLU;
  const bool eva_names = f.eva_names || (f.swiglu && !vit_swiglu);
  if (!n.row && eva_names)
    throw Error(file, "EVA checkpoint (timm's eva.py tensor names) without a timm config.json naming its "
                      "architecture: its rotary position embedding, if any, is in no tensor");
  const bool beit_eva = row.timm_class == TimmClass::Beit || row.timm_class == TimmClass::Eva;
  if (!beit_eva && (eva_names || c.attn.rel_pos_window))
    throw Error(where, n.arch + " is a " + family_name(row.family) + ", but " + file +
                           " holds tensors of timm's beit.py or eva.py (q_bias, relative_position_bias_table, ...)");
  if (n.use_naflex && !row.defaults.naflex.on && !naflex_form_runs(row))
    throw Error(where, n.arch + " with model_args use_naflex true (timm's NaFlexVit form of a " + family_name(row.family) +
                           "): not supported yet; the engine runs NaFlex for SigLIP towers with an attention pool "
                           "(naflexvit_*_siglip, vit_*_siglip_* with use_naflex)");
  const bool naflex = row.defaults.naflex.on || n.use_naflex;
  if (naflex != f.naflex_names)
    throw Error(where, naflex ? n.arch + (n.use_naflex ? " with use_naflex" : "") + " is a NaFlex ViT, but " + file +
                                    " has no embeds.proj.weight (timm's naflexvit.py names)"
                              : n.arch + " is not a NaFlex ViT, but " + file + " holds one (embeds.proj, "
                                    "embeds.pos_embed: timm's naflexvit.py names; a model made with use_naflex=True "
                                    "needs model_args use_naflex true in its config.json)");
  if (naflex) naflex_tensors_supported(ck, n.arch, c);
  if (row.family == Family::BEiT && !c.attn.rel_pos_window)
    throw Error(where, n.arch + " is a BEiT, but " + file + " has no relative_position_bias_table");
  if (row.family == Family::BEiT && (f.swiglu || c.mlp_norm))
    throw Error(file, "BEiT with a SwiGLU MLP or a norm inside it (swiglu_mlp, scale_mlp): not supported yet");
  if (row.defaults.act == Activation::SwiGLU && !f.swiglu)
    throw Error(file, n.arch + " has a SwiGLU MLP, but blocks.0.mlp.fc1 has " + std::to_string(c.mlp) + " rows for fc2's " +
                          std::to_string(c.mlp) + " inputs (expected twice as many, or fc1_g and fc1_x)");
  if (ck.has("rope.freqs") != (row.defaults.rope.kind == RopeKind::Mixed))
    throw Error(where, n.arch + (ck.has("rope.freqs") ? " has no learned rotary frequencies, but " + file + " holds rope.freqs"
                                                      : " learns its rotary frequencies, but " + file + " has no rope.freqs") +
                           " (RoPE-Mixed, rope_type 'mixed')");
  ViTConfig timm;
  const bool named = n.row && arch_preset(n.arch, &timm);
  if (named && timm.attn.norm && !c.attn.norm)
    throw Error(where, n.arch + " has a LayerNorm inside attention (scale_attn_inner), but " + file +
                           " has no blocks.0.attn.norm");
  if (named && timm.patch_norm && !c.patch_norm)
    throw Error(where, n.arch + " has a norm after the patch embedding, but " + file + " has no patch_embed.norm");
  if (row.defaults.norm == NormKind::Layer && ck.has("blocks.0.norm1.weight") && !ck.has("blocks.0.norm1.bias") &&
      !layout_family(ck.layout(), &layout_says))
    throw Error(where, "blocks.0.norm1 has no bias, as an RMSNorm: " + std::string(family_name(row.family)) +
                           " has LayerNorms (a model with RMSNorm needs a config naming its architecture, e.g. AIMv2's)");
  if (row.defaults.norm == NormKind::Rms && ck.has("blocks.0.norm1.bias"))
    throw Error(file, n.arch + " has RMSNorm, but blocks.0.norm1 has a bias (a LayerNorm's): not supported");
  if (f.swiglu && row.defaults.act != Activation::SwiGLU)
    throw Error(file, std::string("a SwiGLU MLP (fc1 of twice fc2's inputs, or fc1_g) in a ") + family_name(row.family) +
                          " checkpoint: not supported");
  return row;
}

// What the family's row says no tensor holds (activation, eps, rotary embedding), each with its origin.
void family_settings(const FamilyRow& row, const Named& n, const Checkpoint& ck, ViTConfig* c) {
  apply_family_defaults(row, c);
  if (!n.arch.empty()) c->arch = n.arch;
  const std::string from_arch = "the architecture " + n.arch + (n.flag ? " (--arch)" : "");
  Family layout_says = Family::ViT;
  c->origin.family = !n.arch.empty()                               ? from_arch
                     : layout_family(ck.layout(), &layout_says) ? "file (" + std::string(layout_name(ck.layout())) + " layout)"
                                                                   : "file (tensor names)";
  if (n.use_naflex && !row.defaults.naflex.on) {
    // _create_naflexvit_from_classic: NaFlexVitCfg's table resize (bicubic, antialiased), the family's all else.
    c->naflex.on = true;
    c->naflex.pos_filter = Filter::Bicubic;
    c->origin.family = "the architecture " + n.arch + " with model_args use_naflex (timm's NaFlexVit form)";
  }
  if (row.defaults.act == Activation::QuickGelu || row.defaults.act == Activation::GeluTanh)
    c->origin.act = from_arch + " (" + activation_name(row.defaults.act) + ")";
  if (row.defaults.eps != 1e-6f)
    c->origin.eps = std::string("default for ") + family_name(row.family) + "s (timm's architectures: " +
                    fmt::format("{:g}", row.defaults.eps) + ", not in their config.json)";
  if (row.defaults.rope.on && row.defaults.rope.kind == RopeKind::Mixed)
    c->origin.rope = "timm's defaults for " + n.arch + " (RotaryEmbeddingMixed: frequencies learned per block and head, "
                     "rope.freqs; 'xy' grid, interleaved pairs)";
  else if (row.defaults.rope.on && row.defaults.rope.kind == RopeKind::DinoV3)
    c->origin.rope = "timm's defaults for " + n.arch + " (RotaryEmbeddingDinoV3: patch centres normalised to the "
                     "grid, temperature 100, rotate-half pairs; the grid follows the input)";
  else if (row.defaults.rope.on)
    c->origin.rope = "timm's defaults for " + n.arch + " (" +
                     (row.defaults.rope.ref_h ? fmt::format("ref_feat_shape {}x{}, ", row.defaults.rope.ref_h, row.defaults.rope.ref_w) : "") +
                     fmt::format("temperature {:g}, interleaved pairs", row.defaults.rope.temperature) +
                     (row.defaults.rope.xy ? ", 'xy' grid" : "") +
                     (row.defaults.rope.grid_offset != 0.f ? fmt::format(", grid offset {:g}", row.defaults.rope.grid_offset) : "") +
                     ")";
}

// --img-size on a NaFlex model, which has no one input size, is an argument error.
void refuse_img_size_for_naflex(const ViTConfig& c, const std::string& arch, int64_t img_size) {
  if (img_size > 0 && c.naflex.on)
    throw ArgumentError("--img-size does not apply to " + arch + ", a NaFlex model: each image keeps its own aspect "
                        "ratio within a budget of patches (--max-patches)");
}

// timm's model_args dynamic_img_size true: the patch embedding takes any multiple of the patch, the position
// table resampled to it at run time (the same answer at the model's own size).
bool dynamic_img_size(const json* config) {
  if (!config || !config->is_object() || !config->contains("model_args")) return false;
  const json& a = (*config)["model_args"];
  return a.is_object() && a.contains("dynamic_img_size") && a["dynamic_img_size"].is_boolean() &&
         a["dynamic_img_size"].get<bool>();
}

// An input size that is no multiple of the patch: timm's PatchEmbed (strict_img_size, no dynamic_img_pad) reads
// the top-left grid * P pixels with its stride-P convolution and leaves the rest of each side unread (the
// engine's patchify_step alike): ViT-SO400M-14-SigLIP-384's 384 px are a 27x27 grid of 378. The engine runs
// such a size where that is the reference's behaviour and checked against it: timm's VisionTransformer families,
// from timm's layout (or --arch) or as an OpenCLIP tower's trunk, without dynamic_img_size (with which timm's
// patch embedding refuses the input), and Hugging Face's SiglipVisionModel, whose convolution does the same
// (google/siglip-so400m-patch14-384). Else why not, for the error; "" when it runs.
std::string partial_grid_refusal(const FamilyRow& row, Layout layout, bool dynamic_img_size) {
  if (row.defaults.naflex.on) return "";  // each image resized to a grid of its own
  if (dynamic_img_size || row.family == Family::DINOv3)
    return "with dynamic_img_size timm's patch embedding refuses an input that is no multiple of its patch";
  if (row.timm_class != TimmClass::VisionTransformer)
    return std::string("a partial patch grid in a ") + family_name(row.family) + " is not supported (the engine reads "
           "the top-left grid, as timm's patch embedding does, in timm's VisionTransformer families only)";
  if (layout != Layout::Timm && layout != Layout::OpenClipTimm && layout != Layout::HfSiglip)
    return std::string("a partial patch grid in ") + layout_name(layout) + " layout is not supported (the engine reads "
           "the top-left grid, as timm's patch embedding does, in timm's layout, OpenCLIP's timm towers and Hugging "
           "Face's SigLIP only)";
  return "";
}

// Step 8: what must hold whatever the sources said. `where` names the config, else the model file.
// partial_grid: partial_grid_refusal's answer for the model's own input size.
void validate(const ViTConfig& c, const std::string& where, const std::string& file, bool img_size_given,
              const std::string& partial_grid) {
  if (c.heads <= 0 || c.width % c.heads != 0)
    throw Error(where, std::to_string(c.heads) + " heads do not divide width " + std::to_string(c.width));
  if (img_size_given && c.img_h() % c.patch)  // the caller's size, not the model's: an argument error
    throw ArgumentError("image size " + std::to_string(c.img_h()) + " is not a multiple of the model's patch size " +
                        std::to_string(c.patch) + " (a partial patch grid runs only at a model's own input size)");
  if (!c.naflex.on && (c.img_h() % c.patch || c.img_w() % c.patch) && !partial_grid.empty())
    throw Error(where, "input size " + std::to_string(c.img_h()) + "x" + std::to_string(c.img_w()) +
                           " is not a multiple of the patch size " + std::to_string(c.patch) + ": " + partial_grid);
  if (c.grid_h() < 1 || c.grid_w() < 1)
    throw Error(where, "input size " + std::to_string(c.img_h()) + "x" + std::to_string(c.img_w()) +
                           " is smaller than one patch of " + std::to_string(c.patch));
  if (c.pool.attn() && c.width % c.pool_heads())
    throw Error(where, std::to_string(c.pool_heads()) + " attention-pool heads do not divide width " + std::to_string(c.width));
  if (c.pool.kind == Pool::Map && !c.pool.attn())
    throw Error(file, "global_pool 'map' needs an attention-pool head, and the checkpoint has no attn_pool");
  if (c.pool.kind == Pool::Token && !c.class_token)
    throw Error(file, "global_pool 'token' needs a class token, and the checkpoint has no cls_token");
  if (c.attn.rel_pos_window && c.tokens() * c.tokens() > (int64_t(1) << 28))  // the index over token pairs, made at load
    throw Error(where, std::to_string(c.tokens()) + " tokens are too many for a relative position index");
  if (c.attn.rel_pos_window && (!c.class_token || c.prefix_tokens() != 1))
    throw Error(file, "a relative position table needs exactly one class token before the patches (BEiT's cls_token)");
  if (c.rope.on && !(c.rope.temperature > 0.f))
    throw Error(where, "rope_temperature must be positive, got " + std::to_string(c.rope.temperature));
  if (c.rope.on && c.patches() * c.head_dim() > (int64_t(1) << 28))  // sines and cosines per patch, made at load
    throw Error(where, std::to_string(c.patches()) + " patches are too many for a rotary embedding's tables");
  if (c.rope.on && c.head_dim() % 4)
    throw Error(where, "a rotary embedding needs a head width divisible by 4, got " + std::to_string(c.head_dim()));
  if (!c.labels.empty() && int64_t(c.labels.size()) != c.classes)
    throw Error(where, std::to_string(c.labels.size()) + " labels for " + std::to_string(c.classes) + " classes");
}

}  // namespace

int64_t default_heads(int64_t width) { return std::max<int64_t>(1, width / 64); }

Pool pool_from_name(const std::string& name) {
  if (name == "token") return Pool::Token;
  if (name == "avg") return Pool::Avg;
  if (name == "map") return Pool::Map;
  throw Error("global_pool '" + name + "' is not supported (token, avg or map)");
}

std::vector<std::string> structure_words(const ViTConfig& c) {
  std::vector<std::string> w;
  const auto add = [&](bool on, const std::string& word) {
    if (on) w.push_back(word);
  };
  add(!c.class_token, "no class token");
  add(c.reg_tokens > 0, std::to_string(c.reg_tokens) + " register token" + (c.reg_tokens == 1 ? "" : "s"));
  add(c.dist_token, "a distillation token");
  add(!c.pos_embed, "no position table");
  add(c.pos_embed && c.no_embed_class && c.prefix_tokens() > 0, "a position table over the patches only");
  add(c.attn.rel_pos_window > 0, "relative position tables");
  add(!c.patch_bias, "no patch-embedding bias");
  add(c.patch_norm, "a norm after the patch embedding");
  add(c.norm_pre, "norm_pre");
  add(c.layer_scale, "layer scale");
  add(!c.attn.qkv_bias, "no q, k, v biases");
  add(c.attn.qkv_bias && !c.attn.k_bias, "q and v biases only");
  add(!c.attn.qkv_fused, "separate q, k, v");
  add(c.attn.norm, "a norm inside attention");
  add(!c.proj_bias, "no attn.proj or MLP biases");
  add(c.mlp_norm, "a norm inside the MLP");
  add(!c.pool.final_norm, "no final norm");
  add(c.pool.fc_norm, "fc_norm");
  add(c.pool.attn(), "an attention pool");
  return w;
}

std::string shape_description(const ViTConfig& c) {
  std::string s = "width " + std::to_string(c.width) + ", patch " + std::to_string(c.patch) + ", MLP " +
                  std::to_string(c.mlp);
  if (c.pos_embed || c.attn.rel_pos_window)
    s += ", a " + std::to_string(c.pos_grid_h) + "x" + std::to_string(c.pos_grid_w) + " position " +
         (c.pos_embed ? "table" : "window");
  if (c.pool.attn()) s += ", an attention pool of MLP " + std::to_string(c.pool.attn_mlp);
  for (const std::string& word : structure_words(c)) s += ", " + word;
  return s;
}

ViTConfig config_for_arch(const std::string& arch, int64_t img_size) {
  ViTConfig c;
  if (!arch_preset(arch, &c)) throw Error("--arch", refusal_of_arch(arch));
  refuse_img_size_for_naflex(c, arch, img_size);
  const bool own_size = img_size == 0 || (img_size == c.img_h() && img_size == c.img_w());
  if (!own_size) {  // random weights: the position table made at the size it runs at
    set_input_size(&c, img_size, img_size, "--img-size");
    if (c.img_h() % c.patch == 0) c.pos_grid_h = c.pos_grid_w = c.grid_h();
  }
  validate(c, "--arch " + arch, arch, !own_size, partial_grid_refusal(*family_of_arch(arch), Layout::Timm, false));
  return c;
}

std::string ViTConfig::summary() const {
  return (arch.empty() ? std::string("ViT") : arch) + ": patch " + std::to_string(patch) + ", width " +
         std::to_string(width) + ", depth " + std::to_string(depth) + ", heads " + std::to_string(heads) +
         ", mlp " + std::to_string(mlp) + ", classes " + std::to_string(pool.head == HeadKind::Classifier ? classes : 0) +
         (pool.head == HeadKind::Projection ? ", a projection to " + std::to_string(classes) : "") + ", input " +
         std::to_string(img_h()) + "x" + std::to_string(img_w()) + ", tokens " + std::to_string(tokens()) +
         ", pool " + pool_name(pool.kind) + (dist_token ? ", distilled" : "") +
         (reg_tokens ? ", " + std::to_string(reg_tokens) + " register tokens" : "") + (layer_scale ? ", layer scale" : "") +
         (attn.rel_pos_window ? ", relative position bias" : "") + (rope.on ? ", rotary position embedding" : "") +
         (swiglu() ? ", SwiGLU" : "") + (norm == NormKind::Rms ? ", RMSNorm" : "") +
         (attn.norm ? ", a LayerNorm inside attention" : "") +
         (naflex.on ? ", NaFlex within " + std::to_string(naflex.max_patches) + " patches" : "");
}

NaflexConfig ViTConfig::naflex_config() const {
  NaflexConfig n;
  n.patch = int(patch);
  n.max_patches = int(naflex.max_patches);
  n.interpolation = pre.interpolation;
  n.mean = pre.mean;
  n.std = pre.std;
  return n;
}

namespace {

// --arch without a config: the tensors are timm's create_model(arch)'s, of any depth and head (the width, patch,
// MLP, position table, tokens, norms and biases its tensors show), else the two shapes are named. An image-text
// tower's head is its default pretrained config's (a projection, or a classifier fine-tuned from it: the tag
// says which), so its width must be too: other weights need their config.json.
void arch_fits(const Checkpoint& ck, const std::string& arch, const ViTConfig& timm, const ViTConfig& c) {
  const std::string theirs = shape_description(timm), file = shape_description(c);
  if (theirs != file)
    throw Error("--arch " + arch, "timm's " + arch + " is " + theirs + "; " + ck.path() + " is " + file);
  if (family_row(timm.family).head == HeadKind::Projection && c.classes != timm.classes)
    throw Error("--arch " + arch, "timm's " + arch + " (its default pretrained config, " + arch_tag(arch) + ") ends in " +
                                      (timm.pool.head == HeadKind::Projection ? "a projection to " : "a classifier of ") +
                                      std::to_string(timm.classes) + "; " + ck.path() + "'s head has " +
                                      std::to_string(c.classes) + " outputs: other weights of the architecture need "
                                      "their config.json (--config)");
}

// Step 3: the config.json in its layout's form (layout_config.cpp), the model_args of the family's timm class
// among it; step 4: a Hugging Face preprocessor_config.json. Whether they named the heads and the input size.
LayoutConfigGiven apply_configs(const Checkpoint& ck, const ConfigSources& src, const FamilyRow& row,
                                const std::string& where, ViTConfig* c) {
  const json* config = src.config;
  LayoutConfigGiven g = apply_layout_config(ck.layout(), config, row.timm_class, where, ck.path(), c);
  if (config && !c->labels.empty()) c->origin.labels = where;
  if (row.defaults.pool.kind == Pool::Avg && c->origin.pool.rfind("default", 0) == 0) {  // Beit, Eva: global_pool 'avg'
    c->pool.kind = Pool::Avg;
    c->origin.pool = std::string("default for ") + family_name(row.family) + " (timm's global_pool 'avg')";
  }
  if (src.preprocessor) {
    apply_hf_preprocessor(*src.preprocessor, src.preprocessor_name, c);
    g.size = true;
  }
  return g;
}

// torchvision's ViTs (vit_b_16, vit_b_32, vit_l_16, vit_l_32, vit_h_14): width, MLP width, depth and heads.
struct TorchvisionViT {
  int64_t width, mlp, depth, heads;
};
constexpr TorchvisionViT kTorchvisionViTs[] = {{768, 3072, 12, 12}, {1024, 4096, 24, 16}, {1280, 5120, 32, 16}};

// Step 5: the heads where neither a config nor an architecture named them: what the layout's own code gives
// (open_clip's head_width 64; torchvision's ViTs, known by their shape); else refused.
void unnamed_heads(const Checkpoint& ck, const ConfigSources& src, const std::string& where, ViTConfig* c) {
  if (ck.layout() == Layout::OpenClip) {
    c->heads = default_heads(c->width);
    c->origin.heads = "default (open_clip's head_width 64)";
    return;
  }
  if (ck.layout() == Layout::Torchvision && !src.config) {
    for (const TorchvisionViT& t : kTorchvisionViTs)
      if (t.width == c->width && t.mlp == c->mlp && t.depth == c->depth) {
        c->heads = t.heads;
        c->origin.heads = "torchvision's ViT of width " + std::to_string(t.width);
        return;
      }
    throw Error(ck.path(), "a torchvision checkpoint of width " + std::to_string(c->width) + ", MLP " +
                               std::to_string(c->mlp) + " and depth " + std::to_string(c->depth) +
                               " is none of torchvision's ViTs (vit_b_*, vit_l_*, vit_h_14), and the number of heads "
                               "is not in the tensors: give --config (weights/export.py --num-heads writes one)");
  }
  throw Error(where, std::string("model_args.num_heads is missing, and the config names no architecture that says "
                                 "it (\"") + kCustomArch + "\" is timm's VisionTransformer described by its model_args): "
                                 "the number of heads is not in the tensors");
}

}  // namespace

void refuse_unrun_architecture(const ConfigSources& src) {
  if (!src.arch.empty() && src.arch.find('.') == std::string::npos && !family_of_arch(src.arch))
    throw Error("--arch", refusal_of_arch(src.arch));
  const json* config = src.config;
  if (!config || !config->is_object() || !config->contains("architecture") || !(*config)["architecture"].is_string())
    return;
  const std::string arch = (*config)["architecture"].get<std::string>();
  if (arch != kCustomArch && !family_of_arch(arch)) throw Error(src.config_name, refusal_of_arch(arch));
}

ViTConfig resolve_config(const Checkpoint& ck, const ConfigSources& src) {
  const std::string& file = ck.path();
  const json* config = src.config;
  const std::string where = config ? src.config_name : file;
  if (config && !config->is_object()) throw Error(where, "not a JSON object");
  // Steps 1 and 2: the shape from the tensors; the architecture named and its family, whose defaults apply.
  const Named n = named_architecture(ck, config, src, where);
  require_named(ck, src, n);
  ViTConfig c, timm;  // timm: create_model(n.arch) and its default pretrained config, when an architecture is named
  const bool known = n.row && arch_preset(n.arch, &timm);
  if (known) c.pre = timm.pre;
  const TensorFacts facts = shape_from_tensors(ck, &c);
  const FamilyRow& row = family_of(n, ck, facts, where, c);
  family_settings(row, n, ck, &c);
  const std::string arch_origin = "timm's defaults for " + n.arch + (n.flag ? " (--arch)" : "");
  if (known && !c.attn.rel_pos_window) {
    c.heads = timm.heads;
    c.origin.heads = arch_origin;
  }
  if (known) {
    c.pool.kind = timm.pool.kind;
    c.origin.pool = arch_origin + " (global_pool '" + pool_name(timm.pool.kind) + "')";
  }
  c.origin.input_size = known ? arch_origin : "file (position table grid)";
  c.origin.preprocessing = known ? arch_origin : "default (timm's data config: ImageNet mean and std, bicubic, crop_pct 0.875)";

  // Steps 3 to 5: the configs, then the heads nothing named.
  const LayoutConfigGiven given = apply_configs(ck, src, row, where, &c);
  // Without an architecture, SigLIP's attention pool is the one the tensors can say: beside prefix tokens or
  // after norm_pre (Perception Encoder, timm's *_reg4_map_*) whether it reads the prefix tokens, its heads and
  // any rotary embedding are in no tensor.
  if (!n.row && c.pool.attn() && (c.prefix_tokens() > 0 || c.norm_pre))
    throw Error(where, "an attention-pool head (attn_pool) beside class or register tokens or after norm_pre (as "
                       "Perception Encoder has), without a config naming its architecture: not supported");
  if (!given.heads && !known && !c.attn.rel_pos_window) unnamed_heads(ck, src, where, &c);

  // Step 6: the position table's grid; the input size follows it when nothing named one. The head's kind.
  position_grid(ck, &c);
  if (!src.arch.empty() && !config) arch_fits(ck, n.arch, timm, c);
  if (!given.size && !known) set_input_size(&c, c.pos_grid_h * c.patch, c.pos_grid_w * c.patch, file);
  if (c.naflex.on) {  // nominal only: each image is resized to a grid of its own
    set_input_size(&c, c.pos_grid_h * c.patch, c.pos_grid_w * c.patch, file);
    c.origin.input_size = "NaFlex: each image at its own aspect ratio, within --max-patches patches";
  }
  c.pos_antialias = layout_pos_antialias(ck.layout());
  c.pool.head = head_kind(c.family, c.classes, n.tag);
  if (c.pool.head != HeadKind::Classifier) c.origin.labels.clear();  // nothing to label

  // Step 7: --img-size, with the same crop_pct (or Hugging Face resize ratio) at the new size, as timm's.
  refuse_img_size_for_naflex(c, c.arch, src.img_size);
  // (--img-size of the model's own square size changes nothing.)
  const bool own_size = src.img_size == 0 || (src.img_size == c.img_h() && src.img_size == c.img_w());
  if (!own_size) {
    if (c.pre.resize > 0) c.pre.resize = int(std::llround(double(c.pre.resize) * double(src.img_size) / double(c.img_h())));
    set_input_size(&c, src.img_size, src.img_size, "--img-size");
    c.origin.input_size = "--img-size";
  }

  // (A Hugging Face ViT config's model is Hugging Face's, whatever the tensors' names.)
  const Layout layout = ck.layout() == Layout::Timm && !is_timm_config(ck.layout(), config) ? Layout::HfViT : ck.layout();
  validate(c, where, file, !own_size, partial_grid_refusal(row, layout, dynamic_img_size(config)));
  return c;
}

}  // namespace vit

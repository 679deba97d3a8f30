// model_info (model_info.h): a loaded ViT's config, source, precision and how it runs here, as the public
// ModelInfo; its description in the words `vit inspect` prints.
#include "library/model_info.h"

#include <spdlog/fmt/fmt.h>

#include <array>

#include "engine/preprocess/resample.h"

namespace vit {
namespace {

std::string tokens_line(const ViTConfig& c) {
  std::string s = fmt::format("{} = {} patches ({}x{})", c.tokens(), c.patches(), c.grid_h(), c.grid_w());
  if (c.class_token) s += " + class token";
  if (c.dist_token) s += " + distillation token";
  if (c.reg_tokens) s += fmt::format(" + {} register tokens (reg_token, not in the position table)", c.reg_tokens);
  return s;
}

std::string position_line(const ViTConfig& c) {
  std::string s = c.pos_embed ? fmt::format("{}x{} grid", c.pos_grid_h, c.pos_grid_w) : "none";
  if (c.pos_embed && c.pos_grid_h != c.grid_h())
    s += fmt::format(", resampled to {}x{} ({})", c.grid_h(), c.grid_w(),
                     c.pos_antialias ? "bicubic, antialiased" : "bicubic, not antialiased: torch's, as the layout's code");
  return s + (c.no_embed_class ? ", patches only (no_embed_class)" : "");
}

std::string family_line(const ViTConfig& c) {
  return std::string(family_name(c.family)) +
         (c.layer_scale ? c.family == Family::BEiT ? ", layer scale on both branches of every block (gamma_1, gamma_2)"
                                                   : ", layer scale on both branches of every block (ls1, ls2)"
                        : "") +
         (c.norm_pre ? ", LayerNorm before the blocks (norm_pre)" : "") +
         (c.patch_norm ? ", a norm right after the patch embedding (patch_embed.norm)" : "") +
         (c.norm == NormKind::Rms ? ", RMSNorm for every norm" : "") +
         (c.act == Activation::QuickGelu  ? ", QuickGELU in the MLPs"
          : c.act == Activation::GeluTanh ? ", GELU's tanh form in the MLPs"
                                          : "");
}

// Said only of attention that is not timm's plain one.
std::string attention_line(const ViTConfig& c) {
  std::string s = !c.attn.qkv_bias ? "no q, k, v biases" : c.attn.k_bias ? "q, k, v biases" : "q and v biases, no k bias";
  if (!c.attn.qkv_fused) s += ", separate q_proj, k_proj, v_proj (run as one)";
  if (!c.proj_bias) s += ", no attn.proj or MLP biases";
  if (c.attn.norm) s += ", LayerNorm on attention's output before attn.proj (attn.norm: scale_attn_inner)";
  if (c.attn.rel_pos_window)
    s += fmt::format(", relative position bias per block ({}x{} window, {} rows per head{})", c.attn.rel_pos_window,
                     c.attn.rel_pos_window, c.rel_pos_len(),
                     c.grid_h() == c.attn.rel_pos_window && c.grid_w() == c.attn.rel_pos_window
                         ? ""
                         : fmt::format(", resized to {}x{} as timm does", c.grid_h(), c.grid_w()));
  if (c.rope.on && c.rope.kind == RopeKind::Mixed)
    s += fmt::format(", RoPE-Mixed on the patch tokens' q and k (frequencies learned per block and head, rope.freqs; "
                     "interleaved pairs, {} grid)", c.rope.xy ? "'xy'" : "'ij'");
  else if (c.rope.on && c.rope.kind == RopeKind::DinoV3)
    s += fmt::format(", DINOv3's 2-D rotary embedding on the patch tokens' q and k (rotate-half pairs, temperature {:g}, "
                     "patch centres normalised to the {}x{} grid)",
                     double(c.rope.temperature), c.grid_h(), c.grid_w());
  else if (c.rope.on)
    s += fmt::format(", 2-D rotary embedding on the patch tokens' q and k (interleaved pairs, temperature {:g}{}{}{})",
                     double(c.rope.temperature),
                     c.rope.grid_offset != 0.f ? fmt::format(", grid offset {:g}", c.rope.grid_offset) : std::string(),
                     c.rope.ref_h ? fmt::format(", grid rescaled to {}x{}", c.rope.ref_h, c.rope.ref_w) : std::string(),
                     c.rope.xy ? ", x angles first" : "");
  return s;
}

std::string pooling_line(const ViTConfig& c) {
  const char* pool = c.pool.kind == Pool::Token ? "class token"
                     : c.pool.kind == Pool::Avg ? "mean of patch tokens"
                                                : "attention pool (MAP head: a learned query over all tokens, then LayerNorm + MLP)";
  const std::string heads = c.pool.kind == Pool::Map ? fmt::format(", {} heads{}", c.pool_heads(),
                                                                    c.pool.attn_heads ? " of its own" : "")
                                                      : std::string();
  return fmt::format("{}{}{}{}, {} eps {:g}", pool, heads, c.pool.final_norm ? ", final norm" : "",
                     c.pool.fc_norm ? ", fc_norm after pooling" : "", c.norm == NormKind::Rms ? "RMSNorm" : "LayerNorm",
                     double(c.eps));
}

std::string triple(const std::array<float, 3>& v) { return fmt::format("{:.4g}, {:.4g}, {:.4g}", v[0], v[1], v[2]); }

std::string preprocessing_line(const PreprocessConfig& p) {
  const std::string resize = p.crop_mode == CropMode::Squash ? fmt::format("{}x{}", p.resize_width(), p.resize_height())
                                                             : fmt::format("{} (shorter side)", p.resize_height());
  return fmt::format("{} resize to {}, center crop {}x{}, mean {}, std {}", filter_name(p.interpolation), resize, p.width,
                     p.height, triple(p.mean), triple(p.std));
}

// The model in words, a topic and its line each, in the order `vit inspect` prints them.
std::vector<std::pair<std::string, std::string>> description(const ViT& model) {
  const ViTConfig& c = model.config();
  const std::string head = c.pool.head == HeadKind::None         ? "no head"
                           : c.pool.head == HeadKind::Projection ? fmt::format("a projection to {} dimensions", c.classes)
                                                                 : fmt::format("{} classes", c.classes);
  std::vector<std::pair<std::string, std::string>> d = {
      {"file", model.source()},
      {"layout", fmt::format("{}, {:.2f} M parameters", c.stored_as, double(ViT::parameters(c)) / 1e6)},
      {"architecture", fmt::format("{}: patch {}, width {}, depth {}, heads {}, MLP {}, {}",
                                   c.arch.empty() ? "ViT" : c.arch, c.patch, c.width, c.depth, c.heads, c.mlp, head)},
      {"family", family_line(c)}};
  if (c.attn.rel_pos_window || !c.attn.k_bias || !c.attn.qkv_fused || c.rope.on || !c.attn.qkv_bias || !c.proj_bias || c.attn.norm)
    d.push_back({"attention", attention_line(c)});
  if (c.swiglu())
    d.push_back({"mlp", fmt::format("SwiGLU: silu(fc1_g x) * fc1_x x{}, then fc2", c.mlp_norm ? ", LayerNorm (mlp.norm)" : "")});
  if (c.naflex.on) {
    d.push_back({"input", fmt::format("NaFlex: each image at its own aspect ratio, within {} patches of {} pixels "
                                      "(--max-patches), padded to them in a batch; attention and pooling masked",
                                      c.naflex.max_patches, c.patch)});
    d.push_back({"tokens", fmt::format("up to {} patches: the image's own grid", c.tokens())});
    d.push_back({"position table", fmt::format("{}x{} grid, resized to each image's grid ({}, antialiased), kept per grid",
                                               c.pos_grid_h, c.pos_grid_w, filter_name(c.naflex.pos_filter))});
  } else {
    const int64_t read_h = c.grid_h() * c.patch, read_w = c.grid_w() * c.patch;
    d.push_back({"input", fmt::format("{}x{} RGB", c.img_h(), c.img_w()) +
                              (read_h != c.img_h() || read_w != c.img_w()
                                   ? fmt::format(" (the patch embedding reads its top-left {}x{}, as timm's)", read_h, read_w)
                                   : "")});
    d.push_back({"tokens", tokens_line(c)});
    d.push_back({"position table", position_line(c)});
  }
  d.push_back({"pooling", pooling_line(c)});
  if (c.dist_token) d.push_back({"head", "mean of head and head_dist (timm's eval output)"});
  if (c.classes == 0) d.push_back({"head", "none: embeddings only (vit embed)"});
  if (c.pool.head == HeadKind::Projection)
    d.push_back({"head", "a projection into a joint image-text space: no classes; vit embed --head, or labels from "
                         "text embeddings (--text-embeddings)"});
  d.push_back({"embedding", fmt::format("{} values per image from vit embed (the pooled features){}", c.width,
                                        c.classes ? fmt::format(", {} with --head ({})", c.classes,
                                                                c.pool.head == HeadKind::Projection ? "the projection" : "the logits")
                                                  : "")});
  d.push_back({"preprocessing",
               c.naflex.on ? fmt::format("NaFlex (timm's ResizeToSequence): {} resize, antialiased, to the largest grid "
                                      "within the budget, no crop, mean {}, std {}",
                                      filter_name(c.pre.interpolation), triple(c.pre.mean), triple(c.pre.std))
                        : preprocessing_line(c.pre)});
  if (c.pool.head == HeadKind::Classifier)
    d.push_back({"labels", c.labels.empty() ? "none in the files" : fmt::format("{} names ({}, ...)", c.labels.size(), c.labels[0])});
  return d;
}

}  // namespace

ModelInfo model_info(const ViT& model) {
  const ViTConfig& c = model.config();
  ModelInfo i;
  i.name = model_name(model.source());
  i.family = family_name(c.family);
  i.head = c.pool.head;
  i.embedding = c.width;
  i.file = model.source();
  i.arch = c.arch;
  i.stored_as = c.stored_as;
  i.precision = precision_name(model.precision());
  i.pool = pool_name(c.pool.kind);
  i.interpolation = filter_name(c.pre.interpolation);
  i.crop_mode = crop_mode_name(c.pre.crop_mode);
  i.patch = c.patch;
  i.width = c.width;
  i.depth = c.depth;
  i.heads = c.heads;
  i.mlp = c.mlp;
  i.classes = c.pool.head == HeadKind::Classifier ? c.classes : 0;
  i.projection = c.pool.head == HeadKind::Projection ? c.classes : 0;
  i.input_height = c.img_h();
  i.input_width = c.img_w();
  i.tokens = c.tokens();
  i.max_patches = c.naflex.on ? c.naflex.max_patches : 0;
  i.parameters = ViT::parameters(c);
  i.crop_pct = c.pre.crop_pct;
  i.resize = c.pre.resize_height();
  for (int k = 0; k < 3; ++k) {
    i.mean[k] = c.pre.mean[size_t(k)];
    i.std[k] = c.pre.std[size_t(k)];
  }
  i.description = description(model);
  i.flops = model.flops(1);
  i.weight_bytes = int64_t(model.weight_bytes());
  i.int8_weights = model.int8_source();
  for (const auto& [name, lw] : model.linear_layers())
    i.layers.push_back({name, precision_name(lw->precision), linear_summary(*lw)});
  i.attention = model.attention_summary();
  for (const auto& [what, from] : c.origin.settings())
    if (!from->empty()) i.origins.push_back({what, *from});
  return i;
}

}  // namespace vit

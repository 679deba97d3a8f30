// `vit inspect`: what the engine understood of a model file, without running it: architecture,
// tokens, parameters, FLOPs per image, storage dtype, the weights at a --precision, preprocessing, and
// where each setting came from.
#include <spdlog/fmt/fmt.h>

#include <memory>

#include "apps/command.h"
#include "apps/options.h"
#include "engine/nn/linear.h"

namespace vit::app {
namespace {

// What this CPU runs natively, as oneDNN sees it: "oneDNN runs it as avx2: f32, int8 (...); bf16 ...".
std::string precision_support() {
  const CpuIsa isa = cpu_isa();
  std::string s = "oneDNN runs it as " + isa.name + ": f32, int8 (" +
                  (isa.vnni ? std::string("VNNI, 8-bit weights") : std::string("no VNNI: 7-bit weights")) + ")";
  return s + (isa.bf16 ? ", bf16" : "; bf16 needs avx512_bf16 or AMX");
}


std::string triple(const std::array<float, 3>& v) { return fmt::format("{:.4g}, {:.4g}, {:.4g}", v[0], v[1], v[2]); }

int print_inspect(ViT& model) {
  const ViTConfig& c = model.config();
  const PreprocessConfig& p = c.pre;
  std::string tokens = fmt::format("{} = {} patches ({}x{})", c.tokens(), c.patches(), c.grid_h(), c.grid_w());
  if (c.class_token) tokens += " + class token";
  if (c.dist_token) tokens += " + distillation token";
  if (c.reg_tokens) tokens += fmt::format(" + {} register tokens (reg_token, not in the position table)", c.reg_tokens);
  std::string pos = c.abs_pos ? fmt::format("{}x{} grid", c.pos_grid_h, c.pos_grid_w) : "none";
  if (c.abs_pos && c.pos_grid_h != c.grid_h())
    pos += fmt::format(", resampled to {}x{} ({})", c.grid_h(), c.grid_w(),
                       c.pos_antialias ? "bicubic, antialiased" : "bicubic, not antialiased: torch's, as the layout's code");
  pos += c.no_embed_class ? ", patches only (no_embed_class)" : "";
  const std::string resize = p.crop_mode == CropMode::Squash
                                 ? fmt::format("{}x{}", p.resize_width(), p.resize_height())
                                 : fmt::format("{} (shorter side)", p.resize_height());

  std::printf("file           %s\n", model.source().c_str());
  std::printf("layout         %s, %.2f M parameters\n", c.stored_as.c_str(), double(c.parameters()) / 1e6);
  const std::string head = c.classes == 0        ? "no head"
                           : c.head_is_projection ? fmt::format("a projection to {} dimensions", c.classes)
                                                  : fmt::format("{} classes", c.classes);
  std::printf("architecture   %s: patch %lld, width %lld, depth %lld, heads %lld, MLP %lld, %s\n",
              c.arch.empty() ? "ViT" : c.arch.c_str(), (long long)c.patch, (long long)c.width, (long long)c.depth,
              (long long)c.heads, (long long)c.mlp, head.c_str());
  std::printf("family         %s%s%s%s\n", c.family.c_str(),
              c.layer_scale ? (c.family == "BEiT" ? ", layer scale on both branches of every block (gamma_1, gamma_2)"
                                                  : ", layer scale on both branches of every block (ls1, ls2)")
                            : "",
              c.norm_pre ? ", LayerNorm before the blocks (norm_pre)" : "",
              c.quick_gelu ? ", QuickGELU in the MLPs" : c.gelu_tanh ? ", GELU's tanh form in the MLPs" : "");
  if (c.rel_pos_window || !c.k_bias || !c.qkv_fused || c.rope)
    std::printf("attention      %s%s%s%s\n", c.k_bias ? "q, k, v biases" : "q and v biases, no k bias",
                c.qkv_fused ? "" : ", separate q_proj, k_proj, v_proj (run as one)",
                c.rel_pos_window
                    ? fmt::format(", relative position bias per block ({}x{} window, {} rows per head{})",
                                  c.rel_pos_window, c.rel_pos_window, c.rel_pos_len(),
                                  c.grid_h() == c.rel_pos_window && c.grid_w() == c.rel_pos_window
                                      ? ""
                                      : fmt::format(", resized to {}x{} as timm does", c.grid_h(), c.grid_w()))
                          .c_str()
                    : "",
                c.rope ? fmt::format(", 2-D rotary embedding on the patch tokens' q and k (interleaved pairs, "
                                     "temperature {:g}{})", double(c.rope_temperature),
                                     c.rope_ref_h ? fmt::format(", grid rescaled to {}x{}", c.rope_ref_h, c.rope_ref_w)
                                                  : std::string())
                                .c_str()
                       : "");
  if (c.swiglu)
    std::printf("mlp            SwiGLU: silu(fc1_g x) * fc1_x x%s, then fc2\n",
                c.scale_mlp ? ", LayerNorm (mlp.norm)" : "");
  std::printf("input          %lldx%lld RGB\n", (long long)c.img_h(), (long long)c.img_w());
  std::printf("tokens         %s\n", tokens.c_str());
  std::printf("position table %s\n", pos.c_str());
  std::printf("pooling        %s%s%s, LayerNorm eps %g\n", c.pool == Pool::Token ? "class token" : c.pool == Pool::Avg ? "mean of patch tokens" : "attention pool (MAP head: a learned query over all tokens, then LayerNorm + MLP)",
              c.final_norm ? ", final norm" : "", c.fc_norm ? ", fc_norm after pooling" : "", double(c.eps));
  if (c.dist_token) std::printf("head           mean of head and head_dist (timm's eval output)\n");
  if (c.classes == 0) std::printf("head           none: embeddings only (vit embed)\n");
  if (c.head_is_projection)
    std::printf("head           a projection into a joint image-text space: no classes; vit embed --head, or labels "
                "from text embeddings (--text-embeddings)\n");
  std::printf("embedding      %lld values per image from vit embed (the pooled features)%s\n", (long long)c.width,
              c.classes ? fmt::format(", {} with --head ({})", c.classes, c.head_is_projection ? "the projection" : "the logits").c_str()
                        : "");
  std::printf("FLOPs/image    %.3g G (multiply-add = 2)\n", model.plan(1).program().flops() / 1e9);
  std::printf("precision      %s, weights %.1f MB resident\n", precision_name(model.precision()),
              double(model.weight_bytes()) / 1e6);
  if (!model.int8_source().empty())
    std::printf("int8 weights   %s: rounded by vit quantize (GPTQ)%s\n", model.int8_source().c_str(),
                model.precision() == Precision::Int8 ? ", used" : ", used at --precision int8");
  std::printf("this CPU       %s\n", precision_support().c_str());
  std::printf("linear layers  how each runs on this CPU (oneDNN form; int8: path)\n");
  for (const auto& [name, lw] : model.linear_layers())
    std::printf("  %-26s %s, %s\n", name.c_str(), precision_name(lw->precision), linear_summary(*lw).c_str());
  std::printf("attention core %s\n", model.attention_summary().c_str());
  std::printf("preprocessing  %s resize to %s, center crop %dx%d, mean %s, std %s\n", filter_name(p.interpolation),
              resize.c_str(), p.width, p.height, triple(p.mean).c_str(), triple(p.std).c_str());
  if (c.classes > 0 && !c.head_is_projection)
    std::printf("labels         %s\n", c.labels.empty() ? "none in the files"
                                                        : fmt::format("{} names ({}, ...)", c.labels.size(), c.labels[0]).c_str());
  std::printf("where each setting came from:\n");
  for (const auto& [what, from] : c.origin.settings())
    if (!from->empty()) std::printf("  %-14s %s\n", what, from->c_str());
  return kExitOk;
}

}  // namespace

void add_inspect_command(CLI::App& app, Prepare* prepare) {
  auto o = std::make_shared<ModelOptions>();
  CLI::App* cmd = app.add_subcommand("inspect", "print what the engine understood of a model file");
  CLI::Option* positional =
      cmd->add_option("MODEL", o->model, "a .safetensors file or the folder holding it (default: the DeiT-Tiny folder)");
  // -m as every other command takes it, or the bare path; not both.
  positional->excludes(cmd->add_option("-m,--model", o->model, "the same, as the other commands take it"));
  cmd->add_option("--config", o->config, "config.json (timm or Hugging Face form) overriding the one beside the weights");
  add_img_size_option(cmd, &o->img_size);
  add_precision_option(cmd, &o->precision);  // the weights as that precision keeps them, and their size
  cmd->callback([o, prepare] {
    *prepare = [o]() -> std::function<int()> {
      auto model = std::make_shared<ViT>(load_model(*o));
      return [model] { return print_inspect(*model); };
    };
  });
}

}  // namespace vit::app

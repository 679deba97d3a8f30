// `vit inspect`: what the engine understood of a model file, without running it: architecture,
// tokens, parameters, FLOPs per image, storage dtype, preprocessing, and where each setting came from.
#include <spdlog/fmt/fmt.h>

#include <map>

#include "common.h"
#include "engine/safetensors.h"
#include "models/checkpoint.h"

namespace vit::app {
namespace {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::U8: return "U8";
  }
  return "?";
}

std::string triple(const std::array<float, 3>& v) { return fmt::format("{:.4g}, {:.4g}, {:.4g}", v[0], v[1], v[2]); }

int run_inspect(const ModelOptions& o) {
  ViT model = load_model(o);
  const ViTConfig& c = model.config();
  const Checkpoint ck(model.source());
  const SafeTensors st(model.source());
  std::map<std::string, int64_t> by_dtype;
  int64_t params = 0;
  for (const auto& [name, t] : st.tensors()) {
    by_dtype[dtype_name(t.dtype)] += t.numel();
    params += t.numel();
  }
  std::string dtypes;
  for (const auto& [d, n] : by_dtype) dtypes += (dtypes.empty() ? "" : ", ") + d;
  const double flops = model.plan(1).program().flops();
  const PreprocessConfig& p = c.pre;
  const int resize = p.resize > 0 ? p.resize : int(p.height / p.crop_pct);
  std::string tokens = fmt::format("{} = {} patches ({}x{})", c.tokens(), c.patches(), c.grid_h(), c.grid_w());
  if (c.class_token) tokens += " + class token";
  if (c.dist_token) tokens += " + distillation token";
  std::string pos = fmt::format("{}x{} grid", c.pos_grid_h, c.pos_grid_w);
  if (c.pos_grid_h != c.grid_h()) pos += fmt::format(", resampled to {}x{} (bicubic, antialiased)", c.grid_h(), c.grid_w());
  pos += c.no_embed_class ? ", patches only (no_embed_class)" : "";

  std::printf("file           %s\n", model.source().c_str());
  std::printf("layout         %s names, %s, %.2f M parameters\n", layout_name(ck.layout()), dtypes.c_str(), params / 1e6);
  std::printf("architecture   %s: patch %lld, width %lld, depth %lld, heads %lld, MLP %lld, %lld classes\n",
              c.arch.empty() ? "ViT" : c.arch.c_str(), (long long)c.patch, (long long)c.width, (long long)c.depth,
              (long long)c.heads, (long long)c.mlp, (long long)c.classes);
  std::printf("input          %lldx%lld RGB\n", (long long)c.img_h, (long long)c.img_w);
  std::printf("tokens         %s\n", tokens.c_str());
  std::printf("position table %s\n", pos.c_str());
  std::printf("pooling        %s%s%s, LayerNorm eps %g\n", c.global_pool == "token" ? "class token" : "mean of patch tokens",
              c.final_norm ? ", final norm" : "", c.fc_norm ? ", fc_norm after pooling" : "", double(c.eps));
  if (c.dist_token) std::printf("head           mean of head and head_dist (timm's eval output)\n");
  std::printf("FLOPs/image    %.3g G (multiply-add = 2)\n", flops / 1e9);
  std::printf("preprocessing  %s resize to %d%s, center crop %dx%d, mean %s, std %s\n", filter_name(p.interpolation),
              resize, (p.crop_mode == "squash" ? "x" + std::to_string(resize) : std::string(" (shorter side)")).c_str(),
              p.width, p.height, triple(p.mean).c_str(), triple(p.std).c_str());
  std::printf("labels         %s\n", c.labels.empty() ? "none in the files"
                                                      : fmt::format("{} names ({}, ...)", c.labels.size(), c.labels[0]).c_str());
  std::printf("where each setting came from:\n");
  for (const auto& [what, from] : c.origin) std::printf("  %-14s %s\n", what.c_str(), from.c_str());
  return kExitOk;
}

}  // namespace

void add_inspect_command(CLI::App& app, std::function<int()>* run) {
  auto o = std::make_shared<ModelOptions>();
  CLI::App* cmd = app.add_subcommand("inspect", "print what the engine understood of a model file");
  cmd->add_option("MODEL", o->model, "a .safetensors file or the folder holding it (default: the DeiT-Tiny folder)");
  cmd->add_option("--config", o->config, "config.json (timm or Hugging Face form) overriding the one beside the weights");
  cmd->add_option("--img-size", o->img_size, "as vit classify --img-size")->check(CLI::Range(1, 8192));
  cmd->callback([o, run] { *run = [o] { return run_inspect(*o); }; });
}

}  // namespace vit::app

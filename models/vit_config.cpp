// Resolves a ViTConfig: tensor shapes first, then the config.json (timm or Hugging Face form), then
// timm's defaults for the architecture. Conflicts between the config and the tensors are errors.
#include "vit_config.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <regex>

#include "checkpoint.h"
#include "engine/error.h"

namespace vit {
namespace {

using json = nlohmann::json;

struct SizeDefaults {
  const char* name;
  int64_t width, depth, heads;
};
// timm vision_transformer.py / deit.py model definitions.
const SizeDefaults kSizes[] = {{"tiny", 192, 12, 3},   {"small", 384, 12, 6},  {"medium", 512, 12, 8},
                               {"base", 768, 12, 12},  {"large", 1024, 24, 16}, {"huge", 1280, 32, 16}};

const std::regex kArchRe(R"(^(vit|deit)_(tiny|small|medium|base|large|huge)(_distilled)?_patch(\d+)_(\d+))");

// timm's defaults for an architecture name; false when the name is not one we know.
bool arch_defaults(const std::string& arch, ViTConfig* c) {
  std::smatch m;
  if (!std::regex_search(arch, m, kArchRe)) return false;
  const std::string family = m[1], size = m[2];
  for (const auto& s : kSizes)
    if (size == s.name) {
      c->width = s.width;
      c->depth = s.depth;
      c->heads = s.heads;
      c->mlp = 4 * s.width;
    }
  c->arch = m[0];
  c->dist_token = m[3].matched;
  c->patch = std::stoi(m[4]);
  c->img_h = c->img_w = std::stoi(m[5]);
  c->pos_grid_h = c->pos_grid_w = c->img_h / c->patch;
  c->pre = PreprocessConfig{};
  c->pre.height = c->pre.width = int(c->img_h);
  c->pre.crop_pct = 0.9;
  c->pre.interpolation = Filter::Bicubic;
  if (family == "vit") {  // timm's ViTs use the Inception mean/std (0.5); DeiT the ImageNet ones
    c->pre.mean = {0.5f, 0.5f, 0.5f};
    c->pre.std = {0.5f, 0.5f, 0.5f};
    if (c->img_h >= 384) {
      c->pre.crop_pct = 1.0;
      c->pre.crop_mode = "squash";
    }
  }
  return true;
}

template <typename T>
T get_as(const json& j, const char* key, const std::string& where) {
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    throw Error(where + ": '" + key + "' has the wrong type: " + j.at(key).dump());
  }
}

std::array<float, 3> triple(const json& j, const char* key, const std::string& where) {
  const auto v = get_as<std::vector<float>>(j, key, where);
  if (v.size() == 1) return {v[0], v[0], v[0]};
  if (v.size() != 3) throw Error(where + ": '" + key + "' needs 3 values, got " + std::to_string(v.size()));
  return {v[0], v[1], v[2]};
}

void apply_pretrained_cfg(const json& p, const std::string& where, ViTConfig* c) {
  if (p.contains("input_size")) {
    const auto s = get_as<std::vector<int64_t>>(p, "input_size", where);
    if (s.size() != 3 || s[0] != 3 || s[1] <= 0 || s[2] <= 0)
      throw Error(where + ": input_size must be [3, H, W], got " + p["input_size"].dump());
    c->img_h = s[1];
    c->img_w = s[2];
  }
  if (p.contains("interpolation"))
    c->pre.interpolation = filter_from_name(get_as<std::string>(p, "interpolation", where));
  if (p.contains("crop_pct") && !p["crop_pct"].is_null()) {
    c->pre.crop_pct = get_as<double>(p, "crop_pct", where);
    if (!(c->pre.crop_pct > 0.0 && c->pre.crop_pct <= 4.0))
      throw Error(where + ": crop_pct must be in (0, 4], got " + p["crop_pct"].dump());
  }
  if (p.contains("crop_mode")) {
    c->pre.crop_mode = get_as<std::string>(p, "crop_mode", where);
    if (c->pre.crop_mode != "center" && c->pre.crop_mode != "squash")
      throw Error(where + ": crop_mode '" + c->pre.crop_mode + "' is not supported (center or squash)");
  }
  if (p.contains("mean")) c->pre.mean = triple(p, "mean", where);
  if (p.contains("std")) {
    c->pre.std = triple(p, "std", where);
    for (float s : c->pre.std)
      if (!(s > 0.f)) throw Error(where + ": std values must be positive");
  }
}

void apply_timm_config(const json& j, const std::string& where, ViTConfig* c) {
  if (j.contains("global_pool")) c->global_pool = get_as<std::string>(j, "global_pool", where);
  if (j.contains("model_args")) {
    const json& a = j["model_args"];
    if (!a.is_object()) throw Error(where + ": model_args is not an object");
    if (a.contains("num_heads")) c->heads = get_as<int64_t>(a, "num_heads", where);
    if (a.contains("global_pool")) c->global_pool = get_as<std::string>(a, "global_pool", where);
    if (a.contains("no_embed_class")) c->no_embed_class = get_as<bool>(a, "no_embed_class", where);
    if (a.contains("img_size")) {
      const auto v = a["img_size"].is_array() ? get_as<std::vector<int64_t>>(a, "img_size", where)
                                              : std::vector<int64_t>(2, get_as<int64_t>(a, "img_size", where));
      if (v.size() != 2) throw Error(where + ": img_size must be a size or [H, W], got " + a["img_size"].dump());
      c->img_h = v[0];
      c->img_w = v[1];
    }
  }
  if (j.contains("pretrained_cfg")) apply_pretrained_cfg(j["pretrained_cfg"], where, c);
  if (j.contains("label_names")) c->labels = get_as<std::vector<std::string>>(j, "label_names", where);
}

void apply_hf_config(const json& j, const std::string& where, ViTConfig* c) {
  if (j.contains("num_attention_heads")) c->heads = get_as<int64_t>(j, "num_attention_heads", where);
  if (j.contains("layer_norm_eps")) c->eps = get_as<float>(j, "layer_norm_eps", where);
  if (j.contains("image_size")) c->img_h = c->img_w = get_as<int64_t>(j, "image_size", where);
  if (j.contains("hidden_act") && get_as<std::string>(j, "hidden_act", where) != "gelu")
    throw Error(where + ": hidden_act '" + j["hidden_act"].get<std::string>() + "' is not supported (gelu)");
  // ViTImageProcessor's defaults: resize straight to the input size (bilinear), rescale, mean = std = 0.5.
  c->pre.crop_mode = "squash";
  c->pre.crop_pct = 1.0;
  c->pre.interpolation = Filter::Bilinear;
  c->pre.mean = {0.5f, 0.5f, 0.5f};
  c->pre.std = {0.5f, 0.5f, 0.5f};
  if (j.contains("id2label")) {
    const json& m = j["id2label"];
    c->labels.assign(m.size(), "");
    for (auto& [k, v] : m.items()) {
      size_t i = 0;
      try {
        i = std::stoul(k);
      } catch (const std::exception&) {
        throw Error(where + ": id2label key '" + k + "' is not a class index");
      }
      if (i >= c->labels.size()) throw Error(where + ": id2label has index " + k + " past its size");
      c->labels[i] = v.is_string() ? v.get<std::string>() : v.dump();
    }
  }
}

// A config value that must agree with what the tensors say.
void check_int(const json& j, const char* key, int64_t have, const std::string& where, const std::string& file,
               const std::string& what) {
  if (!j.contains(key) || j[key].is_null()) return;
  const json& v = j[key];
  const int64_t want = v.is_array() && !v.empty() ? get_as<std::vector<int64_t>>(j, key, where).front()
                                                  : get_as<int64_t>(j, key, where);
  if (want != have)
    throw Error(where + ": " + key + " is " + std::to_string(want) + ", but " + file + " has " + what + " " +
                std::to_string(have));
}

void check_bool(const json& j, const char* key, bool have, const std::string& where, const std::string& file,
                const std::string& what) {
  if (!j.contains(key) || j[key].is_null()) return;
  if (get_as<bool>(j, key, where) != have)
    throw Error(where + ": " + key + " is " + j[key].dump() + ", but " + file + (have ? " has " : " has no ") + what);  // what: a tensor name
}

// timm's model_args (and num_classes) against the tensors.
void check_timm_args(const json& j, const std::string& where, const std::string& file, const ViTConfig& c) {
  check_int(j, "num_classes", c.classes, where, file, "a head of");
  if (!j.contains("model_args")) return;
  const json& a = j["model_args"];
  check_int(a, "patch_size", c.patch, where, file, "patch size");
  check_int(a, "embed_dim", c.width, where, file, "width");
  check_int(a, "depth", c.depth, where, file, "depth");
  check_int(a, "in_chans", c.in_chans, where, file, "input channels");
  check_int(a, "num_classes", c.classes, where, file, "a head of");
  check_bool(a, "class_token", c.class_token, where, file, "cls_token");
  check_bool(a, "qkv_bias", c.qkv_bias, where, file, "qkv biases");
  check_bool(a, "fc_norm", c.fc_norm, where, file, "fc_norm");
  if (a.contains("mlp_ratio") && !a["mlp_ratio"].is_null()) {
    const double r = get_as<double>(a, "mlp_ratio", where);
    if (int64_t(std::llround(r * double(c.width))) != c.mlp)
      throw Error(where + ": mlp_ratio is " + a["mlp_ratio"].dump() + ", but " + file + " has MLP width " +
                  std::to_string(c.mlp) + " for width " + std::to_string(c.width));
  }
  if (a.contains("reg_tokens") && !a["reg_tokens"].is_null() && get_as<int64_t>(a, "reg_tokens", where) != 0)
    throw Error(where + ": reg_tokens (register tokens) are not supported");
}

void check_hf_args(const json& j, const std::string& where, const std::string& file, const ViTConfig& c) {
  check_int(j, "hidden_size", c.width, where, file, "width");
  check_int(j, "num_hidden_layers", c.depth, where, file, "depth");
  check_int(j, "intermediate_size", c.mlp, where, file, "MLP width");
  check_int(j, "patch_size", c.patch, where, file, "patch size");
  check_int(j, "num_channels", c.in_chans, where, file, "input channels");
  check_bool(j, "qkv_bias", c.qkv_bias, where, file, "query/key/value biases");
}

// Hugging Face preprocessor_config.json (ViTImageProcessor and its relatives): resize, optional center
// crop, rescale and normalize, folded into timm's form.
void apply_hf_preprocessor(const json& p, const std::string& where, ViTConfig* c) {
  if (!p.is_object()) throw Error(where + ": not a JSON object");
  const auto flag = [&](const char* key, bool dflt) { return p.contains(key) ? get_as<bool>(p, key, where) : dflt; };
  // size / crop_size: an int, {"height", "width"} or {"shortest_edge"}.
  const auto dims = [&](const char* key, int64_t* h, int64_t* w, int64_t* shortest) {
    const json& v = p.at(key);
    *h = *w = *shortest = 0;
    if (v.is_number_integer()) *h = *w = v.get<int64_t>();
    else if (v.is_object() && v.contains("height") && v.contains("width"))
      *h = get_as<int64_t>(v, "height", where), *w = get_as<int64_t>(v, "width", where);
    else if (v.is_object() && v.contains("shortest_edge")) *shortest = get_as<int64_t>(v, "shortest_edge", where);
    else throw Error(where + ": '" + key + "' is neither a size nor {height, width} nor {shortest_edge}: " + v.dump());
    if (*h < 0 || *w < 0 || *shortest < 0 || (*h == 0 && *w == 0 && *shortest == 0) || *h > 65536 ||
        *w > 65536 || *shortest > 65536)
      throw Error(where + ": '" + key + "' is out of range: " + v.dump());
  };
  if (!flag("do_resize", true)) throw Error(where + ": do_resize false is not supported (the model needs a fixed size)");
  int64_t h = 0, w = 0, shortest = 0;
  if (p.contains("size")) dims("size", &h, &w, &shortest);
  else h = w = c->img_h;
  int64_t ch = h, cw = w, cs = 0;
  if (flag("do_center_crop", false)) {
    if (!p.contains("crop_size")) throw Error(where + ": do_center_crop without crop_size");
    dims("crop_size", &ch, &cw, &cs);
    if (cs) throw Error(where + ": crop_size must be a size or {height, width}");
  } else if (shortest) {
    throw Error(where + ": size {shortest_edge} without a center crop gives no fixed input size");
  }
  if (h != w || ch != cw) throw Error(where + ": only square sizes are supported, got " + p.at("size").dump());
  c->pre.crop_mode = shortest ? "center" : "squash";
  c->pre.resize = int(shortest ? shortest : h);
  c->pre.crop_pct = double(ch) / double(c->pre.resize);
  c->img_h = ch;
  c->img_w = cw;
  if (p.contains("resample")) {
    static const Filter kPil[] = {Filter::Nearest, Filter::Lanczos, Filter::Bilinear, Filter::Bicubic, Filter::Box,
                                  Filter::Hamming};
    const int64_t r = get_as<int64_t>(p, "resample", where);
    if (r < 0 || r > 5) throw Error(where + ": resample " + std::to_string(r) + " is not a PIL filter (0 to 5)");
    c->pre.interpolation = kPil[r];
  }
  const double scale = flag("do_rescale", true)
                           ? (p.contains("rescale_factor") ? get_as<double>(p, "rescale_factor", where) : 1.0 / 255)
                           : 1.0;
  if (!(scale > 0)) throw Error(where + ": rescale_factor must be positive");
  std::array<float, 3> mean{0.5f, 0.5f, 0.5f}, std{0.5f, 0.5f, 0.5f};
  if (p.contains("image_mean")) mean = triple(p, "image_mean", where);
  if (p.contains("image_std")) std = triple(p, "image_std", where);
  if (!flag("do_normalize", true)) mean = {0, 0, 0}, std = {1, 1, 1};
  // (x * scale - m) / s == (x / 255 - m / (255 scale)) / (s / (255 scale))
  for (int i = 0; i < 3; ++i) {
    if (!(std[size_t(i)] > 0)) throw Error(where + ": image_std values must be positive");
    c->pre.mean[size_t(i)] = float(mean[size_t(i)] / (255.0 * scale));
    c->pre.std[size_t(i)] = float(std[size_t(i)] / (255.0 * scale));
  }
}

int64_t isqrt_exact(int64_t n) {
  const auto r = int64_t(std::llround(std::sqrt(double(n))));
  return r * r == n ? r : -1;
}

}  // namespace

std::vector<std::string> known_archs() {
  return {"vit_tiny_patch16_224",  "vit_small_patch16_224", "vit_base_patch16_224", "vit_base_patch32_224",
          "vit_large_patch16_224", "vit_base_patch16_384", "deit_tiny_patch16_224", "deit_small_patch16_224",
          "deit_base_patch16_224"};
}

ViTConfig config_for_arch(const std::string& arch) {
  ViTConfig c;
  if (!arch_defaults(arch, &c) || c.arch != arch) {
    std::string list;
    for (const auto& a : known_archs()) list += (list.empty() ? "" : ", ") + a;
    throw Error("unknown architecture '" + arch + "' (known: " + list + ")");
  }
  c.classes = 1000;
  return c;
}

std::string ViTConfig::summary() const {
  return (arch.empty() ? std::string("ViT") : arch) + ": patch " + std::to_string(patch) + ", width " +
         std::to_string(width) + ", depth " + std::to_string(depth) + ", heads " + std::to_string(heads) +
         ", mlp " + std::to_string(mlp) + ", classes " + std::to_string(classes) + ", input " +
         std::to_string(img_h) + "x" + std::to_string(img_w) + ", tokens " + std::to_string(tokens()) +
         ", pool " + global_pool + (dist_token ? ", distilled" : "");
}

ViTConfig resolve_config(const Checkpoint& ck, const ConfigSources& src) {
  ViTConfig c;
  const std::string& file = ck.path();
  const json* config = src.config;
  const std::string& config_name = src.config_name;
  if (config && !config->is_object()) throw Error(config_name + ": not a JSON object");
  const bool hf_config = config && (config->contains("model_type") || config->contains("architectures"));
  std::string arch;
  if (config && !hf_config && config->contains("architecture"))
    arch = get_as<std::string>(*config, "architecture", config_name);
  else if (!config)
    arch = src.name_hint;
  const bool known = !arch.empty() && arch_defaults(arch, &c);
  if (!known) c.pre = PreprocessConfig{};
  bool heads_given = known;
  const std::string arch_origin = "timm's defaults for " + c.arch;

  // The shapes: always from the tensors.
  const auto pw = ck.shape("patch_embed.proj.weight");  // [D, C, P, P]
  if (pw.size() != 4 || pw[2] != pw[3])
    throw Error(file + ": patch_embed.proj.weight has shape " + shape_to_string(pw) + ", expected [D, C, P, P]");
  c.width = pw[0];
  c.in_chans = pw[1];
  c.patch = pw[2];
  if (c.in_chans != 3) throw Error(file + ": the model takes " + std::to_string(c.in_chans) + " channels, not RGB");
  c.depth = ck.count_blocks();
  if (c.depth == 0) throw Error(file + ": missing tensor blocks.0.norm1.weight (no encoder blocks)");
  c.mlp = ck.shape("blocks.0.mlp.fc1.weight")[0];
  if (!ck.has("head.weight")) throw Error(file + ": missing tensor head.weight (a model without a classifier head)");
  c.classes = ck.shape("head.weight")[0];
  c.class_token = ck.has("cls_token");
  c.dist_token = ck.has("dist_token");
  c.final_norm = ck.has("norm.weight");
  c.fc_norm = ck.has("fc_norm.weight");
  c.qkv_bias = ck.has("blocks.0.attn.qkv.bias");
  c.global_pool = c.class_token ? "token" : "avg";
  for (const char* k : {"patch", "width", "depth", "mlp", "classes", "tokens", "norms"})
    c.origin[k] = "file (tensor shapes)";
  c.origin["pool"] = c.class_token ? "default (class token present)" : "default (no class token)";
  c.origin["heads"] = known ? arch_origin : "default (width / 64)";
  c.origin["eps"] = "default";
  c.origin["input size"] = known ? arch_origin : "file (position table grid)";
  c.origin["preprocessing"] = known ? arch_origin : "default (timm's ImageNet defaults)";
  c.origin["labels"] = "none in the files (ImageNet-1k names for 1000 classes, else class_<i>)";

  if (hf_config) {
    check_hf_args(*config, config_name, file, c);
    apply_hf_config(*config, config_name, &c);
    heads_given = config->contains("num_attention_heads");
    if (heads_given) c.origin["heads"] = config_name;
    if (config->contains("layer_norm_eps")) c.origin["eps"] = config_name;
    if (config->contains("image_size")) c.origin["input size"] = config_name;
    c.origin["preprocessing"] = "default (Hugging Face ViTImageProcessor's)";
  } else if (config) {
    check_timm_args(*config, config_name, file, c);
    apply_timm_config(*config, config_name, &c);
    const bool args = config->contains("model_args");
    heads_given = known || (args && (*config)["model_args"].contains("num_heads"));
    if (args && (*config)["model_args"].contains("num_heads")) c.origin["heads"] = config_name;
    if (config->contains("global_pool") || (args && (*config)["model_args"].contains("global_pool")))
      c.origin["pool"] = config_name;
    if (config->contains("pretrained_cfg")) c.origin["input size"] = c.origin["preprocessing"] = config_name;
    if (args && (*config)["model_args"].contains("img_size")) c.origin["input size"] = config_name;
  }
  if (config && !c.labels.empty()) c.origin["labels"] = config_name;
  if (src.preprocessor) {
    apply_hf_preprocessor(*src.preprocessor, src.preprocessor_name, &c);
    c.origin["preprocessing"] = c.origin["input size"] = src.preprocessor_name;
  }
  if (!heads_given) c.heads = std::max<int64_t>(1, c.width / 64);
  if (!config && ck.layout() == CheckpointLayout::Torchvision) {
    // torchvision's ViT weights are evaluated with a bilinear resize to 256 and a 224 center crop.
    c.pre.interpolation = Filter::Bilinear;
    c.pre.crop_pct = 0.875;
    c.origin["preprocessing"] = "default (torchvision's: bilinear, resize 256, crop 224)";
  }
  if (!config && !src.preprocessor)
    spdlog::warn("{}: no config.json beside the model and no --config: using {} (heads {}, eps 1e-6, {} pooling, "
                 "{} resize, crop_pct {}, mean {:.3f},{:.3f},{:.3f})",
                 file,
                 known ? "timm's defaults for " + c.arch
                       : ck.layout() == CheckpointLayout::Torchvision ? "torchvision's defaults" : "generic defaults",
                 c.heads, c.global_pool,
                 filter_name(c.pre.interpolation), c.pre.crop_pct, c.pre.mean[0], c.pre.mean[1], c.pre.mean[2]);
  if (c.heads <= 0 || c.width % c.heads != 0)
    throw Error(config_name + ": " + std::to_string(c.heads) + " heads do not divide width " + std::to_string(c.width));

  // The position table says which grid it was trained at.
  const auto pe = ck.shape("pos_embed");
  if (pe.size() != 3 || pe[0] != 1 || pe[2] != c.width)
    throw Error(file + ": pos_embed has shape " + shape_to_string(pe) + ", expected [1, T, " +
                std::to_string(c.width) + "]");
  int64_t g = c.no_embed_class ? isqrt_exact(pe[1]) : isqrt_exact(pe[1] - c.prefix_tokens());
  if (g < 0 && !c.no_embed_class && c.prefix_tokens() > 0 && isqrt_exact(pe[1]) > 0) {
    c.no_embed_class = true;  // the table covers patches only (timm no_embed_class)
    g = isqrt_exact(pe[1]);
  }
  if (g <= 0)
    throw Error(file + ": pos_embed of " + std::to_string(pe[1]) + " positions is not a square grid plus " +
                std::to_string(c.prefix_tokens()) + " prefix tokens");
  c.pos_grid_h = c.pos_grid_w = g;
  // No input size named (by an architecture, a timm pretrained_cfg or a Hugging Face config): the grid's.
  if (!known && !hf_config && !src.preprocessor && !(config && config->contains("pretrained_cfg")))
    c.img_h = c.img_w = g * c.patch;
  if (src.img_size > 0) {
    // timm's --img-size: the same crop_pct (or Hugging Face resize ratio) at the new size.
    if (c.pre.resize > 0) c.pre.resize = int(std::llround(double(c.pre.resize) * double(src.img_size) / double(c.img_h)));
    c.img_h = c.img_w = src.img_size;
    c.origin["input size"] = "--img-size";
  }
  if (c.img_h <= 0 || c.img_w <= 0 || c.img_h > 8192 || c.img_w > 8192)
    throw Error(config_name + ": input size " + std::to_string(c.img_h) + "x" + std::to_string(c.img_w) +
                " is out of range (1 to 8192)");
  if (c.img_h % c.patch || c.img_w % c.patch)
    throw Error((src.img_size > 0 ? std::string("--img-size") : config_name) + ": input size " +
                std::to_string(c.img_h) + "x" + std::to_string(c.img_w) + " is not a multiple of the patch size " +
                std::to_string(c.patch));
  c.pre.height = int(c.img_h);
  c.pre.width = int(c.img_w);

  if (c.global_pool != "token" && c.global_pool != "avg")
    throw Error(config_name + ": global_pool '" + c.global_pool + "' is not supported (token or avg)");
  if (c.global_pool == "token" && !c.class_token)
    throw Error(file + ": global_pool 'token' needs a class token, and the checkpoint has no cls_token");
  if (!c.labels.empty() && int64_t(c.labels.size()) != c.classes)
    throw Error(config_name + ": " + std::to_string(c.labels.size()) + " labels for " + std::to_string(c.classes) +
                " classes");
  return c;
}

}  // namespace vit

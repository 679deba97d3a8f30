// Each layout's settings as its own code reads them: transformers' Dinov2Config, CLIPVisionConfig and
// SiglipVisionConfig (or the vision_config inside a CLIPConfig / SiglipConfig) with the defaults of their image
// processors, and open_clip's model_cfg / preprocess_cfg (CLIPVisionCfg, PreprocessCfg).
#include "layout_config.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "config_json.h"
#include "vit/error.h"

namespace vit {
namespace {

using json = nlohmann::json;

// A value the config repeats that the tensors already gave.
void agree(const json& j, const char* key, int64_t got, const char* what, const std::string& where,
           const std::string& file) {
  if (!has(j, key)) return;
  const int64_t want = get_as<int64_t>(j, key, where);
  if (want != got)
    throw Error(where, std::string(key) + " is " + std::to_string(want) + ", but " + file + " has " + what + " " +
                           std::to_string(got));
}

void set_size(ViTConfig* c, int64_t s, const std::string& where) {
  if (s <= 0 || s > kMaxInputSize) throw Error(where, "image_size " + std::to_string(s) + " is out of range");
  c->pre.height = c->pre.width = int(s);
  c->origin.input_size = where;
}

// What transformers' config classes take when config.json leaves a setting out (as the vision_config of a
// whole CLIPModel or SiglipModel does for every value at its class default): Dinov2Config, CLIPVisionConfig,
// SiglipVisionConfig.
struct HfDefaults {
  const char* config_class;
  const char* hidden_act;
  float layer_norm_eps;
  int64_t image_size, num_attention_heads;
};
HfDefaults hf_defaults(OtherLayout l) {
  if (l == OtherLayout::HfClip) return {"CLIPVisionConfig", "quick_gelu", 1e-5f, 224, 12};
  if (l == OtherLayout::HfSiglip) return {"SiglipVisionConfig", "gelu_pytorch_tanh", 1e-6f, 224, 12};
  return {"Dinov2Config", "gelu", 1e-6f, 224, 12};
}

// transformers' ACT2FN names for the MLP activations the engine runs.
void hidden_act(const std::string& act, const std::string& where, ViTConfig* c) {
  if (act == "quick_gelu") c->act = Activation::QuickGelu;
  else if (act == "gelu_pytorch_tanh" || act == "gelu_new") c->act = Activation::GeluTanh;
  else if (act == "gelu") c->act = Activation::Gelu;
  else
    throw Error(where, "hidden_act '" + act + "' is not supported (gelu, quick_gelu, gelu_pytorch_tanh, gelu_new)");
  c->origin.act = where;
}

// The Hugging Face image processors' defaults, for a folder without its preprocessor_config.json.
void hf_processor_defaults(OtherLayout l, ViTConfig* c) {
  c->pre.interpolation = Filter::Bicubic;
  if (l == OtherLayout::HfSiglip) {  // SiglipImageProcessor: 224 x 224 squashed, mean and std 0.5
    c->pre.crop_mode = CropMode::Squash;
    c->pre.crop_pct = 1.0;
    c->pre.mean = {0.5f, 0.5f, 0.5f};
    c->pre.std = {0.5f, 0.5f, 0.5f};
    c->origin.preprocessing = "default (Hugging Face SiglipImageProcessor's)";
  } else if (l == OtherLayout::HfClip) {  // CLIPImageProcessor: shorter side to the size, center crop
    c->pre.crop_mode = CropMode::Center;
    c->pre.crop_pct = 1.0;
    c->pre.mean = {0.48145466f, 0.4578275f, 0.40821073f};
    c->pre.std = {0.26862954f, 0.26130258f, 0.27577711f};
    c->origin.preprocessing = "default (Hugging Face CLIPImageProcessor's)";
  } else {  // facebook/dinov2-*'s processor: shorter side 256, center crop 224, ImageNet mean and std
    c->pre.crop_mode = CropMode::Center;
    c->pre.crop_pct = 224.0 / 256.0;
    c->pre.mean = {0.485f, 0.456f, 0.406f};
    c->pre.std = {0.229f, 0.224f, 0.225f};
    c->origin.preprocessing = "default (facebook/dinov2's processor: resize 256, crop 224)";
  }
}

bool apply_hf(OtherLayout l, const json& top, const std::string& where, const std::string& file, ViTConfig* c) {
  if (!top.is_object()) throw Error(where, "not a JSON object");
  const std::string type = has(top, "model_type") ? get_as<std::string>(top, "model_type", where) : "";
  const bool dinov2 = l == OtherLayout::HfDinov2 || l == OtherLayout::HfDinov2Registers;
  const char* want = dinov2 ? (l == OtherLayout::HfDinov2 ? "dinov2" : "dinov2_with_registers")
                     : l == OtherLayout::HfClip ? "clip" : "siglip";
  // A whole CLIPModel / SiglipModel keeps the image tower's settings in vision_config.
  const bool whole = type == want && !dinov2;
  if (type != want && type != std::string(want) + "_vision_model")
    throw Error(where, "model_type '" + type + "' does not match the checkpoint's layout (" + other_layout_name(l) + ")");
  const json& j = whole ? top.at("vision_config") : top;
  agree(j, "hidden_size", c->width, "width", where, file);
  agree(j, "num_hidden_layers", c->depth, "depth", where, file);
  agree(j, "intermediate_size", c->mlp, "MLP width", where, file);
  agree(j, "patch_size", c->patch, "patch size", where, file);
  agree(j, "num_register_tokens", c->reg_tokens, "register tokens", where, file);
  if (has(j, "mlp_ratio") && int64_t(get_as<double>(j, "mlp_ratio", where) * double(c->width)) != c->mlp)
    throw Error(where, "mlp_ratio is " + j["mlp_ratio"].dump() + ", but " + file + " has MLP width " + std::to_string(c->mlp));
  if (has(j, "use_swiglu_ffn") && get_as<bool>(j, "use_swiglu_ffn", where))
    throw Error(where, "use_swiglu_ffn: DINOv2 with a SwiGLU MLP (giant) is not supported yet");
  const json& proj = whole ? top : j;
  agree(proj, "projection_dim", c->classes, "a projection to", where, file);
  const HfDefaults d = hf_defaults(l);
  const std::string by_default = "default (transformers' " + std::string(d.config_class) + ")";
  const auto origin = [&](const char* key) { return has(j, key) ? where : by_default; };
  c->eps = has(j, "layer_norm_eps") ? get_as<float>(j, "layer_norm_eps", where) : d.layer_norm_eps;
  c->origin.eps = origin("layer_norm_eps");
  set_size(c, has(j, "image_size") ? get_as<int64_t>(j, "image_size", where) : d.image_size, origin("image_size"));
  hidden_act(has(j, "hidden_act") ? get_as<std::string>(j, "hidden_act", where) : d.hidden_act, origin("hidden_act"), c);
  hf_processor_defaults(l, c);
  c->heads = has(j, "num_attention_heads") ? get_as<int64_t>(j, "num_attention_heads", where) : d.num_attention_heads;
  c->origin.heads = origin("num_attention_heads");
  return true;
}

// open_clip's CLIPVisionCfg and PreprocessCfg (open_clip_config.json as open_clip's save_for_hf writes it).
bool apply_open_clip(const json* config, const std::string& where, const std::string& file, ViTConfig* c) {
  c->pre.interpolation = Filter::Bicubic;  // PreprocessCfg: shorter side to the size, center crop
  c->pre.crop_mode = CropMode::Center;
  c->pre.crop_pct = 1.0;
  c->pre.mean = {0.48145466f, 0.4578275f, 0.40821073f};
  c->pre.std = {0.26862954f, 0.26130258f, 0.27577711f};
  c->origin.preprocessing = "default (open_clip's PreprocessCfg)";
  c->eps = 1e-5f;  // open_clip's LayerNorm: torch's default eps, which its configs never write
  c->origin.eps = "default (open_clip's nn.LayerNorm: 1e-5)";
  c->origin.act = "default (GELU, erf: open_clip's, without quick_gelu)";
  if (!config) {
    // The tensors cannot tell GELU from QuickGELU, and OpenAI's weights need the latter.
    spdlog::warn("{}: no open_clip_config.json: GELU in the MLPs, heads width / 64; OpenAI's CLIP weights need "
                 "QuickGELU (a config with \"quick_gelu\": true, or --config)", file);
    return false;
  }
  const json& top = *config;
  if (!top.is_object() || !has(top, "model_cfg") || !top["model_cfg"].is_object() ||
      !top["model_cfg"].contains("vision_cfg"))
    throw Error(where, "not an OpenCLIP config: no model_cfg.vision_cfg");
  const json& m = top["model_cfg"];
  const json& v = m["vision_cfg"];
  for (const char* key : {"timm_model_name", "attentional_pool", "final_ln_after_pool", "no_ln_pre"})
    if (has(v, key) && v[key] != false)
      throw Error(where, std::string("vision_cfg.") + key + " " + v[key].dump() + ": not supported yet");
  if (has(v, "pool_type") && get_as<std::string>(v, "pool_type", where) != "tok")
    throw Error(where, "vision_cfg.pool_type " + v["pool_type"].dump() + ": not supported yet (tok)");
  agree(v, "width", c->width, "width", where, file);
  agree(v, "layers", c->depth, "depth", where, file);
  agree(v, "patch_size", c->patch, "patch size", where, file);
  agree(m, "embed_dim", c->classes, "a projection to", where, file);
  if (has(v, "mlp_ratio") && int64_t(get_as<double>(v, "mlp_ratio", where) * double(c->width)) != c->mlp)
    throw Error(where, "vision_cfg.mlp_ratio is " + v["mlp_ratio"].dump() + ", but " + file + " has MLP width " +
                           std::to_string(c->mlp));
  if (has(v, "image_size")) set_size(c, get_as<int64_t>(v, "image_size", where), where);
  if (has(m, "quick_gelu")) {
    c->act = get_as<bool>(m, "quick_gelu", where) ? Activation::QuickGelu : Activation::Gelu;
    c->origin.act = where;
  }
  if (top.contains("preprocess_cfg")) {
    const json& p = top["preprocess_cfg"];
    for (const auto& [key, field] : {std::pair{"mean", &c->pre.mean}, std::pair{"std", &c->pre.std}})
      if (has(p, key)) {
        const auto x = get_as<std::vector<float>>(p, key, where);
        if (x.size() != 3) throw Error(where, std::string("preprocess_cfg.") + key + " needs 3 values");
        *field = {x[0], x[1], x[2]};
      }
    if (has(p, "interpolation")) c->pre.interpolation = filter_from_name(get_as<std::string>(p, "interpolation", where));
    if (has(p, "resize_mode")) {
      const std::string mode = get_as<std::string>(p, "resize_mode", where);
      if (mode == "squash") c->pre.crop_mode = CropMode::Squash;
      else if (mode != "shortest") throw Error(where, "preprocess_cfg.resize_mode '" + mode + "' is not supported");
    }
    c->origin.preprocessing = where;
  }
  // CLIPVisionCfg: heads = width / head_width (64 by default).
  const int64_t head_width = has(v, "head_width") ? get_as<int64_t>(v, "head_width", where) : 64;
  if (head_width <= 0 || c->width % head_width)
    throw Error(where, "vision_cfg.head_width " + std::to_string(head_width) + " does not divide width " +
                           std::to_string(c->width));
  c->heads = c->width / head_width;
  c->origin.heads = where + " (width / head_width)";
  return true;
}

}  // namespace

bool apply_other_layout_config(OtherLayout l, const json* config, const std::string& where, const std::string& file,
                               ViTConfig* c) {
  if (l == OtherLayout::OpenClip) return apply_open_clip(config, where, file, c);
  if (config) return apply_hf(l, *config, where, file, c);
  hf_processor_defaults(l, c);
  return false;
}

void other_layout_resampling(OtherLayout l, ViTConfig* c) {
  // Each layout's own resampling of its position table at another input size. transformers' Dinov2 and its
  // CLIP and SigLIP (interpolate_pos_encoding): bicubic, size given, no antialiasing; Dinov2WithRegisters:
  // antialiased, as timm and open_clip's resize_pos_embed.
  c->pos_antialias = l == OtherLayout::HfDinov2Registers || l == OtherLayout::OpenClip;
}

}  // namespace vit

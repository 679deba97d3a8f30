// Each layout's config as its own code reads it: timm's save_config_for_hf config.json (model_args of its
// VisionTransformer, Beit and Eva classes, pretrained_cfg), transformers' ViTConfig with ViTImageProcessor's
// defaults, torchvision's evaluation transforms, transformers' Dinov2Config, CLIPVisionConfig and
// SiglipVisionConfig (or the vision_config inside a CLIPConfig / SiglipConfig) with the defaults of their image
// processors, open_clip's model_cfg / preprocess_cfg (CLIPVisionCfg, PreprocessCfg; TimmModel's timm_* keys for a
// timm trunk), and Hugging Face's preprocessor_config.json.
#include "layout_config.h"

#include <array>
#include <nlohmann/json.hpp>

#include "config_json.h"
#include "vit/error.h"

namespace vit {
namespace {

using json = nlohmann::json;

// Values a config repeats must agree with the tensors: {key, field, what the tensors call it}.
struct IntFact {
  const char* key;
  int64_t ViTConfig::*field;
  const char* what;
};
struct BoolFact {
  const char* key;
  bool (*field)(const ViTConfig&);
  const char* what;
};
const IntFact kTimmTop[] = {{"num_classes", &ViTConfig::classes, "a head of"}};
const IntFact kTimmInts[] = {{"patch_size", &ViTConfig::patch, "patch size"},  {"embed_dim", &ViTConfig::width, "width"},
                             {"depth", &ViTConfig::depth, "depth"},           {"in_chans", &ViTConfig::in_chans, "input channels"},
                             {"num_classes", &ViTConfig::classes, "a head of"},
                             {"reg_tokens", &ViTConfig::reg_tokens, "register tokens"}};
const BoolFact kTimmBools[] = {{"class_token", [](const ViTConfig& c) { return c.class_token; }, "cls_token"},
                               {"qkv_bias", [](const ViTConfig& c) { return c.attn.qkv_bias; }, "qkv biases"},
                               {"proj_bias", [](const ViTConfig& c) { return c.proj_bias; }, "attn.proj biases"},
                               {"fc_norm", [](const ViTConfig& c) { return c.pool.fc_norm; }, "fc_norm"}};
// Every transformers vision config's shape (ViTConfig, Dinov2Config, CLIPVisionConfig, SiglipVisionConfig).
const IntFact kHfShape[] = {{"hidden_size", &ViTConfig::width, "width"},
                            {"num_hidden_layers", &ViTConfig::depth, "depth"},
                            {"intermediate_size", &ViTConfig::mlp, "MLP width"},
                            {"patch_size", &ViTConfig::patch, "patch size"}};
const IntFact kHfViTInts[] = {{"num_channels", &ViTConfig::in_chans, "input channels"}};
const BoolFact kHfBools[] = {{"qkv_bias", [](const ViTConfig& c) { return c.attn.qkv_bias; }, "query/key/value biases"}};
const IntFact kHfVisionInts[] = {{"num_register_tokens", &ViTConfig::reg_tokens, "register tokens"}};
const IntFact kHfProjection[] = {{"projection_dim", &ViTConfig::classes, "a projection to"}};
const IntFact kOpenClipVision[] = {{"width", &ViTConfig::width, "width"},
                                   {"layers", &ViTConfig::depth, "depth"},
                                   {"patch_size", &ViTConfig::patch, "patch size"}};
const IntFact kOpenClipModel[] = {{"embed_dim", &ViTConfig::classes, "a projection to"}};

template <size_t N>
void check_ints(const json& j, const IntFact (&facts)[N], const std::string& where, const std::string& file,
                const ViTConfig& c) {
  for (const IntFact& f : facts) {
    if (!has(j, f.key)) continue;
    const json& v = j[f.key];
    const int64_t want = v.is_array() && !v.empty() ? get_as<std::vector<int64_t>>(j, f.key, where).front()
                                                    : get_as<int64_t>(j, f.key, where);
    if (want != c.*f.field)
      throw Error(where, std::string(f.key) + " is " + std::to_string(want) + ", but " + file + " has " + f.what + " " +
                             std::to_string(c.*f.field));
  }
}

template <size_t N>
void check_bools(const json& j, const BoolFact (&facts)[N], const std::string& where, const std::string& file,
                 const ViTConfig& c) {
  for (const BoolFact& f : facts)
    if (has(j, f.key) && get_as<bool>(j, f.key, where) != f.field(c))
      throw Error(where, std::string(f.key) + " is " + j[f.key].dump() + ", but " + file +
                             (f.field(c) ? " has " : " has no ") + f.what);
}

// timm: a config (timm's save_config_for_hf): architecture, num_classes, global_pool,
// model_args, pretrained_cfg (the eval preprocessing), label_names.
void apply_pretrained_cfg(const json& p, const std::string& where, ViTConfig* c) {
  if (p.contains("input_size")) {
    const auto s = get_as<std::vector<int64_t>>(p, "input_size", where);
    if (s.size() != 3 || s[0] != 3)
      throw Error(where, "input_size must be [3, H, W], got " + p["input_size"].dump());
    set_input_size(c, s[1], s[2], where);
  }
  if (p.contains("interpolation"))
    c->pre.interpolation = filter_from_name(get_as<std::string>(p, "interpolation", where));
  if (has(p, "crop_pct")) {
    c->pre.crop_pct = get_as<double>(p, "crop_pct", where);
    if (!(c->pre.crop_pct > 0.0 && c->pre.crop_pct <= 4.0))
      throw Error(where, "crop_pct must be in (0, 4], got " + p["crop_pct"].dump());
  }
  try {
    if (p.contains("crop_mode")) c->pre.crop_mode = crop_mode_from_name(get_as<std::string>(p, "crop_mode", where));
  } catch (const Error& e) {
    throw Error(where, e.problem());
  }
  if (p.contains("mean")) c->pre.mean = triple(p, "mean", where);
  if (p.contains("std")) {
    c->pre.std = triple(p, "std", where);
    for (float s : c->pre.std)
      if (!(s > 0.f)) throw Error(where, "std values must be positive");
  }
  c->origin.input_size = c->origin.preprocessing = where;
}

bool apply_timm_config(const json& j, const std::string& where, const std::string& file, ViTConfig* c) {
  check_ints(j, kTimmTop, where, file, *c);
  const json* args = j.contains("model_args") ? &j["model_args"] : nullptr;
  if (args && !args->is_object()) throw Error(where, "model_args is not an object");
  bool heads_given = false;
  if (args) {
    const json& a = *args;
    check_ints(a, kTimmInts, where, file, *c);
    check_bools(a, kTimmBools, where, file, *c);
    // timm's hidden_features=int(dim * mlp_ratio): truncated (EVA-02's 4 * 2 / 3 of 64 is 170)
    const double hidden = has(a, "mlp_ratio") ? get_as<double>(a, "mlp_ratio", where) * double(c->width) : double(c->mlp);
    if (!(hidden >= 0.0 && hidden < 1e15) || int64_t(hidden) != c->mlp)
      throw Error(where, "mlp_ratio is " + a["mlp_ratio"].dump() + ", but " + file + " has MLP width " +
                             std::to_string(c->mlp) + " for width " + std::to_string(c->width));
    if (a.contains("num_heads")) {
      c->heads = get_as<int64_t>(a, "num_heads", where);
      c->origin.heads = where;
      heads_given = true;
    }
    if (a.contains("no_embed_class")) c->no_embed_class = get_as<bool>(a, "no_embed_class", where);
    if (a.contains("act_layer")) {
      const std::string act = get_as<std::string>(a, "act_layer", where);
      // SwiGLU's gate is SiLU (AIMv2's act_layer 'silu'), its MLP said by the tensors.
      const bool swiglu_silu = act == "silu" && c->act == Activation::SwiGLU;
      if (act != "gelu" && act != "quick_gelu" && act != "gelu_tanh" && !swiglu_silu)
        throw Error(where, "act_layer '" + act + "' is not supported (gelu, gelu_tanh, quick_gelu; silu in a SwiGLU MLP)");
      if (!swiglu_silu)
        c->act = act == "quick_gelu" ? Activation::QuickGelu : act == "gelu_tanh" ? Activation::GeluTanh : Activation::Gelu;
      c->origin.act = where;
    }
    if (a.contains("img_size")) {
      const auto v = a["img_size"].is_array() ? get_as<std::vector<int64_t>>(a, "img_size", where)
                                              : std::vector<int64_t>(2, get_as<int64_t>(a, "img_size", where));
      if (v.size() != 2) throw Error(where, "img_size must be a size or [H, W], got " + a["img_size"].dump());
      set_input_size(c, v[0], v[1], where);
      c->origin.input_size = where;
    }
  }
  for (const json* level : {&j, args})
    if (level && level->contains("global_pool")) {
      try {
        c->pool.kind = pool_from_name(get_as<std::string>(*level, "global_pool", where));
      } catch (const Error& e) {
        throw Error(where, e.problem());
      }
      c->origin.pool = where;
    }
  if (j.contains("pretrained_cfg")) apply_pretrained_cfg(j["pretrained_cfg"], where, c);
  if (j.contains("label_names")) c->labels = get_as<std::vector<std::string>>(j, "label_names", where);
  return heads_given;
}

// Hugging Face ViT: a config (ViTForImageClassification): heads, eps, image_size, id2label, each left out
// meaning transformers' ViTConfig default (12 heads, eps 1e-12); its preprocessing defaults are
// ViTImageProcessor's (resize straight to the input size, bilinear, 0.5).
bool apply_hf_config(const json& j, const std::string& where, const std::string& file, ViTConfig* c) {
  check_ints(j, kHfShape, where, file, *c);
  check_ints(j, kHfViTInts, where, file, *c);
  check_bools(j, kHfBools, where, file, *c);
  const auto origin = [&](const char* key) { return j.contains(key) ? where : std::string("default (ViTConfig's)"); };
  c->heads = j.contains("num_attention_heads") ? get_as<int64_t>(j, "num_attention_heads", where) : 12;
  c->origin.heads = origin("num_attention_heads");
  c->eps = j.contains("layer_norm_eps") ? get_as<float>(j, "layer_norm_eps", where) : 1e-12f;
  c->origin.eps = origin("layer_norm_eps");
  if (j.contains("image_size")) {
    const int64_t s = get_as<int64_t>(j, "image_size", where);
    set_input_size(c, s, s, where);
    c->origin.input_size = where;
  }
  if (j.contains("hidden_act") && get_as<std::string>(j, "hidden_act", where) != "gelu")
    throw Error(where, "hidden_act '" + j["hidden_act"].get<std::string>() + "' is not supported (gelu)");
  c->pre.crop_mode = CropMode::Squash;
  c->pre.crop_pct = 1.0;
  c->pre.interpolation = Filter::Bilinear;
  c->pre.mean = {0.5f, 0.5f, 0.5f};
  c->pre.std = {0.5f, 0.5f, 0.5f};
  c->origin.preprocessing = "default (Hugging Face ViTImageProcessor's)";
  if (j.contains("id2label")) {
    const json& m = j["id2label"];
    c->labels.assign(m.size(), "");
    for (auto& [k, v] : m.items()) {
      size_t i = 0;
      try {
        i = std::stoul(k);
      } catch (const std::exception&) {
        throw Error(where, "id2label key '" + k + "' is not a class index");
      }
      if (i >= c->labels.size()) throw Error(where, "id2label has index " + k + " past its size");
      c->labels[i] = v.is_string() ? v.get<std::string>() : v.dump();
    }
  }
  return true;
}

// timm: every model_args key of the family's timm class (VisionTransformer, Beit, Eva, NaFlexVit) read by
// apply_timm_config, said by the tensors, training-only, the one value the engine runs, the value the
// family's row gives it (family_arg), EVA-02's rotary settings, or NaFlex's table grid (as the tensors have
// it); any other is refused by name, so that an option the engine does not run never loads half-right.
enum class ArgRule { Read, Tensors, Training, Only, Family, Rope, Grid };
struct ModelArg {
  const char* key;
  unsigned classes;  // bits of the TimmClass values whose configs have it
  ArgRule rule;
  const char* only = nullptr;  // ArgRule::Only: the value the engine runs, as JSON
};
constexpr unsigned kVit = 1u << unsigned(TimmClass::VisionTransformer), kBeit = 1u << unsigned(TimmClass::Beit),
                   kEva = 1u << unsigned(TimmClass::Eva), kNaf = 1u << unsigned(TimmClass::NaFlexVit),
                   kAll = kVit | kBeit | kEva | kNaf;
const ModelArg kModelArgs[] = {
    {"img_size", kAll, ArgRule::Read}, {"patch_size", kAll, ArgRule::Read}, {"in_chans", kAll, ArgRule::Read},
    {"num_classes", kAll, ArgRule::Read}, {"global_pool", kAll, ArgRule::Read}, {"embed_dim", kAll, ArgRule::Read},
    {"depth", kAll, ArgRule::Read}, {"num_heads", kAll, ArgRule::Read}, {"mlp_ratio", kAll, ArgRule::Read},
    {"qkv_bias", kAll, ArgRule::Read}, {"class_token", kVit | kEva | kNaf, ArgRule::Read},
    {"no_embed_class", kVit | kEva, ArgRule::Read}, {"reg_tokens", kVit | kNaf, ArgRule::Read},
    {"fc_norm", kVit | kNaf, ArgRule::Read}, {"act_layer", kVit | kNaf, ArgRule::Read}, {"proj_bias", kVit, ArgRule::Read},
    {"init_values", kAll, ArgRule::Tensors}, {"pre_norm", kVit | kNaf, ArgRule::Tensors},
    {"final_norm", kVit | kNaf, ArgRule::Tensors},
    {"dynamic_img_size", kVit, ArgRule::Tensors}, {"use_abs_pos_emb", kBeit | kEva, ArgRule::Tensors},
    {"use_fc_norm", kBeit | kEva, ArgRule::Tensors}, {"use_rel_pos_bias", kBeit, ArgRule::Tensors},
    {"qkv_fused", kEva, ArgRule::Tensors}, {"num_reg_tokens", kEva, ArgRule::Tensors}, {"scale_mlp", kEva, ArgRule::Tensors}, {"swiglu_mlp", kEva, ArgRule::Tensors},
    {"use_post_transformer_norm", kEva, ArgRule::Tensors}, {"scale_attn_inner", kEva, ArgRule::Tensors},
    {"drop_rate", kAll, ArgRule::Training}, {"pos_drop_rate", kAll, ArgRule::Training},
    {"patch_drop_rate", kAll, ArgRule::Training}, {"proj_drop_rate", kAll, ArgRule::Training},
    {"attn_drop_rate", kAll, ArgRule::Training}, {"drop_path_rate", kAll, ArgRule::Training},
    {"head_init_scale", kBeit | kEva, ArgRule::Training}, {"weight_init", kVit | kNaf, ArgRule::Training},
    {"fix_init", kVit | kNaf, ArgRule::Training}, {"use_naflex", kVit | kEva, ArgRule::Read},  // checked with the family
    {"qk_norm", kVit | kEva | kNaf, ArgRule::Only, "false"}, {"scale_attn_norm", kVit, ArgRule::Only, "false"},
    {"scale_mlp_norm", kVit | kNaf, ArgRule::Only, "false"}, {"proj_bias", kNaf, ArgRule::Only, "true"},
    {"pos_embed", kVit, ArgRule::Only, "\"learn\""}, {"dynamic_img_pad", kVit | kNaf, ArgRule::Only, "false"},
    {"use_shared_rel_pos_bias", kBeit, ArgRule::Only, "false"}, {"swiglu_mlp", kBeit, ArgRule::Only, "false"},
    {"scale_mlp", kBeit, ArgRule::Only, "false"}, {"rope_type", kEva, ArgRule::Family},
    {"rope_grid_indexing", kEva, ArgRule::Family}, {"rope_rotate_half", kEva, ArgRule::Family},
    {"dynamic_img_size", kEva, ArgRule::Family},
    {"use_rot_pos_emb", kEva, ArgRule::Rope}, {"ref_feat_shape", kEva, ArgRule::Rope},
    {"rope_temperature", kEva, ArgRule::Rope}, {"rope_grid_offset", kEva, ArgRule::Rope},
    // NaFlexVitCfg: the SigLIP 2 towers' learned table, resized bilinearly (antialiased, corners not aligned)
    // to each image's grid; their embedding, attention and pooling.
    {"pos_embed", kNaf, ArgRule::Only, "\"learned\""}, {"pos_embed_grid_size", kNaf, ArgRule::Grid},
    {"pos_embed_interp_mode", kNaf, ArgRule::Only, "\"bilinear\""},
    {"pos_embed_ar_preserving", kNaf, ArgRule::Only, "false"}, {"pos_embed_antialias", kNaf, ArgRule::Only, "true"},
    {"pos_embed_align_corners", kNaf, ArgRule::Only, "false"},
    {"pos_embed_use_grid_sample", kNaf, ArgRule::Only, "false"}, {"rope_type", kNaf, ArgRule::Only, "\"\""},
    {"scale_attn_inner_norm", kNaf, ArgRule::Only, "false"}, {"use_key_only_attn_mask", kNaf, ArgRule::Only, "false"},
    {"patchify_channels_last", kNaf, ArgRule::Only, "true"}, {"pool_include_prefix", kNaf, ArgRule::Only, "false"},
    {"embed_proj_type", kNaf, ArgRule::Only, "\"linear\""}, {"attn_type", kNaf, ArgRule::Only, "\"standard\""},
    {"attn_gated", kNaf, ArgRule::Only, "false"},
};

// The value of an ArgRule::Family key that the model's family row runs (its timm definition's): the rotary
// embedding's kind, channel pairs and grid indexing; whether the rotary grid follows the input (DINOv3's
// dynamic_img_size).
json family_arg(const std::string& key, const ViTConfig& c) {
  const bool dinov3 = c.rope.kind == RopeKind::DinoV3;
  if (key == "rope_type") return dinov3 ? "dinov3" : c.rope.kind == RopeKind::Mixed ? "mixed" : "cat";
  if (key == "rope_rotate_half") return dinov3;
  if (key == "rope_grid_indexing") return c.rope.xy ? "xy" : "ij";
  if (key == "dynamic_img_size") return c.family == Family::DINOv3;
  return nullptr;
}

// EVA-02's rotary settings from model_args.
void rope_arg(const json& args, const std::string& key, const std::string& where, ViTConfig* c) {
  if (key == "use_rot_pos_emb") c->rope.on = get_as<bool>(args, "use_rot_pos_emb", where);
  if (key == "rope_temperature") c->rope.temperature = get_as<float>(args, "rope_temperature", where);
  if (key == "rope_grid_offset") c->rope.grid_offset = get_as<float>(args, "rope_grid_offset", where);
  if (key == "ref_feat_shape") {
    const json& v = args[key];
    const auto hw = v.is_array() ? get_as<std::vector<int64_t>>(args, "ref_feat_shape", where)
                                 : std::vector<int64_t>(2, get_as<int64_t>(args, "ref_feat_shape", where));
    if (hw.size() != 2 || hw[0] <= 0 || hw[1] <= 0)
      throw Error(where, "model_args ref_feat_shape " + v.dump() + ": not a size or [H, W]");
    c->rope.ref_h = hw[0];
    c->rope.ref_w = hw[1];
  }
  c->origin.rope = where;
}

void apply_model_args(const json& config, TimmClass cls, const std::string& where, ViTConfig* c) {
  if (!config.contains("model_args") || !config["model_args"].is_object()) return;
  const json& args = config["model_args"];
  for (const auto& [key, value] : args.items()) {
    if (value.is_null()) continue;
    // The engine's attention pool reads the prefix tokens too, its mean pool only the patches.
    if (key == "pool_include_prefix" && cls == TimmClass::VisionTransformer &&
        (!c->prefix_tokens() || value == json(c->pool.attn())))
      continue;
    const ModelArg* rule = nullptr;
    for (const ModelArg& m : kModelArgs)
      if (key == m.key && (m.classes & (1u << unsigned(cls)))) rule = &m;
    if (rule && rule->rule == ArgRule::Rope) rope_arg(args, key, where, c);
    if (rule && rule->rule == ArgRule::Grid && value != json::array({c->pos_grid_h, c->pos_grid_w}))
      throw Error(where, "model_args " + key + " is " + value.dump() + ", but the checkpoint's table (embeds.pos_embed) "
                         "is " + std::to_string(c->pos_grid_h) + "x" + std::to_string(c->pos_grid_w));
    if (rule && rule->rule == ArgRule::Family && value == family_arg(key, *c)) continue;
    if (rule && rule->rule != ArgRule::Family && (rule->rule != ArgRule::Only || value == json::parse(rule->only)))
      continue;
    throw Error(where, std::string(family_name(c->family)) + " with model_args " + key + " " + value.dump() +
                           ": not supported yet");
  }
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
HfDefaults hf_defaults(Layout l) {
  if (l == Layout::HfClip) return {"CLIPVisionConfig", "quick_gelu", 1e-5f, 224, 12};
  if (l == Layout::HfSiglip) return {"SiglipVisionConfig", "gelu_pytorch_tanh", 1e-6f, 224, 12};
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
void hf_processor_defaults(Layout l, ViTConfig* c) {
  c->pre.interpolation = Filter::Bicubic;
  if (l == Layout::HfSiglip) {  // SiglipImageProcessor: 224 x 224 squashed, mean and std 0.5
    c->pre.crop_mode = CropMode::Squash;
    c->pre.crop_pct = 1.0;
    c->pre.mean = {0.5f, 0.5f, 0.5f};
    c->pre.std = {0.5f, 0.5f, 0.5f};
    c->origin.preprocessing = "default (Hugging Face SiglipImageProcessor's)";
  } else if (l == Layout::HfClip) {  // CLIPImageProcessor: shorter side to the size, center crop
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

bool apply_hf(Layout l, const json& top, const std::string& where, const std::string& file, ViTConfig* c) {
  if (!top.is_object()) throw Error(where, "not a JSON object");
  const std::string type = has(top, "model_type") ? get_as<std::string>(top, "model_type", where) : "";
  const bool dinov2 = l == Layout::HfDinov2 || l == Layout::HfDinov2Registers;
  const char* want = dinov2 ? (l == Layout::HfDinov2 ? "dinov2" : "dinov2_with_registers")
                     : l == Layout::HfClip ? "clip" : "siglip";
  // A whole CLIPModel / SiglipModel keeps the image tower's settings in vision_config.
  const bool whole = type == want && !dinov2;
  if (type != want && type != std::string(want) + "_vision_model")
    throw Error(where, "model_type '" + type + "' does not match the checkpoint's layout (" + layout_name(l) + ")");
  const json& j = whole ? top.at("vision_config") : top;
  check_ints(j, kHfShape, where, file, *c);
  check_ints(j, kHfVisionInts, where, file, *c);
  if (has(j, "mlp_ratio") && int64_t(get_as<double>(j, "mlp_ratio", where) * double(c->width)) != c->mlp)
    throw Error(where, "mlp_ratio is " + j["mlp_ratio"].dump() + ", but " + file + " has MLP width " + std::to_string(c->mlp));
  if (has(j, "use_swiglu_ffn") && get_as<bool>(j, "use_swiglu_ffn", where))
    throw Error(where, "use_swiglu_ffn: DINOv2 with a SwiGLU MLP (giant) is not supported yet");
  const json& proj = whole ? top : j;
  check_ints(proj, kHfProjection, where, file, *c);
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

// open_clip's PreprocessCfg: its defaults (shorter side to the size, bicubic, center crop, OpenAI's mean and
// std), then the config's preprocess_cfg.
void open_clip_preprocess(const json* config, const std::string& where, ViTConfig* c) {
  c->pre.interpolation = Filter::Bicubic;
  c->pre.crop_mode = CropMode::Center;
  c->pre.crop_pct = 1.0;
  c->pre.mean = {0.48145466f, 0.4578275f, 0.40821073f};
  c->pre.std = {0.26862954f, 0.26130258f, 0.27577711f};
  c->origin.preprocessing = "default (open_clip's PreprocessCfg)";
  if (!config || !config->contains("preprocess_cfg")) return;
  const json& p = (*config)["preprocess_cfg"];
  for (const auto& [key, field] : {std::pair{"mean", &c->pre.mean}, std::pair{"std", &c->pre.std}})
    if (has(p, key)) {
      const auto x = get_as<std::vector<float>>(p, key, where);
      if (x.size() != 3) throw Error(where, std::string("preprocess_cfg.") + key + " needs 3 values");
      *field = {x[0], x[1], x[2]};
    }
  for (float s : c->pre.std)
    if (!(s > 0.f)) throw Error(where, "preprocess_cfg.std values must be positive");
  if (has(p, "interpolation")) c->pre.interpolation = filter_from_name(get_as<std::string>(p, "interpolation", where));
  if (has(p, "resize_mode")) {
    const std::string mode = get_as<std::string>(p, "resize_mode", where);
    if (mode == "squash") c->pre.crop_mode = CropMode::Squash;
    else if (mode != "shortest") throw Error(where, "preprocess_cfg.resize_mode '" + mode + "' is not supported");
  }
  c->origin.preprocessing = where;
}

// model_cfg.vision_cfg of an open_clip_config.json, or an error naming what is missing.
const json& open_clip_vision_cfg(const json* config, const std::string& where) {
  if (!config || !config->is_object() || !has(*config, "model_cfg") || !(*config)["model_cfg"].is_object() ||
      !has((*config)["model_cfg"], "vision_cfg") || !(*config)["model_cfg"]["vision_cfg"].is_object())
    throw Error(where, "not an OpenCLIP config: no model_cfg.vision_cfg object");
  return (*config)["model_cfg"]["vision_cfg"];
}

// open_clip's CLIPVisionCfg and PreprocessCfg (open_clip_config.json as open_clip's save_for_hf writes it).
bool apply_open_clip(const json* config, const std::string& where, const std::string& file, ViTConfig* c) {
  open_clip_preprocess(config, where, c);
  c->eps = 1e-5f;  // open_clip's LayerNorm: torch's default eps, which its configs never write
  c->origin.eps = "default (open_clip's nn.LayerNorm: 1e-5)";
  c->origin.act = "default (GELU, erf: open_clip's, without quick_gelu)";
  const json& v = open_clip_vision_cfg(config, where);
  const json& m = (*config)["model_cfg"];
  for (const char* key : {"timm_model_name", "attentional_pool", "final_ln_after_pool", "no_ln_pre"})
    if (has(v, key) && v[key] != false)
      throw Error(where, std::string("vision_cfg.") + key + " " + v[key].dump() + ": not supported yet");
  if (has(v, "pool_type") && get_as<std::string>(v, "pool_type", where) != "tok")
    throw Error(where, "vision_cfg.pool_type " + v["pool_type"].dump() + ": not supported yet (tok)");
  check_ints(v, kOpenClipVision, where, file, *c);
  check_ints(m, kOpenClipModel, where, file, *c);
  if (has(v, "mlp_ratio") && int64_t(get_as<double>(v, "mlp_ratio", where) * double(c->width)) != c->mlp)
    throw Error(where, "vision_cfg.mlp_ratio is " + v["mlp_ratio"].dump() + ", but " + file + " has MLP width " +
                           std::to_string(c->mlp));
  if (has(v, "image_size")) set_size(c, get_as<int64_t>(v, "image_size", where), where);
  if (has(m, "quick_gelu")) {
    c->act = get_as<bool>(m, "quick_gelu", where) ? Activation::QuickGelu : Activation::Gelu;
    c->origin.act = where;
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

// open_clip's TimmModel (vision_cfg.timm_*): the trunk is timm.create_model(timm_model_name, num_classes=0 for
// timm_proj 'none' else embed_dim, global_pool=timm_pool), its own head the projection; the trunk's shape,
// heads, activation and eps are its architecture's (family_of_arch). open_clip's own head after the trunk
// (timm_proj 'linear' or 'mlp', timm_pool 'abs_attn' or 'rot_attn') is refused by name.
void apply_open_clip_timm(const json* config, const std::string& where, const std::string& file, ViTConfig* c) {
  const json& v = open_clip_vision_cfg(config, where);
  const json& m = (*config)["model_cfg"];
  // CLIPVisionCfg's timm_proj default is 'linear'; null (EVA02-B-16) and 'none' leave the trunk's head.
  const std::string proj = !v.contains("timm_proj")  ? "linear"
                           : v["timm_proj"].is_null() ? ""
                                                      : get_as<std::string>(v, "timm_proj", where);
  if (proj != "" && proj != "none")
    throw Error(where, "vision_cfg.timm_proj '" + proj + "' (open_clip's own projection after the timm trunk): not "
                       "supported yet (none, or null: the trunk's own head)");
  const std::string pool = has(v, "timm_pool") ? get_as<std::string>(v, "timm_pool", where) : "avg";
  if (pool == "abs_attn" || pool == "rot_attn" || pool.empty())
    throw Error(where, "vision_cfg.timm_pool '" + pool + "' (open_clip's own pool after the timm trunk): not supported "
                       "yet (token, avg or map: the trunk's global_pool)");
  try {
    c->pool.kind = pool_from_name(pool);
  } catch (const Error& e) {
    throw Error(where, "vision_cfg.timm_pool: " + e.problem());
  }
  c->origin.pool = where + " (vision_cfg.timm_pool)";
  if (!has(m, "embed_dim")) throw Error(where, "model_cfg.embed_dim is missing");
  const int64_t embed = get_as<int64_t>(m, "embed_dim", where);
  // timm_proj 'none': no head, the pooled trunk features are the embedding; else the trunk's head projects.
  if (proj == "none" && (c->classes != 0 || embed != c->width))
    throw Error(where, "model_cfg.embed_dim is " + std::to_string(embed) + " with timm_proj 'none' (the trunk's pooled "
                       "features are the embedding), but " + file + " has width " + std::to_string(c->width) +
                       (c->classes ? " and a head of " + std::to_string(c->classes) : ""));
  // The trunk's head is open_clip's projection into the joint space: of a family whose head is one (EVA-02 CLIP).
  if (proj != "none" && family_row(c->family).head != HeadKind::Projection)
    throw Error(where, "vision_cfg.timm_proj null makes the trunk's head open_clip's projection, but " + c->arch +
                       " is a " + family_name(c->family) + ", whose head is a classifier: not supported");
  if (proj != "none" && embed != c->classes)
    throw Error(where, "model_cfg.embed_dim is " + std::to_string(embed) + ", but " + file + "'s trunk has " +
                       (c->classes ? "a head of " + std::to_string(c->classes) : "no head (visual.trunk.head)"));
  if (has(v, "image_size")) {
    const json& s = v["image_size"];
    const auto hw = s.is_array() ? get_as<std::vector<int64_t>>(v, "image_size", where)
                                 : std::vector<int64_t>(2, get_as<int64_t>(v, "image_size", where));
    if (hw.size() != 2) throw Error(where, "vision_cfg.image_size " + s.dump() + " is not a size or [H, W]");
    set_input_size(c, hw[0], hw[1], where);
    c->origin.input_size = where;
  }
  open_clip_preprocess(config, where, c);
}

// torchvision's ViT weights are evaluated with a bilinear resize to 256 and a 224 center crop.
void torchvision_defaults(ViTConfig* c) {
  c->pre.interpolation = Filter::Bilinear;
  c->pre.crop_pct = 0.875;
  c->origin.preprocessing = "default (torchvision's: bilinear, resize 256, crop 224)";
}

// Hugging Face's ViT config names its model_type and architectures; timm's names an architecture.
bool hf_vit_config(const json* config) {
  return config && (config->contains("model_type") || config->contains("architectures"));
}

}  // namespace

std::string layout_architecture(Layout l, const json* config, const std::string& where, const std::string& file) {
  if (l != Layout::OpenClipTimm) return "";
  if (!config)
    throw Error(file, "an OpenCLIP image tower on a timm model (visual.trunk) without its open_clip_config.json: the "
                      "trunk's architecture (vision_cfg.timm_model_name) is named only there");
  const json& v = open_clip_vision_cfg(config, where);
  if (!has(v, "timm_model_name")) throw Error(where, "vision_cfg.timm_model_name is missing (the checkpoint holds a "
                                                     "timm trunk, visual.trunk)");
  return get_as<std::string>(v, "timm_model_name", where);
}

bool is_timm_config(Layout l, const json* config) {
  return (l == Layout::Timm || l == Layout::HfViT || l == Layout::Torchvision) && !hf_vit_config(config);
}

LayoutConfigGiven apply_layout_config(Layout l, const json* config, TimmClass cls, const std::string& where,
                                      const std::string& file, ViTConfig* c) {
  LayoutConfigGiven g;
  switch (l) {
    case Layout::Timm:
    case Layout::HfViT:
    case Layout::Torchvision:
      if (hf_vit_config(config)) {
        g.heads = apply_hf_config(*config, where, file, c);
        g.size = true;
      } else if (config) {
        g.heads = apply_timm_config(*config, where, file, c);
        apply_model_args(*config, cls, where, c);
        g.size = config->contains("pretrained_cfg") ||
                 (config->contains("model_args") && (*config)["model_args"].contains("img_size"));
      } else if (l == Layout::Torchvision && c->arch.empty()) {  // (with --arch: the architecture's)
        torchvision_defaults(c);
      }
      return g;
    case Layout::OpenClip: g.heads = apply_open_clip(config, where, file, c); break;
    case Layout::OpenClipTimm: apply_open_clip_timm(config, where, file, c); break;
    case Layout::HfDinov2:
    case Layout::HfDinov2Registers:
    case Layout::HfClip:
    case Layout::HfSiglip:
      g.heads = apply_hf(l, *config, where, file, c);  // (without a config the checkpoint is refused)
      break;
  }
  g.size = config != nullptr;
  return g;
}

void apply_hf_preprocessor(const json& p, const std::string& where, ViTConfig* c) {
  if (!p.is_object()) throw Error(where, "not a JSON object");
  const auto flag = [&](const char* key, bool dflt) { return p.contains(key) ? get_as<bool>(p, key, where) : dflt; };
  // size / crop_size: an int, {"height", "width"} or {"shortest_edge"}.
  const auto dims = [&](const char* key, int64_t* h, int64_t* w, int64_t* shortest) {
    const json& v = p.at(key);
    *h = *w = *shortest = 0;
    if (v.is_number_integer()) *h = *w = v.get<int64_t>();
    else if (v.is_object() && v.contains("height") && v.contains("width"))
      *h = get_as<int64_t>(v, "height", where), *w = get_as<int64_t>(v, "width", where);
    else if (v.is_object() && v.contains("shortest_edge")) *shortest = get_as<int64_t>(v, "shortest_edge", where);
    else throw Error(where, "'" + std::string(key) + "' is neither a size nor {height, width} nor {shortest_edge}: " + v.dump());
    if (*h < 0 || *w < 0 || *shortest < 0 || (*h == 0 && *w == 0 && *shortest == 0) || *h > 65536 ||
        *w > 65536 || *shortest > 65536)
      throw Error(where, "'" + std::string(key) + "' is out of range: " + v.dump());
  };
  if (!flag("do_resize", true)) throw Error(where, "do_resize false is not supported (the model needs a fixed size)");
  int64_t h = 0, w = 0, shortest = 0;
  if (p.contains("size")) dims("size", &h, &w, &shortest);
  else h = w = c->img_h();
  int64_t ch = h, cw = w, cs = 0;
  if (flag("do_center_crop", false)) {
    if (!p.contains("crop_size")) throw Error(where, "do_center_crop without crop_size");
    dims("crop_size", &ch, &cw, &cs);
    if (cs) throw Error(where, "crop_size must be a size or {height, width}");
  } else if (shortest) {
    throw Error(where, "size {shortest_edge} without a center crop gives no fixed input size");
  }
  if (h != w || ch != cw) throw Error(where, "only square sizes are supported, got " + p.at("size").dump());
  c->pre.crop_mode = shortest ? CropMode::Center : CropMode::Squash;
  c->pre.resize = int(shortest ? shortest : h);
  c->pre.crop_pct = double(ch) / double(c->pre.resize);
  set_input_size(c, ch, cw, where);
  if (p.contains("resample")) {
    static const Filter kPil[] = {Filter::Nearest, Filter::Lanczos, Filter::Bilinear, Filter::Bicubic, Filter::Box,
                                  Filter::Hamming};
    const int64_t r = get_as<int64_t>(p, "resample", where);
    if (r < 0 || r > 5) throw Error(where, "resample " + std::to_string(r) + " is not a PIL filter (0 to 5)");
    c->pre.interpolation = kPil[r];
  }
  const double scale = flag("do_rescale", true)
                           ? (p.contains("rescale_factor") ? get_as<double>(p, "rescale_factor", where) : 1.0 / 255)
                           : 1.0;
  if (!(scale > 0)) throw Error(where, "rescale_factor must be positive");
  std::array<float, 3> mean{0.5f, 0.5f, 0.5f}, std{0.5f, 0.5f, 0.5f};
  if (p.contains("image_mean")) mean = triple(p, "image_mean", where);
  if (p.contains("image_std")) std = triple(p, "image_std", where);
  if (!flag("do_normalize", true)) mean = {0, 0, 0}, std = {1, 1, 1};
  // (x * scale - m) / s == (x / 255 - m / (255 scale)) / (s / (255 scale))
  for (size_t i = 0; i < 3; ++i) {
    if (!(std[i] > 0)) throw Error(where, "image_std values must be positive");
    c->pre.mean[i] = float(mean[i] / (255.0 * scale));
    c->pre.std[i] = float(std[i] / (255.0 * scale));
  }
  c->origin.preprocessing = c->origin.input_size = where;
}


}  // namespace vit

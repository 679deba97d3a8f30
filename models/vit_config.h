// What a ViT is: its shape (read from the checkpoint's tensors), the few things tensors cannot say
// (heads, pooling, eps), and its preprocessing (from the config.json beside the weights, --config,
// or timm's defaults for a known architecture name).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "engine/preprocess.h"

namespace vit {

class Checkpoint;

struct ViTConfig {
  std::string arch;                     // timm architecture name when known, else ""
  int64_t patch = 16;                   // P
  int64_t in_chans = 3;
  int64_t width = 192;                  // D
  int64_t depth = 12;                   // L
  int64_t heads = 3;                    // H
  int64_t mlp = 768;                    // M
  int64_t classes = 1000;               // C
  int64_t img_h = 224, img_w = 224;     // input size the model runs at
  int64_t pos_grid_h = 14, pos_grid_w = 14;  // grid the stored position table was trained at
  bool class_token = true;
  bool dist_token = false;              // DeiT distilled: second token and head_dist
  bool no_embed_class = false;          // position table covers patches only
  bool final_norm = true;               // LayerNorm over all tokens before pooling
  bool fc_norm = false;                 // LayerNorm after pooling instead
  bool qkv_bias = true;
  std::string global_pool = "token";    // "token" or "avg"
  float eps = 1e-6f;
  PreprocessConfig pre;
  std::vector<std::string> labels;      // from the config, empty when it has none
  // Where each setting came from, for `vit inspect`: field -> "file (...)", "config.json", "default", ...
  std::map<std::string, std::string> origin;

  int64_t prefix_tokens() const { return int64_t(class_token) + int64_t(dist_token); }
  int64_t grid_h() const { return img_h / patch; }
  int64_t grid_w() const { return img_w / patch; }
  int64_t patches() const { return grid_h() * grid_w(); }          // N
  int64_t tokens() const { return patches() + prefix_tokens(); }   // T
  int64_t head_dim() const { return width / heads; }               // Dh
  int64_t pos_len() const {
    return pos_grid_h * pos_grid_w + (no_embed_class ? 0 : prefix_tokens());
  }
  std::string summary() const;
};

// What besides the tensors describes a model. Each JSON is null when absent; its name is used in errors.
struct ConfigSources {
  const nlohmann::json* config = nullptr;        // config.json, timm or Hugging Face form
  std::string config_name;
  const nlohmann::json* preprocessor = nullptr;  // Hugging Face preprocessor_config.json
  std::string preprocessor_name;
  std::string name_hint;  // the model's file or folder name: timm's defaults for a known architecture
  int64_t img_size = 0;   // --img-size: run at S x S (position table resampled), 0 for the model's own
};

// Shapes from the checkpoint, the rest from the sources; a config that contradicts the tensors is an
// error naming both.
ViTConfig resolve_config(const Checkpoint& ck, const ConfigSources& src);

// A standard timm shape with its timm defaults, for random-weight models: vit_tiny_patch16_224,
// vit_small_patch16_224, vit_base_patch16_224, vit_base_patch32_224, vit_large_patch16_224,
// deit_tiny_patch16_224, ... Throws listing the known names.
ViTConfig config_for_arch(const std::string& arch);
std::vector<std::string> known_archs();

}  // namespace vit

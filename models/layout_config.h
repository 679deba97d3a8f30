// Every config file a checkpoint layout brings, each read as its own code reads it, in one place: timm's
// config.json (save_config_for_hf: architecture, model_args, pretrained_cfg), Hugging Face's ViT config.json,
// torchvision's defaults, Hugging Face's Dinov2 / CLIP / SigLIP config.json, OpenCLIP's open_clip_config.json (its
// own ViTs' and its timm trunks'), and a Hugging Face preprocessor_config.json. Steps 3 and 4 of resolve_config
// (vit_config.cpp).
#pragma once
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "families.h"
#include "layouts.h"
#include "vit_config.h"

namespace vit {

// Whether `config` is timm's form (naming an architecture): for timm's, Hugging Face ViT's and torchvision's
// checkpoints, a config.json without Hugging Face's model_type or architectures.
bool is_timm_config(Layout l, const nlohmann::json* config);

// The timm architecture a layout's config names for its model: OpenCLIP's timm trunks' vision_cfg.timm_model_name
// (an error without it); "" for the other layouts (a timm config's own "architecture" is read with it).
std::string layout_architecture(Layout l, const nlohmann::json* config, const std::string& where,
                                const std::string& file);

// Whether the config named the heads and the input size.
struct LayoutConfigGiven {
  bool heads = false, size = false;
};

// Reads the layout's `config` (null: none; its own defaults then) into c, whose shape already comes from the
// tensors; a value that contradicts them is an error naming both. `cls`: the timm class whose model_args a
// timm config may hold, each refused by name unless the engine runs it.
LayoutConfigGiven apply_layout_config(Layout l, const nlohmann::json* config, TimmClass cls, const std::string& where,
                                      const std::string& file, ViTConfig* c);

// A Hugging Face preprocessor_config.json (ViTImageProcessor and its relatives): resize, optional center
// crop, rescale and normalize, folded into timm's form.
void apply_hf_preprocessor(const nlohmann::json& p, const std::string& where, ViTConfig* c);

}  // namespace vit

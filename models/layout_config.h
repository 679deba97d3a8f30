// The settings of the checkpoint layouts in layouts.h from their own configs: a Hugging Face config.json
// (dinov2, dinov2_with_registers, clip_vision_model or clip, siglip_vision_model or siglip), OpenCLIP's
// open_clip_config.json, or each layout's defaults without one. A step of resolve_config (vit_config.cpp).
#pragma once
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "layouts.h"
#include "vit_config.h"

namespace vit {

// Reads `config` (null: none) into c, whose shape already comes from the tensors; a value that contradicts
// them is an error naming both. Returns whether the config named the heads.
bool apply_other_layout_config(OtherLayout l, const nlohmann::json* config, const std::string& where,
                               const std::string& file, ViTConfig* c);

// After the tensors and configs: the position table's resampling at another input size, as the
// layout's own code does it.
void other_layout_resampling(OtherLayout l, ViTConfig* c);

}  // namespace vit

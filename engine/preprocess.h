// Turns a decoded RGB image into the model's input tensor as timm's eval transform does:
// resize (PIL arithmetic), center crop, ToTensor (/255), Normalize. The parameters belong to the model.
#pragma once
#include <array>
#include <string>

#include "image.h"
#include "resample.h"

namespace vit {

struct PreprocessConfig {
  int height = 224, width = 224;  // input_size[1:], the crop
  double crop_pct = 0.875;
  int resize = 0;  // when > 0, the resize target (shorter side, or both in squash) instead of floor(size / crop_pct)
  // "center": shorter side to floor(size / crop_pct), keeping the aspect ratio, then center crop;
  // "squash": both sides to floor(size / crop_pct), then center crop (Hugging Face's plain resize
  // is squash with crop_pct 1).
  std::string crop_mode = "center";
  Filter interpolation = Filter::Bicubic;
  std::array<float, 3> mean{0.485f, 0.456f, 0.406f};
  std::array<float, 3> std{0.229f, 0.224f, 0.225f};
};

// Resize + center crop: the uint8 [height, width, 3] image timm feeds to ToTensor.
Image resize_and_crop(const Image& img, const PreprocessConfig& cfg);

// ToTensor + Normalize into out[3][height][width].
void normalize_to_chw(const Image& crop, const PreprocessConfig& cfg, float* out);

// Both steps: out holds 3 * height * width floats.
void preprocess(const Image& img, const PreprocessConfig& cfg, float* out);

}  // namespace vit

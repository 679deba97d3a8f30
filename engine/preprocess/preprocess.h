// Turns a decoded RGB image into the model's input tensor as timm's eval transform does:
// resize (PIL arithmetic), center crop, ToTensor (/255), Normalize. The parameters belong to the model.
#pragma once
#include <array>
#include <string>

#include "engine/image/image.h"
#include "engine/preprocess/resample.h"

namespace vit {

// Center: the shorter side to the resize size, keeping the aspect ratio, then a center crop; Squash:
// both sides to the resize size, then a center crop (Hugging Face's plain resize is Squash with crop_pct 1).
enum class CropMode { Center, Squash };
CropMode crop_mode_from_name(const std::string& name);  // "center", "squash"; throws on others
const char* crop_mode_name(CropMode m);

struct PreprocessConfig {
  int height = 224, width = 224;  // the model's input size (timm's input_size[1:]), which the crop gives
  double crop_pct = 0.875;
  int resize = 0;  // when > 0, the resize size instead of floor(size / crop_pct) (Hugging Face's "size")
  CropMode crop_mode = CropMode::Center;
  Filter interpolation = Filter::Bicubic;
  std::array<float, 3> mean{0.485f, 0.456f, 0.406f};
  std::array<float, 3> std{0.229f, 0.224f, 0.225f};

  // timm's scale_size = floor(size / crop_pct), or `resize` when set: the shorter side (Center) or
  // both sides (Squash) before the crop.
  int resize_height() const;
  int resize_width() const;
};

// Where the model's input comes from in a w x h image: the image resized to resized_w x resized_h, then
// the input window cut at (left, top) of that, reaching past its edges (negative, or beyond) where the
// crop pads with black.
struct CropGeometry {
  int resized_w, resized_h, left, top;
};
CropGeometry crop_geometry(int w, int h, const PreprocessConfig& cfg);

// Resize + center crop: the uint8 [height, width, 3] image timm feeds to ToTensor.
Image resize_and_crop(const Image& img, const PreprocessConfig& cfg);

// ToTensor + Normalize into out[3][height][width].
void normalize_to_chw(const Image& crop, const PreprocessConfig& cfg, float* out);

// Both steps: out holds 3 * height * width floats.
void preprocess(const Image& img, const PreprocessConfig& cfg, float* out);

}  // namespace vit

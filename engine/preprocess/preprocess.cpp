// timm eval preprocessing (transforms_factory.transforms_imagenet_eval with torchvision's Resize,
// CenterCrop, ToTensor and Normalize on PIL images), with the same integer arithmetic.
#include "engine/preprocess/preprocess.h"

#include <cmath>

#include "vit/error.h"

namespace vit {
namespace {

// torchvision CenterCrop: pads with zeros when the image is smaller, then crops at
// top = int(round((h - ch) / 2)) with Python's round-half-to-even (nearbyint does the same).
Image center_crop(const Image& img, int ch, int cw) {
  const int pad_l = cw > img.width ? (cw - img.width) / 2 : 0;
  const int pad_t = ch > img.height ? (ch - img.height) / 2 : 0;
  const int pw = std::max(img.width, cw), ph = std::max(img.height, ch);
  const int left = int(std::nearbyint((pw - cw) / 2.0)), top = int(std::nearbyint((ph - ch) / 2.0));
  const auto source = [](int n, int offset, int size) {
    std::vector<int> idx(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) idx[size_t(i)] = i + offset >= 0 && i + offset < size ? i + offset : -1;
    return idx;
  };
  return pick_pixels(img, source(cw, left - pad_l, img.width), source(ch, top - pad_t, img.height));
}

}  // namespace

CropMode crop_mode_from_name(const std::string& name) {
  if (name == "center") return CropMode::Center;
  if (name == "squash") return CropMode::Squash;
  throw Error("crop_mode '" + name + "' is not supported (center or squash)");
}

const char* crop_mode_name(CropMode m) { return m == CropMode::Center ? "center" : "squash"; }

// timm: scale_size = math.floor(img_size / crop_pct)
int PreprocessConfig::resize_height() const { return resize > 0 ? resize : int(std::floor(height / crop_pct)); }
int PreprocessConfig::resize_width() const { return resize > 0 ? resize : int(std::floor(width / crop_pct)); }

CropGeometry crop_geometry(int w, int h, const PreprocessConfig& cfg) {
  int new_w = cfg.resize_width(), new_h = cfg.resize_height();
  if (cfg.crop_mode == CropMode::Center) {
    // torchvision Resize(int): the shorter side becomes the size, the longer int(size * long / short).
    // timm uses ResizeKeepRatio for non-square targets; for square ones (all ViTs) this is exact.
    const int size = new_h;
    if (w <= h) {
      new_w = size;
      new_h = int(double(size) * h / w);
    } else {
      new_h = size;
      new_w = int(double(size) * w / h);
    }
  }
  // center_crop's arithmetic: a side shorter than the crop is padded by (crop - side) / 2 before it.
  const auto origin = [](int side, int crop) {
    return crop > side ? -((crop - side) / 2) : int(std::nearbyint((side - crop) / 2.0));
  };
  return {new_w, new_h, origin(new_w, cfg.width), origin(new_h, cfg.height)};
}

Image resize_and_crop(const Image& img, const PreprocessConfig& cfg) {
  if (img.width <= 0 || img.height <= 0) throw Error("cannot preprocess an empty image");
  const CropGeometry g = crop_geometry(img.width, img.height, cfg);
  if (g.resized_w < cfg.width || g.resized_h < cfg.height)  // the crop pads: resize everything, then pad and crop
    return center_crop(resize_like_pil(img, g.resized_w, g.resized_h, cfg.interpolation), cfg.height, cfg.width);
  return resize_like_pil_window(img, g.resized_w, g.resized_h, cfg.interpolation, g.left, g.top, cfg.width, cfg.height);
}

void normalize_to_chw(const Image& crop, const PreprocessConfig& cfg, float* out) {
  // ToTensor + Normalize per value, (v / 255 - mean) / std in float as torch computes it, tabulated.
  float table[3][256];
  for (int c = 0; c < 3; ++c)
    for (int v = 0; v < 256; ++v) table[c][v] = (float(v) / 255.f - cfg.mean[c]) / cfg.std[c];
  const size_t plane = size_t(crop.width) * crop.height;
  for (size_t i = 0; i < plane; ++i)
    for (int c = 0; c < 3; ++c) out[c * plane + i] = table[c][crop.rgb[i * 3 + c]];
}

void preprocess(const Image& img, const PreprocessConfig& cfg, float* out) {
  normalize_to_chw(resize_and_crop(img, cfg), cfg, out);
}

}  // namespace vit

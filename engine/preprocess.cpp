// timm eval preprocessing (transforms_factory.transforms_imagenet_eval with torchvision's Resize,
// CenterCrop, ToTensor and Normalize on PIL images), with the same integer arithmetic.
#include "preprocess.h"

#include <cmath>

#include "error.h"

namespace vit {
namespace {

// torchvision CenterCrop: pads with zeros when the image is smaller, then crops at
// top = int(round((h - ch) / 2)) with Python's round-half-to-even (nearbyint does the same).
Image center_crop(const Image& img, int ch, int cw) {
  const int pad_l = cw > img.width ? (cw - img.width) / 2 : 0;
  const int pad_t = ch > img.height ? (ch - img.height) / 2 : 0;
  const int pw = std::max(img.width, cw), ph = std::max(img.height, ch);
  const int left = int(std::nearbyint((pw - cw) / 2.0)), top = int(std::nearbyint((ph - ch) / 2.0));
  Image out;
  out.width = cw;
  out.height = ch;
  out.rgb.assign(size_t(cw) * ch * 3, 0);
  for (int y = 0; y < ch; ++y) {
    const int sy = y + top - pad_t;
    if (sy < 0 || sy >= img.height) continue;
    for (int x = 0; x < cw; ++x) {
      const int sx = x + left - pad_l;
      if (sx < 0 || sx >= img.width) continue;
      for (int c = 0; c < 3; ++c)
        out.rgb[(size_t(y) * cw + x) * 3 + c] = img.rgb[(size_t(sy) * img.width + sx) * 3 + c];
    }
  }
  return out;
}

}  // namespace

Image resize_and_crop(const Image& img, const PreprocessConfig& cfg) {
  if (img.width <= 0 || img.height <= 0) throw Error("cannot preprocess an empty image");
  // timm: scale_size = math.floor(img_size / crop_pct)
  const int scale_h = cfg.resize > 0 ? cfg.resize : int(std::floor(cfg.height / cfg.crop_pct));
  const int scale_w = cfg.resize > 0 ? cfg.resize : int(std::floor(cfg.width / cfg.crop_pct));
  int new_w, new_h;
  if (cfg.crop_mode == "squash") {
    new_w = scale_w;
    new_h = scale_h;
  } else if (cfg.crop_mode == "center") {
    // torchvision Resize(int): the shorter side becomes the size, the longer int(size * long / short).
    // timm uses ResizeKeepRatio for non-square targets; for square ones (all ViTs) this is exact.
    const int size = scale_h;
    if (img.width <= img.height) {
      new_w = size;
      new_h = int(double(size) * img.height / img.width);
    } else {
      new_h = size;
      new_w = int(double(size) * img.width / img.height);
    }
  } else {
    throw Error("unsupported crop_mode '" + cfg.crop_mode + "' (expected center or squash)");
  }
  if (new_w < cfg.width || new_h < cfg.height)  // the crop pads: resize everything, then pad and crop
    return center_crop(resize_like_pil(img, new_w, new_h, cfg.interpolation), cfg.height, cfg.width);
  const int left = int(std::nearbyint((new_w - cfg.width) / 2.0)), top = int(std::nearbyint((new_h - cfg.height) / 2.0));
  return resize_like_pil_window(img, new_w, new_h, cfg.interpolation, left, top, cfg.width, cfg.height);
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

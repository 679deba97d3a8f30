// timm's NaFlex eval transform (timm/data/naflex_transforms.py: get_image_size_for_seq, ResizeToSequence,
// patchify_image; timm/data/naflex_dataset.py: NaFlexCollator's padding), with the same double arithmetic
// in the scale search and PIL's resize (resample.h).
#include "engine/preprocess/naflex.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "vit/error.h"
#include "vit/limits.h"

namespace vit {

PatchGrid naflex_grid(int width, int height, int patch, int max_patches) {
  if (patch <= 0) throw Error("NaFlex patch size must be positive, not " + std::to_string(patch));
  if (max_patches <= 0) throw Error("NaFlex patch budget must be positive, not " + std::to_string(max_patches));
  if (width <= 0 || height <= 0)
    throw Error("cannot preprocess an empty image (" + std::to_string(width) + "x" + std::to_string(height) + ")");
  // prepare_target_hw: scale, round each side up to whole patches, at least one patch.
  const auto grid_at = [&](double ratio) {
    const double rows = std::ceil(double(height) * ratio / patch), cols = std::ceil(double(width) * ratio / patch);
    return std::pair<double, double>{std::max(rows, 1.0), std::max(cols, 1.0)};
  };
  // is_feasible and the binary search on the ratio, exactly as timm runs them.
  const double eps = 1e-5;
  double lb = eps / 10.0, rb = 100.0;
  while (rb - lb >= eps) {
    const double mid = (lb + rb) / 2.0;
    const auto [rows, cols] = grid_at(mid);
    if (rows * cols <= double(max_patches))
      lb = mid;
    else
      rb = mid;
  }
  if (lb <= eps)  // timm: "Binary search failed - image might be too large?"
    throw Error("image of " + std::to_string(width) + "x" + std::to_string(height) + " pixels is too large for " +
                std::to_string(max_patches) + " patches of " + std::to_string(patch) +
                " pixels (it would be scaled by less than 1e-5)");
  const auto [rows, cols] = grid_at(lb);
  PatchGrid g{int(rows), int(cols)};
  if (g.count() * patch * patch > kDefaultMaxPixels)
    throw Error("a budget of " + std::to_string(max_patches) + " patches of " + std::to_string(patch) +
                " pixels resizes this image to " + std::to_string(g.cols * patch) + "x" +
                std::to_string(g.rows * patch) + " pixels, over the limit of " + std::to_string(kDefaultMaxPixels));
  return g;
}

Image naflex_resize(const Image& img, const NaflexConfig& cfg, PatchGrid* grid) {
  const PatchGrid g = naflex_grid(img.width, img.height, cfg.patch, cfg.max_patches);
  if (grid) *grid = g;
  // torchvision's resize on a PIL image: Image.resize((w, h), filter) (a copy at the same size).
  return resize_like_pil(img, g.cols * cfg.patch, g.rows * cfg.patch, cfg.interpolation);
}

PatchGrid naflex_patches(const Image& img, const NaflexConfig& cfg, int64_t capacity, float* patches,
                         int32_t* coords, uint8_t* valid) {
  PatchGrid g;
  const Image resized = naflex_resize(img, cfg, &g);
  if (g.count() > capacity)
    throw Error("the image's " + std::to_string(g.rows) + "x" + std::to_string(g.cols) + " patches do not fit in " +
                std::to_string(capacity));
  // ToTensor + Normalize per value, (v / 255 - mean) / std in float as torch computes it, tabulated.
  float table[3][256];
  for (int c = 0; c < 3; ++c)
    for (int v = 0; v < 256; ++v) table[c][v] = (float(v) / 255.f - cfg.mean[c]) / cfg.std[c];
  const int P = cfg.patch;
  const int64_t per = cfg.patch_floats(), stride = int64_t(resized.width) * 3;
  // patchify_image(channels_last=True): patch (gy, gx) is [ky, kx, c] of the pixels it covers.
  for (int gy = 0; gy < g.rows; ++gy)
    for (int gx = 0; gx < g.cols; ++gx) {
      const int64_t i = int64_t(gy) * g.cols + gx;
      float* o = patches + i * per;
      for (int ky = 0; ky < P; ++ky) {
        const uint8_t* row = resized.rgb.data() + (int64_t(gy) * P + ky) * stride + int64_t(gx) * P * 3;
        for (int k = 0; k < P * 3; ++k) o[ky * P * 3 + k] = table[k % 3][row[k]];
      }
      coords[2 * i] = gy;
      coords[2 * i + 1] = gx;
      valid[i] = 1;
    }
  // NaFlexCollator: zeros past the image's patches, coordinates (0, 0), not valid.
  for (int64_t i = g.count(); i < capacity; ++i) {
    std::fill_n(patches + i * per, per, 0.f);
    coords[2 * i] = coords[2 * i + 1] = 0;
    valid[i] = 0;
  }
  return g;
}

}  // namespace vit

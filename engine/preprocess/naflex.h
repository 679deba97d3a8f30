// NaFlex preprocessing (SigLIP 2's variable-shape input) as timm's eval transform does it
// (create_transform(naflex=True, patchify=True)): the whole image resized at its own aspect ratio so that
// its grid of patches fits a budget (ResizeToSequence: no crop), ToTensor, Normalize, then Patchify
// (channels-last patches in row-major order, each with its (row, column) and a validity flag).
#pragma once
#include <array>
#include <cstdint>

#include "engine/image/image.h"
#include "engine/preprocess/resample.h"

namespace vit {

struct NaflexConfig {
  int patch = 16;         // patch side in pixels
  int max_patches = 256;  // the budget: SigLIP 2's (timm's transform defaults to 576; it has no per-model one)
  Filter interpolation = Filter::Bicubic;
  std::array<float, 3> mean{0.5f, 0.5f, 0.5f};  // SigLIP's
  std::array<float, 3> std{0.5f, 0.5f, 0.5f};

  int64_t patch_floats() const { return int64_t(patch) * patch * 3; }
};

// An image's grid of patches: rows x cols, resized to (rows * patch) x (cols * patch) pixels.
struct PatchGrid {
  int rows = 0, cols = 0;
  int64_t count() const { return int64_t(rows) * cols; }
  bool operator==(const PatchGrid& o) const { return rows == o.rows && cols == o.cols; }
  bool operator!=(const PatchGrid& o) const { return !(*this == o); }
};

// timm's get_image_size_for_seq for a width x height image: the largest scale (a binary search to 1e-5)
// at which both sides, each rounded up to a multiple of the patch and at least one patch, give at most
// max_patches patches. Throws when patch or max_patches is not positive, or the image is empty.
PatchGrid naflex_grid(int width, int height, int patch, int max_patches);

// The image resized to its grid (timm's ResizeToSequence: PIL's resize with the filter's antialiasing):
// [rows * patch, cols * patch, 3] uint8.
Image naflex_resize(const Image& img, const NaflexConfig& cfg, PatchGrid* grid);

// The whole transform, padded as timm's NaFlexCollator pads a batch to `capacity` patches (capacity >=
// the grid's count, else an error): patch i < count is [patch, patch, 3] floats of (value / 255 - mean) /
// std at row-major grid position (i / cols, i % cols), coords[2i], coords[2i + 1] that (row, column), and
// valid[i] = 1; the rest zeros, (0, 0) and 0. patches: capacity * patch_floats() floats; coords:
// 2 * capacity; valid: capacity.
PatchGrid naflex_patches(const Image& img, const NaflexConfig& cfg, int64_t capacity, float* patches,
                         int32_t* coords, uint8_t* valid);

}  // namespace vit

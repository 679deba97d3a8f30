// The limits every entry point shares (the library's options, the command's flags, the engine's
// decoders), defined once. Standard types only.
#pragma once
#include <cstdint>

namespace vit {

constexpr int64_t kMaxBatch = 4096;                 // the largest batch a forward pass is made for
constexpr int64_t kDefaultMaxPixels = 100'000'000;  // larger images are refused from their header
constexpr int64_t kMaxInputSize = 8192;             // the largest input side (a config's, --img-size): 512 x 512 patches of 16
constexpr int64_t kMaxNaflexPatches = 16384;        // the largest budget of patches per image of a NaFlex model (--max-patches)

// Throws vit::ArgumentError unless 1 <= B <= kMaxBatch: the one check of a batch size.
void check_batch_size(int64_t B);

}  // namespace vit

// The limits every entry point shares (the library's options, the command's flags, the engine's
// decoders), defined once. Standard types only.
#pragma once
#include <cstdint>

namespace vit {

constexpr int64_t kMaxBatch = 4096;                 // the largest batch a forward pass is made for
constexpr int64_t kDefaultMaxPixels = 100'000'000;  // larger images are refused from their header

}  // namespace vit

// The int8 weights `vit quantize` rounds ahead of time (vit/quantize.h), in int8.safetensors beside the
// checkpoint they were made from: per block linear layer, q [N, K] (I8) and scale [N] (F32) for each of the
// two int8 grids (|q| <= 127 on CPUs with VNNI, 64 without: int8_weight_max()).
#pragma once
#include <memory>
#include <set>
#include <string>

#include "engine/io/safetensors.h"
#include "engine/nn/linear.h"

namespace vit {

inline constexpr const char* kInt8WeightsFile = "int8.safetensors";
// The grids a folder holds, and the names of a layer's tensors on one.
inline constexpr int kInt8Grids[] = {127, 64};
std::string rounded_name(const std::string& layer, const char* what, int qmax);  // "blocks.0.attn.qkv.q127"
// What a folder records of the checkpoint it was made from: its size in bytes.
std::string checkpoint_bytes(const std::string& checkpoint);

class RoundedWeights {
 public:
  // The file at path, made from `checkpoint` (checked by its size, else throws).
  static std::unique_ptr<RoundedWeights> open(const std::string& path, const std::string& checkpoint);
  // The int8 layer from its rounded weights on this CPU's grid; throws naming the layer when they are
  // missing or not of shape [N, K] and [N].
  LinearWeights linear(Arena& store, const std::string& layer, const float* bias, int64_t K, int64_t N,
                       int64_t typical_rows, Epilogue ep);
  // Throws when the file holds layers the model does not have (made for another model).
  void check_all_used() const;

 private:
  explicit RoundedWeights(const std::string& path) : st_(path) {}
  SafeTensors st_;
  std::set<std::string> used_;
};

}  // namespace vit

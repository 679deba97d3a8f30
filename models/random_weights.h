// Random weights for `vit bench --arch` and tests: a TensorSource that makes each tensor the loader asks for
// when it asks, from a seed and the tensor's name, so a random model is loaded as a checkpoint is, one
// layer at a time, and never held whole in f32.
#pragma once
#include <cstdint>

#include "tensor_source.h"
#include "vit_config.h"

namespace vit {

// Values by what a tensor is, as timm initialises it in spirit: a linear layer's weight uniform within
// 1/sqrt(fan in), a norm's weight and a layer scale near 1, everything else (biases, tokens, tables) near 0;
// RoPE-Mixed's frequencies as timm's init_random_2d_freqs. It has no optional tensors: the loader takes
// exactly what the configuration asks for (its biases, timm's spellings).
class RandomSource : public TensorSource {
 public:
  RandomSource(const ViTConfig& cfg, uint32_t seed) : cfg_(cfg), seed_(seed) {}
  bool has(const std::string&) const override { return false; }
  Tensor take(const std::string& timm_name, const std::vector<int64_t>& shape) override;
  Layout layout() const override { return Layout::Timm; }

 private:
  const ViTConfig& cfg_;
  uint32_t seed_;
};

}  // namespace vit

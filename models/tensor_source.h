// Where ViT::load_weights pulls a model's tensors from, one at a time, by timm's names: a checkpoint file
// (checkpoint.h) or a seeded generator (random_weights.h). Each tensor comes as f32, the dtype the loader
// converts from, and is gone once the loader has made its layer: no source holds a whole model in f32.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "layouts.h"

namespace vit {

class TensorSource {
 public:
  // One tensor taken from a source, as f32.
  class Tensor {
   public:
    Tensor() = default;
    explicit Tensor(std::vector<float> v) : values_(std::move(v)) {}
    const float* data() const { return values_.data(); }
    size_t size() const { return values_.size(); }
    bool empty() const { return values_.empty(); }
    std::vector<float> to_vector() && { return std::move(values_); }

   private:
    std::vector<float> values_;
  };

  virtual ~TensorSource() = default;
  // Whether the source has a tensor the model may go without (an optional bias, another spelling).
  virtual bool has(const std::string& timm_name) const = 0;
  // The tensor, of the expected shape (throws naming it when it is missing or of another shape).
  virtual Tensor take(const std::string& timm_name, const std::vector<int64_t>& expected) = 0;
  // The checkpoint layout the tensors come in (Layout::Timm for generated ones).
  virtual Layout layout() const = 0;
};

}  // namespace vit

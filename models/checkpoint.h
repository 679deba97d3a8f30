// A ViT checkpoint seen through timm's tensor names, whatever layout the file uses (layouts.h's tables say
// where each timm tensor is; tests/model_files.cpp writes those layouts on its own, to test it). Tracks which tensors were taken so a file with tensors the model does not use
// is rejected instead of silently half-loaded.
#pragma once
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/io/safetensors.h"
#include "layouts.h"
#include "tensor_source.h"

namespace vit {

// Which of a checkpoint's towers a Checkpoint reads: the image tower, by timm's names (layout_tensor), or the text
// tower beside it (CLIP's and SigLIP's), by the text tower's names (text_layout_tensor); the other tower's tensors
// are not its to use.
enum class Tower { Image, Text };

class Checkpoint : public TensorSource {
 public:
  // Throws when a text tower is asked of a file that holds none.
  explicit Checkpoint(const std::string& path, Tower tower = Tower::Image);

  const std::string& path() const { return st_->path(); }
  Layout layout() const override { return layout_; }
  bool has(const std::string& timm_name) const override;
  std::vector<int64_t> shape(const std::string& timm_name) const;  // throws when missing
  // The tensor read from the file as f32 (F16 and BF16 widened; Hugging Face's q, k, v assembled),
  // checked against the expected shape ("got [..], expected [..]").
  Tensor take(const std::string& timm_name, const std::vector<int64_t>& expected) override;
  // Throws listing the tensors no take() asked for.
  void check_all_used() const;
  int64_t count_blocks() const;
  std::string dtypes() const;  // the stored dtypes, "F32" or "BF16, F32"
  const std::string& text_prefix() const { return text_prefix_; }  // Tower::Text: "text." or ""
  // A tensor outside either tower, read as it is stored (CLIP's and SigLIP's logit_scale and logit_bias).
  const SafeTensors& file() const { return *st_; }

 private:
  StoredTensor resolve(const std::string& name) const;  // where a tensor of this tower is stored
  std::vector<int64_t> part_shape(const StoredPart& p) const;
  std::vector<float> read_part(const StoredPart& p);
  std::unique_ptr<SafeTensors> st_;
  Layout layout_ = Layout::Timm;
  Tower tower_ = Tower::Image;
  std::string text_prefix_;
  std::set<std::string> used_;
};

}  // namespace vit

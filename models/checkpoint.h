// A ViT checkpoint seen through timm's tensor names, whatever layout the file uses (timm, Hugging Face
// transformers, torchvision): the engine's renaming lives here (tests/model_files.cpp writes those layouts
// on its own, to test it). Tracks which tensors were taken so a file with tensors the model does not use
// is rejected instead of silently half-loaded.
#pragma once
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/safetensors.h"

namespace vit {

enum class CheckpointLayout { Timm, HuggingFace, Torchvision };
const char* layout_name(CheckpointLayout l);

class Checkpoint {
 public:
  explicit Checkpoint(const std::string& path);

  const std::string& path() const { return st_->path(); }
  CheckpointLayout layout() const { return layout_; }
  bool has(const std::string& timm_name) const;
  std::vector<int64_t> shape(const std::string& timm_name) const;  // throws when missing
  // A taken tensor: f32 values read in place from the mapped file where the file holds F32, else
  // converted (F16, BF16) or assembled (Hugging Face's q, k, v). Its pages are dropped when it dies.
  class Tensor {
   public:
    Tensor() = default;
    Tensor(Tensor&& o) noexcept { *this = std::move(o); }
    Tensor& operator=(Tensor&& o) noexcept;
    ~Tensor();
    const float* data() const { return view_ ? view_ : owned_.data(); }
    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    std::vector<float> to_vector() const { return {data(), data() + size_}; }

   private:
    friend class Checkpoint;
    const SafeTensors* st_ = nullptr;
    std::vector<std::string> names_;
    const float* view_ = nullptr;
    std::vector<float> owned_;
    size_t size_ = 0;
  };
  // The tensor, checked against the expected shape ("got [..], expected [..]").
  Tensor take(const std::string& timm_name, const std::vector<int64_t>& expected);
  // Throws listing the tensors no take() asked for.
  void check_all_used() const;
  int64_t count_blocks() const;
  std::string dtypes() const;  // the stored dtypes, "F32" or "BF16, F32"

 private:
  std::vector<std::string> source_names(const std::string& timm_name) const;
  std::unique_ptr<SafeTensors> st_;
  CheckpointLayout layout_ = CheckpointLayout::Timm;
  std::set<std::string> used_;
};

}  // namespace vit

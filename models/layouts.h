// Where timm's tensors are in the checkpoint layouts of other model code: Hugging Face's Dinov2Model and
// Dinov2WithRegistersModel, CLIPVisionModelWithProjection (or a whole CLIPModel), SiglipVisionModel (or a
// whole SiglipModel), and OpenCLIP's `visual.*` state dicts. A timm tensor is a part of one stored tensor, or
// several stacked, transposed or summed; models/checkpoint.cpp reads them so.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "families.h"

namespace vit {

class SafeTensors;

// A slice [begin, end) along `dim` of a stored tensor (dim -1: all of it; end -1: to the end; thirds: begin
// and end count thirds of the dimension, as nn.MultiheadAttention stacks q, k, v), transposed when 2-D and asked.
struct StoredPart {
  std::string name;
  int dim = -1;
  int64_t begin = 0, end = 0;
  bool transpose = false;
  bool thirds = false;
};

// A timm tensor: its parts stacked along dim 0, plus `add` (same size) element by element, its shape
// with `lead_ones` leading 1s (Hugging Face's class_embedding [D] is timm's cls_token [1, 1, D]).
struct StoredTensor {
  std::vector<StoredPart> parts;
  std::vector<StoredPart> add;
  int lead_ones = 0;
};

enum class OtherLayout { None, HfDinov2, HfDinov2Registers, HfClip, HfSiglip, OpenClip };
const char* other_layout_name(OtherLayout l);

// The family a layout's models are: Hugging Face's DINOv2 ones DINOv2, its CLIP and OpenCLIP's CLIP towers,
// its SigLIP SigLIP towers.
Family other_layout_family(OtherLayout l);

// The layout of a checkpoint by its tensor names, None for timm's and the classic layouts.
OtherLayout detect_other_layout(const SafeTensors& st);

// Where a timm tensor is in such a checkpoint; no parts when the layout has no counterpart.
StoredTensor other_layout_tensor(OtherLayout l, const std::string& timm_name);

// Stored tensors the image model never reads: a text tower beside it (OpenCLIP's, or a whole
// CLIPModel's or SiglipModel's), DINOv2's mask token for masked training, position_ids buffers.
bool other_layout_ignores(OtherLayout l, const std::string& stored_name);

// A projection to the joint embedding without a bias (OpenCLIP's proj, Hugging Face's visual_projection).
bool other_layout_head_has_bias(OtherLayout l);

}  // namespace vit

// Every checkpoint layout the engine reads, one table each of stored names -> timm's names with their
// transforms: timm's own, Hugging Face's ViTModel / ViTForImageClassification, torchvision's vit_*, Hugging
// Face's Dinov2Model and Dinov2WithRegistersModel, CLIPVisionModelWithProjection (or a whole CLIPModel),
// SiglipVisionModel (or a whole SiglipModel), OpenCLIP's `visual.*` state dicts, and OpenCLIP's towers on a timm
// model (`visual.trunk.*`: timm's own names under that prefix). A timm tensor is a part
// of one stored tensor, or several stacked, transposed or summed; models/checkpoint.cpp reads them so.
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

enum class Layout { Timm, HfViT, Torchvision, HfDinov2, HfDinov2Registers, HfClip, HfSiglip, OpenClip, OpenClipTimm };
const char* layout_name(Layout l);  // "timm", "Hugging Face", "OpenCLIP", ...

// The layout of a checkpoint by its tensor names; throws when it holds no patch embedding any layout names.
Layout detect_layout(const SafeTensors& st, const std::string& path);

// The family a layout's models are, when the layout says it (Hugging Face's DINOv2 ones DINOv2, its CLIP and
// OpenCLIP's CLIP towers, its SigLIP SigLIP towers); false for timm's, Hugging Face ViT's and torchvision's,
// whose family the tensors or the config say, and for OpenCLIP's timm trunks, whose config names the trunk.
bool layout_family(Layout l, Family* f);

// Where a timm tensor is in such a checkpoint; no parts when the layout has no counterpart.
StoredTensor layout_tensor(Layout l, const std::string& timm_name);

// The text tower beside an image tower (OpenCLIP's and Hugging Face's CLIP and SigLIP models): whether the file
// holds one, and the prefix of its names (OpenCLIP's CustomTextCLIP: "text.", else ""); where a text tower's tensor
// is, by the engine's names for it (text_tower.h), as layout_tensor for the image tower; and whether a stored tensor
// belongs to the text tower (its buffers, position_ids and attn_mask, do not).
bool text_tower_prefix(Layout l, const SafeTensors& st, std::string* prefix);
StoredTensor text_layout_tensor(Layout l, const std::string& prefix, const std::string& name);
bool text_layout_holds(Layout l, const std::string& prefix, const std::string& stored_name);

// Stored tensors the image model never reads: a text tower beside it (OpenCLIP's, or a whole
// CLIPModel's or SiglipModel's), DINOv2's mask token for masked training, position_ids buffers, Hugging
// Face ViT's pooler (it feeds no classifier).
bool layout_ignores(Layout l, const std::string& stored_name);

// Whether the head has a bias (OpenCLIP's proj and Hugging Face's visual_projection have none).
bool layout_head_has_bias(Layout l);

// Whether the layout's own code resamples its position table at another input size with antialiasing
// (timm's, open_clip's resize_pos_embed and Dinov2WithRegisters'), or without (transformers' others).
bool layout_pos_antialias(Layout l);

}  // namespace vit

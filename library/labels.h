// Class names for a model's outputs, from wherever they can be had.
#pragma once
#include <string>
#include <vector>

#include "models/vit_config.h"

namespace vit {

// Labels for a classifier's C classes: a labels file (one per line, a UTF-8 byte-order mark allowed), else the
// checkpoint's, else ImageNet-1k's when C is 1000, else "class_<i>"; none for a model without a classifier head
// (a projection into an image-text space has outputs, not classes). Throws vit::Error for a labels file that
// cannot be read or holds another number of labels, vit::ArgumentError for one given a model without classes.
std::vector<std::string> resolve_labels(const std::string& labels_file, const ViTConfig& cfg);

}  // namespace vit

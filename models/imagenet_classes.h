// The ImageNet-1k class names the project carries, for checkpoints whose config names no labels.
#pragma once

namespace vit {

extern const char* const kImageNetClasses[1000];

}  // namespace vit

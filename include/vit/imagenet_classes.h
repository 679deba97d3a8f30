// The ImageNet-1k class names the project carries, for checkpoints whose config names no labels, and
// their WordNet ids, by which ImageNet photos are named or filed.
#pragma once

namespace vit {

extern const char* const kImageNetClasses[1000];
// Their WordNet ids ("n01440764" for tench), in the same order.
extern const char* const kImageNetSynsets[1000];

}  // namespace vit

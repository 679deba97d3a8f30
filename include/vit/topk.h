// Softmax over a row of logits and its k most probable classes.
#pragma once
#include <cstdint>
#include <vector>

namespace vit {

struct Scored {
  int index;
  float prob;
};

// The k best classes of one row of logits, most probable first; probabilities from a stable softmax.
std::vector<Scored> top_k(const float* logits, int64_t classes, int k);

}  // namespace vit

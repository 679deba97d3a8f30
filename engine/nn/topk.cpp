// Softmax + partial sort; ties keep the lower class index first, as torch.topk does on CPU.
#include "vit/topk.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace vit {

std::vector<Scored> top_k(const float* logits, int64_t classes, int k) {
  if (classes <= 0 || k <= 0) return {};
  const float mx = *std::max_element(logits, logits + classes);
  double sum = 0;
  for (int64_t i = 0; i < classes; ++i) sum += std::exp(double(logits[i] - mx));
  std::vector<int> idx(static_cast<size_t>(classes));
  std::iota(idx.begin(), idx.end(), 0);
  const int kk = int(std::min<int64_t>(k, classes));
  std::partial_sort(idx.begin(), idx.begin() + kk, idx.end(), [&](int a, int b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  std::vector<Scored> out;
  for (int i = 0; i < kk; ++i) out.push_back({idx[size_t(i)], float(std::exp(double(logits[idx[size_t(i)]] - mx)) / sum)});
  return out;
}

}  // namespace vit

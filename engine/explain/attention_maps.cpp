// Rollout and per-head query attention; see attention_maps.h.
#include "engine/explain/attention_maps.h"

#include <algorithm>

#include "vit/error.h"

namespace vit {
namespace {

// The query as a row vector over the T tokens.
std::vector<double> query_row(int64_t T, Query query) {
  std::vector<double> v(static_cast<size_t>(T), query == Query::ClassToken ? 0.0 : 1.0 / double(T));
  if (query == Query::ClassToken) v[0] = 1.0;
  return v;
}

void check(int64_t H, int64_t T, int64_t prefix) {
  if (H < 1 || T < 1 || prefix < 0 || prefix >= T)
    throw Error("attention maps: " + std::to_string(T) + " tokens with " + std::to_string(prefix) +
                " prefix tokens and " + std::to_string(H) + " heads leave no patch to map");
}

}  // namespace

std::vector<float> attention_rollout(const std::vector<const float*>& blocks, int64_t H, int64_t T, int64_t prefix,
                                     Query query) {
  check(H, T, prefix);
  // Only the query's row of R = Â_L ... Â_1 is wanted: a row vector times each Â_l from the last block
  // down, T^2 work per block instead of T^3. With u_i = v_i / rowsum_i (rowsum_i = 0.5 sum_j A_ij + 0.5),
  // v Â = 0.5 u A + 0.5 u.
  const size_t n = static_cast<size_t>(T);
  std::vector<double> v = query_row(T, query), u(n), next(n), row_sum(n);
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    const float* a = *it;
    std::fill(row_sum.begin(), row_sum.end(), 0.0);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        const float* row = a + (h * T + i) * T;
        double s = 0;
        for (int64_t j = 0; j < T; ++j) s += row[j];
        row_sum[size_t(i)] += s;
      }
    for (int64_t i = 0; i < T; ++i) u[size_t(i)] = v[size_t(i)] / (0.5 * row_sum[size_t(i)] / double(H) + 0.5);
    std::fill(next.begin(), next.end(), 0.0);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        const double ui = u[size_t(i)];
        if (ui == 0) continue;
        const float* row = a + (h * T + i) * T;
        for (int64_t j = 0; j < T; ++j) next[size_t(j)] += ui * row[j];
      }
    for (int64_t j = 0; j < T; ++j) v[size_t(j)] = 0.5 * next[size_t(j)] / double(H) + 0.5 * u[size_t(j)];
  }
  const double top = *std::max_element(v.begin() + prefix, v.end());
  std::vector<float> map(size_t(T - prefix));
  for (int64_t j = prefix; j < T; ++j) map[size_t(j - prefix)] = float(top > 0 ? v[size_t(j)] / top : 0.0);
  return map;
}

std::vector<float> query_attention(const float* block, int64_t H, int64_t T, int64_t prefix, Query query) {
  check(H, T, prefix);
  const std::vector<double> q = query_row(T, query);
  const int64_t N = T - prefix;
  std::vector<float> out(size_t(H * N));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t i = 0; i < T; ++i)
        if (q[size_t(i)] != 0) s += q[size_t(i)] * block[(h * T + i) * T + prefix + j];
      out[size_t(h * N + j)] = float(s);
    }
  return out;
}

}  // namespace vit

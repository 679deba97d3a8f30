// Quantizers for the int8 linear layers; see quantize.h.
#include "engine/nn/quantize.h"

#include <algorithm>
#include <cmath>

#include "vit/cpu.h"

namespace vit {
namespace {

// Round to nearest, ties to even, for |v| < 2^22, without a libm call (so the loops vectorize): adding
// and subtracting 1.5 * 2^23 leaves v rounded in the FPU's default mode.
inline float round_even(float v) { return (v + 12582912.f) - 12582912.f; }

}  // namespace

float channel_scale(const float* row, int64_t K, int qmax) {
  float amax = 0.f;
  for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(row[k]));
  return amax > 0.f ? amax / float(qmax) : 1.f;
}

void quantize_weights(const float* w, int64_t N, int64_t K, int qmax, int8_t* q, float* scale) {
  for (int64_t n = 0; n < N; ++n) {
    const float* row = w + n * K;
    scale[n] = channel_scale(row, K, qmax);
    for (int64_t k = 0; k < K; ++k) {
      const float v = std::nearbyint(row[k] / scale[n]);
      q[n * K + k] = int8_t(std::min(float(qmax), std::max(-float(qmax), v)));  // NaN gives -qmax, never UB
    }
  }
}

Int8Grid int8_grid(Int8Split split) {
  if (cpu_isa().vnni) return {127, 255};
  return split == Int8Split::SevenBitWeights ? Int8Grid{64, 255} : Int8Grid{127, 127};
}

Affine activation_affine(float lo, float hi, int top) {
  lo = std::min(lo, 0.f);
  hi = std::max(hi, 0.f);
  if (!(hi > lo)) return {1.f, 0};  // all zeros (or not finite: the result is garbage either way)
  const float scale = (hi - lo) / float(top);
  const float zero = std::nearbyint(-lo / scale);
  return {scale, int32_t(std::min(std::max(zero, 0.f), float(top)))};
}

void quantize_u8(const float* x, int64_t n, Affine a, uint8_t* q, int top) {
  const float inv = 1.f / a.scale, zero = float(a.zero), t = float(top);
  for (int64_t i = 0; i < n; ++i) q[i] = uint8_t(std::min(t, std::max(0.f, round_even(x[i] * inv) + zero)));
}

}  // namespace vit

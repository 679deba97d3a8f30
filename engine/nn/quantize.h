// The int8 arithmetic: weights symmetric per output channel (|q| <= qmax), activations asymmetric u8
// per row (x = scale * (q - zero), zero exactly representable). Rounding is to nearest, ties to even,
// and saturating, as torch's quantize_per_channel / quantize_per_tensor.
#pragma once
#include <cstdint>

namespace vit {

struct Affine {
  float scale;   // x = scale * (q - zero)
  int32_t zero;  // 0 to 255
};

// The scale of one output channel's K weights: max |w| / qmax (1 for a row of zeros).
float channel_scale(const float* row, int64_t K, int qmax);
// w [N, K] -> q [N, K] and scale [N] (channel_scale), w[n, k] ~ scale[n] * q[n, k], rounded to nearest.
void quantize_weights(const float* w, int64_t N, int64_t K, int qmax, int8_t* q, float* scale);

// The u8 grid over [min(lo, 0), max(hi, 0)]: 0 maps to an integer, so zero padding stays exact.
Affine activation_affine(float lo, float hi);
void quantize_u8(const float* x, int64_t n, Affine a, uint8_t* q);

}  // namespace vit

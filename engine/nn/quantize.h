// The int8 arithmetic: weights symmetric per output channel (|q| <= qmax), activations asymmetric u8
// per row (x = scale * (q - zero), zero exactly representable). Rounding is to nearest, ties to even,
// and saturating, as torch's quantize_per_channel / quantize_per_tensor.
#pragma once
#include <cstdint>

namespace vit {

struct Affine {
  float scale;   // x = scale * (q - zero)
  int32_t zero;  // 0 to the grid's top
};

// The scale of one output channel's K weights: max |w| / qmax (1 for a row of zeros).
float channel_scale(const float* row, int64_t K, int qmax);
// w [N, K] -> q [N, K] and scale [N] (channel_scale), w[n, k] ~ scale[n] * q[n, k], rounded to nearest.
void quantize_weights(const float* w, int64_t N, int64_t K, int qmax, int8_t* q, float* scale);

// How an int8 layer's two grids share the bits its products have. With VNNI (u8 x s8 products summed in
// 32 bits): weights |q| <= 127, inputs 0..255. Without, oneDNN's int8 kernels add pairs of products in
// saturating 16 bits (2 x input_max x weight_max <= 32767), so one of the two gives up a bit; which one
// costs a model less is measured per tower (docs/PERFORMANCE.md): the image towers keep 8-bit inputs
// (their logits' error is lower), the text towers 8-bit weights (their embeddings' cosine to f32 higher).
enum class Int8Split { SevenBitWeights, SevenBitInputs };
struct Int8Grid {
  int weight_max;  // |q| of the weights
  int input_max;   // the top of the inputs' u8 grid
};
// The grids on this CPU: {127, 255} with VNNI, whichever the split; else {64, 255} or {127, 127}.
Int8Grid int8_grid(Int8Split split);

// The u8 grid over [min(lo, 0), max(hi, 0)] with `top` + 1 levels (255 or 127): 0 maps to an integer, so
// zero padding stays exact.
Affine activation_affine(float lo, float hi, int top = 255);
void quantize_u8(const float* x, int64_t n, Affine a, uint8_t* q, int top = 255);

}  // namespace vit

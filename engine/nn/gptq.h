// GPTQ weight rounding (Frantar et al., 2022, "GPTQ: Accurate Post-Training Quantization for Generative
// Pre-trained Transformers"): a layer's weights rounded one input column at a time, each column's rounding
// error pushed onto the columns not rounded yet through the inverse Hessian of the layer's inputs.
#pragma once
#include <cstdint>

namespace vit {

// w [N, K] row-major; H [K, K] the sum of x xᵀ over calibration inputs x of the layer (symmetric, double).
// Writes q [N, K] and scale [N] on the grid quantize_weights uses (symmetric per output channel, |q| <=
// qmax, scale = max|w[n, :]| / qmax), but with the rounding that keeps w·x for inputs like the
// calibration's closest: columns in order of decreasing H[k, k] (the paper's act-order), H damped by
// 1% of its mean diagonal. Inputs that never varied (H[k, k] = 0) have their weights rounded to zero.
void gptq_quantize(const float* w, int64_t N, int64_t K, const double* H, int qmax, int8_t* q, float* scale);

// H [K, K] += xᵀ x for x [rows, K] row-major: a layer's inputs added to its Hessian (one f32 oneDNN
// matmul per call, summed in double).
void add_gram(const float* x, int64_t rows, int64_t K, double* H);

}  // namespace vit

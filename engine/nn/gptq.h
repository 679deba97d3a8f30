// GPTQ weight rounding (Frantar et al., 2022, "GPTQ: Accurate Post-Training Quantization for Generative
// Pre-trained Transformers"): a layer's weights rounded one input column at a time, each column's rounding
// error pushed onto the columns not rounded yet through the inverse Hessian of the layer's inputs.
#pragma once
#include <cstdint>
#include <vector>

namespace vit {

// What GPTQ rounds with, from a layer's inputs' Hessian H [K, K] (the sum of x xᵀ over calibration inputs
// x, symmetric, double), computed once per layer: the columns in order of decreasing H[k, k] (the paper's
// act-order), H damped by 1% of its mean diagonal, U upper triangular with Uᵀ U = H⁻¹.
struct GptqFactor {
  int64_t K = 0;
  std::vector<int64_t> perm;  // the column rounded i-th
  std::vector<char> dead;     // inputs that never varied (H[k, k] = 0), in that order: their weights become 0
  std::vector<double> u;      // [K, K], rows of U
};
GptqFactor gptq_factor(const double* H, int64_t K);

// w [N, K] row-major -> q [N, K] and scale [N] on the grid quantize_weights uses (symmetric per output
// channel, |q| <= qmax, scale = max|w[n, :]| / qmax), rounded so that w·x for inputs like the
// calibration's moves as little as GPTQ can make it.
void gptq_quantize(const float* w, int64_t N, const GptqFactor& f, int qmax, int8_t* q, float* scale);

// Σ over rows n of δ_nᵀ H δ_n for δ = w - scale ⊙ q: how far rounding w to q moves the layer's outputs on
// the inputs H was summed from (their squared change, summed; f32 products).
double output_change(const float* w, const int8_t* q, const float* scale, int64_t N, int64_t K, const double* H);

// H [K, K] += xᵀ x for x [rows, K] row-major: a layer's inputs added to its Hessian (one f32 oneDNN
// matmul per call, summed in double).
void add_gram(const float* x, int64_t rows, int64_t K, double* H);

}  // namespace vit

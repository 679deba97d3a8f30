// Linear layers y = x W^T + b, then GELU or added into y, in three precisions. Weights are prepared once,
// at load: F32 as timm computes; BF16 (bf16 inputs and weights, f32 accumulation; CPUs with avx512_bf16
// or AMX); Int8 (weights s8 per output channel; inputs u8, quantized as the layer runs, each row (token)
// on its own grid, so that an image's answer never depends on the images sharing its batch).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/nn/arena.h"
#include "engine/nn/ops.h"
#include "engine/nn/quantize.h"
#include "vit/precision.h"

namespace vit {

// How f32 weights are laid out for the matmul. NK is PyTorch's [N, K] as stored (oneDNN "ba"); Blocked
// is the layout oneDNN's matmul asks for ("any"), reordered once at load. Auto picks Blocked when that
// matmul is brgemm (AVX-512 and newer, where it is faster) and NK otherwise (AVX2's gemm:jit, where "any"
// means a plain layout that runs slower at ViT shapes): docs/PERFORMANCE.md. BF16 and Int8 weights
// always take the layout their matmul asks for.
enum class WeightLayout { Auto, NK, Blocked };
// AddToDst: dst += result (residual connection). QuickGelu: x * sigmoid(1.702 x), OpenAI CLIP's
// activation (timm's QuickGELU), oneDNN's swish with alpha 1.702.
enum class Epilogue { None, Gelu, QuickGelu, GeluTanh, AddToDst };

// Which oneDNN primitive a layer runs on: a matmul, or the same product as a 1x1 convolution over the
// rows (src nhwc with N = 1, H = 1, W = rows is exactly [rows, K] row-major, dst likewise [rows, N]).
// Chosen per layer at load, for its shape at one image's rows (so the same at every batch size), by
// rules measured per kernel family (choose_form in linear.cpp, docs/PERFORMANCE.md); f32 and int8 may
// take either, bf16 runs as a matmul. Auto: by those rules, or
// with VIT_LINEAR_FORM=timed in the environment by timing both at load (opt-in: timing noise can change
// the choice, and with it the last bits of f32 results, from run to run); =matmul or =conv forces one.
enum class LinearForm { Auto, Matmul, Conv1x1 };
const char* form_name(LinearForm f);

struct LinearWeights {
  Precision precision = Precision::F32;
  Epilogue epilogue = Epilogue::None;
  LinearForm form = LinearForm::Matmul;
  int64_t K = 0, N = 0;
  dnnl::memory w;              // [K, N] (a matmul's) or [N, K, 1, 1] (a convolution's): f32, bf16 or s8,
                               // in the layout the primitive runs from
  dnnl::memory b;              // f32 [1, N]; empty when the layer has no bias
  Stored<float> w_scale;     // Int8: [N], W[n, k] = w_scale[n] * w[k, n]
  Stored<int32_t> w_colsum;  // Int8: [N], sum over k of w[k, n], to take an input's zero point out
  int input_max = 255;       // Int8: the top of its inputs' u8 grid (int8_grid's input_max)
  size_t bytes() const;        // resident size of the weights and bias
};
// How a layer runs, for `vit inspect`: "matmul", "1x1 convolution, s32 product, then dequantized per row", ...
std::string linear_summary(const LinearWeights& lw);

// An f32 layer's weights back as nn.Linear stores them, [N, K] row-major.
std::vector<float> f32_weights(const LinearWeights& lw);

// The largest |q| of int8 weights with 8-bit inputs on this CPU: 127 with VNNI, 64 without
// (int8_grid(Int8Split::SevenBitWeights)); the grid of `vit quantize`'s rounded weights.
int int8_weight_max();

// weight [N, K] row-major as nn.Linear stores it, bias [N] or nullptr; ep: what follows the product;
// the copies oneDNN runs from are placed in `store`, which must outlive them. typical_rows: the M the layer will mostly run at (a model's tokens per image), for which the
// layout and the form are chosen. Throws when this CPU has no fast kernel for the precision (bf16
// without avx512_bf16 or AMX, int8 with only oneDNN's reference matmul).
LinearWeights make_linear(Arena& store, const float* weight, const float* bias, int64_t K, int64_t N,
                          int64_t typical_rows, Epilogue ep, Precision precision = Precision::F32,
                          WeightLayout layout = WeightLayout::Auto, LinearForm form = LinearForm::Auto,
                          Int8Split split = Int8Split::SevenBitWeights);

// An int8 layer from weights rounded ahead of time (GPTQ, `vit quantize`) on the grid of
// int8_weight_max(): q [N, K] row-major, |q| <= that maximum, W[n, k] ~ scale[n] * q[n, k].
struct Int8Weights {
  const int8_t* q;
  const float* scale;
};
LinearWeights make_int8_linear(Arena& store, const Int8Weights& weight, const float* bias, int64_t K, int64_t N,
                               int64_t typical_rows, Epilogue ep, LinearForm form = LinearForm::Auto);

// What the bf16 and int8 layers use beside their input and output, one set per Plan, sized for its
// largest layer by add_linear_scratch (nothing for F32).
struct LinearScratch {
  uint8_t* input = nullptr;  // [B*T, K]: the input as u8 or bf16
  float* scale = nullptr;    // [B*T]: each row's grid, x = scale * (q - zero)
  int32_t* zero = nullptr;   // [B*T]
  float* out = nullptr;      // [B*T, max_add_N]: results a second pass adds into dst
};
void add_linear_scratch(BufferTable& table, LinearScratch* s, Precision p, int64_t B, int64_t T, int64_t max_K,
                        int64_t max_add_N);

// Where a layer's input is: f32 rows at src, or (int8 only) already quantized into the scratch by
// norm_quantize_step.
enum class LinearInput { F32, Quantized };
// What a layer leaves: f32 rows at dst, or (an int8 layer before another) those
// rows and also their quantization for the next layer's per-row grid in the scratch, made in the same
// sweep (fc1's dequantize + bias + GELU + quantize for fc2); the next layer then takes
// LinearInput::Quantized. can_quantize_for says when.
enum class LinearOutput { F32, Quantized };
bool can_quantize_for(const LinearWeights& lw, const LinearWeights& next);

// dst [B*T, N] = epilogue(src [B*T, K] x W^T + b), rows in images of T rows, the epilogue the layer
// was made with. F32: one matmul, bias and epilogue fused. BF16: src converted to bf16, then the matmul.
// Int8: each row quantized on its own grid, one s32 product over the batch, then one pass applying each
// row's scales, the bias and the epilogue. Never a reference kernel: throws if there is none else.
std::vector<Step> linear_steps(const std::string& name, const LinearWeights& lw, int64_t B, int64_t T,
                               const float* src, float* dst, const LinearScratch& scratch = {},
                               LinearInput in = LinearInput::F32, LinearOutput out = LinearOutput::F32);

// For an int8 layer whose input is LayerNorm(src [B*T, K]): the LayerNorm into h (as oneDNN's, within
// rounding) and its quantization in one sweep, each row quantized on its own range as it is normalized;
// the layer's steps then take LinearInput::Quantized.
Step norm_quantize_step(const std::string& name, const LayerNormWeights& ln, const LinearWeights& lw, int64_t B,
                        int64_t T, const float* src, float* h, const LinearScratch& scratch);

}  // namespace vit

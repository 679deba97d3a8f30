// Loops over one row of floats, for the host passes around the lower-precision matmuls: a row's range,
// u8 quantization, the int8 dequantize with bias and GELU, QuickGELU or residual, LayerNorm, GELU. Compiled for
// SSE2, AVX2 and AVX-512 (rows_impl.h) and picked once by the ISA oneDNN runs with, so that
// ONEDNN_MAX_CPU_ISA caps them too. Every pass but GELU gives the scalar code's answers bit for bit.
#pragma once
#include <cstdint>

namespace vit {

// The activation the dequantize pass applies: none, GELU (erf), or QuickGELU (x * sigmoid(1.702 x), CLIP's).
enum class RowActivation { None, Gelu, QuickGelu, GeluTanh };

struct RowKernels {
  const char* isa;  // "avx512", "avx2", "sse2": for profiles
  // lo, hi = the minimum and maximum of x[0, n), n >= 1.
  void (*range)(const float* x, int64_t n, float* lo, float* hi);
  // q = min(top, max(0, round_even(x / scale) + zero)), as quantize_u8; inv = 1 / scale.
  void (*quantize)(const float* x, int64_t n, float inv, float zero, float top, uint8_t* q);
  // The int8 matmul's s32 sums made real: v = float(acc - zero * colsum) * w_scale * sa + bias (bias may
  // be null); then y = act(v), or y += v (add; act None). GELU and QuickGELU are within 1e-6 relative of
  // their double references.
  void (*dequantize)(const int32_t* acc, int64_t n, int32_t zero, const int32_t* colsum, const float* w_scale,
                     float sa, const float* bias, RowActivation act, bool add, float* y);
  // y += x.
  void (*add)(const float* x, int64_t n, float* y);
  // y = (x - mean) / sqrt(var + eps) * gamma + beta, as oneDNN's layer normalization (biased variance);
  // lo, hi: the range of y (for a quantizer that follows), or null.
  void (*layer_norm)(const float* x, int64_t n, const float* gamma, const float* beta, float eps, float* y, float* lo,
                     float* hi);
  // y = erf(x) and x / 2 * (1 + erf(x / sqrt 2)), within 1e-6 relative of std::erf's.
  void (*erf)(const float* x, int64_t n, float* y);
  void (*gelu)(const float* x, int64_t n, float* y);
};

// How many of the host kernels' builds, widest first (AVX-512, AVX2, SSE2), the ISA oneDNN runs with
// allows: rows.h's and attention.h's pick by it.
int host_isa_builds();

// Of a kernel table's three builds, widest first, the *count that host_isa_builds allows (asked once); the
// widest of them.
template <class Kernels>
const Kernels* const* host_builds(const Kernels* const (&all)[3], int* count) {
  static const int n = host_isa_builds();
  *count = n;
  return all + (3 - n);
}
template <class Kernels>
const Kernels& host_widest(const Kernels* const (&all)[3]) {
  int n = 0;
  return *host_builds(all, &n)[0];
}

// The kernels for the ISA oneDNN runs with (chosen on the first call).
const RowKernels& row_kernels();
// Every variant this CPU can run, widest first (for tests).
const RowKernels* const* all_row_kernels(int* count);

}  // namespace vit

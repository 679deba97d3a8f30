// The RowKernels of rows.h, written once over GCC vectors of ROWS_W floats; rows_sse2.cpp, rows_avx2.cpp
// and rows_avx512.cpp each include it with their own ROWS_NS, ROWS_W and target flags (and
// -ffp-contract=off, so that no multiply-add is fused and every ISA rounds as the scalar code does).
// Nothing from the standard library is used here: an inline function compiled for AVX-512 in this file
// must never become the copy the rest of the program calls.
#include <cstdint>

#include "engine/nn/rows.h"

namespace vit::ROWS_NS {
namespace {

#include "engine/nn/vec_impl.h"

void range(const float* x, int64_t n, float* lo, float* hi) {
  float l = x[0], h = x[0];
  int64_t i = 0;
  if (n >= W) {
    vf vl = ld(x), vh = vl;
    for (i = W; i + W <= n; i += W) {
      const vf v = ld(x + i);
      vl = vmin(vl, v);
      vh = vmax(vh, v);
    }
    l = hmin(vl);
    h = hmax(vh);
  }
  for (; i < n; ++i) {
    l = smin(l, x[i]);
    h = smax(h, x[i]);
  }
  *lo = l;
  *hi = h;
}

inline float quantize1(float x, float inv, float zero, float top) {
  const float r = ((x * inv + kRound) - kRound) + zero;
  return smin(top, smax(0.f, r));
}

void quantize(const float* x, int64_t n, float inv, float zero, float top, uint8_t* q) {
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    const vf r = ((ld(x + i) * bc(inv) + bc(kRound)) - bc(kRound)) + bc(zero);
    const vf c = vmin(bc(top), vmax(bc(0.f), r));
    store_u8(q + i, __builtin_convertvector(c, vi));
  }
  for (; i < n; ++i) q[i] = uint8_t(int32_t(quantize1(x[i], inv, zero, top)));
}

// erf: below |x| = 1 its Taylor series to x^21 (terms alternate and shrink, the last below 2e-8);
// above, Abramowitz and Stegun 7.1.26 (absolute error 1.5e-7, that is under 2e-7 of erf's value there).
inline vf verf_small(vf x) {
  const vf x2 = x * x;
  static constexpr float c[11] = {1.128379167f,     -0.376126389f,   0.1128379167f,    -0.02686617065f,
                                  0.005223977625f,  -8.548327023e-4f, 1.205533298e-4f, -1.492565036e-5f,
                                  1.646211437e-6f,  -1.636584469e-7f, 1.480719282e-8f};
  vf s = bc(c[10]);
  for (int j = 9; j >= 0; --j) s = fma(s, x2, bc(c[j]));
  return s * x;
}

inline vf verf_big(vf x) {
  const vf ax = vmax(x, -x);
  const vf t = bc(1.f) / fma(bc(0.3275911f), ax, bc(1.f));
  vf p = bc(1.061405429f);
  p = fma(p, t, bc(-1.453152027f));
  p = fma(p, t, bc(1.421413741f));
  p = fma(p, t, bc(-0.284496736f));
  p = fma(p, t, bc(0.254829592f));
  const vf e = bc(1.f) - p * t * vexp(-(vmin(ax, bc(9.f)) * vmin(ax, bc(9.f))));
  return x < bc(0.f) ? -e : e;
}

// Each branch is computed only when some lane needs it.
inline vf verf(vf x) {
  const vf ax = vmax(x, -x);
  const vi small = ax < bc(1.f);
  int n_small = 0;
  for (int j = 0; j < W; ++j) n_small -= small[j];
  if (n_small == W) return verf_small(x);
  if (n_small == 0) return verf_big(x);
  return small ? verf_small(x) : verf_big(x);
}

// erf for GELU, whose tolerance is absolute (1e-6 max(1, |x|)): x P(x^2) / Q(x^2) on [-4, 4] (XLA's and
// Eigen's fast erf; past 4, erf is 1 in float), absolute error under 5e-7, one branch for every lane,
// no exp. It costs GELU under 2.5e-7 max(1, |x|) (measured: tests/test_rows.cpp).
inline vf verf_fast(vf x) {
  static constexpr float a[7] = {-2.72614225801306e-10f, 2.77068142495902e-08f, -2.10102402082508e-06f,
                                 -5.69250639462346e-05f, -7.34990630326855e-04f, -2.95459980854025e-03f,
                                 -1.60960333262415e-02f};
  static constexpr float b[5] = {-1.45660718464996e-05f, -2.13374055278905e-04f, -1.68282697438203e-03f,
                                 -7.37332916720468e-03f, -1.42647390514189e-02f};
  x = vmin(bc(4.f), vmax(bc(-4.f), x));
  const vf x2 = x * x;
  vf p = bc(a[0]), q = bc(b[0]);
  for (int j = 1; j < 7; ++j) p = fma(p, x2, bc(a[j]));
  for (int j = 1; j < 5; ++j) q = fma(q, x2, bc(b[j]));
  return x * p / q;
}

inline vf vgelu(vf x) { return bc(0.5f) * x * (bc(1.f) + verf_fast(x * bc(0.70710678f))); }

// x * sigmoid(z), z = 1.702 x, from e = e^-|z| (always within vexp's range): 1 / (1 + e) for z >= 0,
// e / (1 + e) below.
inline vf vquick_gelu(vf x) {
  const vf z = bc(1.702f) * x;
  const vf e = vexp(-vmax(z, -z));
  const vf s = bc(1.f) / (bc(1.f) + e);
  return x * (z < bc(0.f) ? e * s : s);
}

// 0.5 x (1 + tanh(u)), u = sqrt(2 / pi) (x + 0.044715 x^3), is x * sigmoid(2u): as vquick_gelu, with z = 2u.
inline vf vgelu_tanh(vf x) {
  const vf z = bc(1.5957691216f) * (x + bc(0.044715f) * x * x * x);
  const vf e = vexp(-vmax(z, -z));
  const vf s = bc(1.f) / (bc(1.f) + e);
  return x * (z < bc(0.f) ? e * s : s);
}

inline vf activate(vf v, RowActivation act) {
  if (act == RowActivation::Gelu) return vgelu(v);
  if (act == RowActivation::QuickGelu) return vquick_gelu(v);
  if (act == RowActivation::GeluTanh) return vgelu_tanh(v);
  return v;
}

// The tail of a row through the vector code: padded into one vector and back.
template <typename F>
void tail(const float* x, int64_t n, float* y, F f) {
  if (n <= 0) return;
  float in[W] = {}, out[W];
  for (int64_t j = 0; j < n; ++j) in[j] = x[j];
  st(out, f(ld(in)));
  for (int64_t j = 0; j < n; ++j) y[j] = out[j];
}

void erf(const float* x, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + W <= n; i += W) st(y + i, verf(ld(x + i)));
  tail(x + i, n - i, y + i, verf);
}

void gelu(const float* x, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + W <= n; i += W) st(y + i, vgelu(ld(x + i)));
  tail(x + i, n - i, y + i, vgelu);
}

void dequantize(const int32_t* acc, int64_t n, int32_t zero, const int32_t* colsum, const float* w_scale, float sa,
                const float* bias, RowActivation act, bool add, float* y) {
  int64_t i = 0;
  const vi z = vi{} + zero;
  for (; i + W <= n; i += W) {
    vf v = __builtin_convertvector(ldi(acc + i) - z * ldi(colsum + i), vf) * ld(w_scale + i) * bc(sa) +
           (bias ? ld(bias + i) : bc(0.f));
    v = activate(v, act);
    st(y + i, add ? ld(y + i) + v : v);
  }
  for (; i < n; ++i) {
    float v = float(acc[i] - zero * colsum[i]) * w_scale[i] * sa + (bias ? bias[i] : 0.f);
    if (act != RowActivation::None) tail(&v, 1, &v, [act](vf x) { return activate(x, act); });
    y[i] = add ? y[i] + v : v;
  }
}

void add(const float* x, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + W <= n; i += W) st(y + i, ld(y + i) + ld(x + i));
  for (; i < n; ++i) y[i] += x[i];
}

inline float hsum(vf v) { return reduce(v, AddOp{}); }

void layer_norm(const float* x, int64_t n, const float* gamma, const float* beta, float eps, float* y, float* lo,
                float* hi) {
  vf acc = bc(0.f);
  int64_t i = 0;
  for (; i + W <= n; i += W) acc += ld(x + i);
  float sum = hsum(acc);
  for (; i < n; ++i) sum += x[i];
  const float mean = sum / float(n);
  acc = bc(0.f);
  for (i = 0; i + W <= n; i += W) {
    const vf d = ld(x + i) - bc(mean);
    acc += d * d;
  }
  float var = hsum(acc);
  for (; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  const float inv = 1.f / __builtin_sqrtf(var / float(n) + eps);
  vf vl = bc(3.4e38f), vh = bc(-3.4e38f);
  for (i = 0; i + W <= n; i += W) {
    const vf v = (ld(x + i) - bc(mean)) * bc(inv) * ld(gamma + i) + ld(beta + i);
    st(y + i, v);
    vl = vmin(vl, v);
    vh = vmax(vh, v);
  }
  float l = hmin(vl), h = hmax(vh);
  for (; i < n; ++i) {
    y[i] = (x[i] - mean) * inv * gamma[i] + beta[i];
    l = smin(l, y[i]);
    h = smax(h, y[i]);
  }
  if (lo) *lo = l;
  if (hi) *hi = h;
}

}  // namespace

extern const RowKernels kernels;
const RowKernels kernels = {ROWS_NAME, range, quantize, dequantize, add, layer_norm, erf, gelu};

}  // namespace vit::ROWS_NS

// GPTQ rounding of a layer's weights from its inputs' Hessian; see gptq.h. Double precision throughout:
// the Hessian's inverse is ill-conditioned for inputs with a few large channels (LayerNorm outputs).
#include "engine/nn/gptq.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "engine/nn/ops.h"
#include "engine/nn/quantize.h"
#include "vit/error.h"

namespace vit {
namespace {

// In place: the lower Cholesky factor L of a [K, K] (row-major, A = L Lᵀ); the upper triangle is left as is.
void cholesky_lower(std::vector<double>& a, int64_t K) {
  for (int64_t j = 0; j < K; ++j) {
    double* rj = a.data() + j * K;
    double d = 0.0;
#pragma omp simd reduction(+ : d)
    for (int64_t k = 0; k < j; ++k) d += rj[k] * rj[k];
    d = rj[j] - d;
    if (!(d > 0.0)) throw Error("GPTQ: the inputs' Hessian is not positive definite (column " + std::to_string(j) + ")");
    rj[j] = std::sqrt(d);
    parallel_for(K - j - 1, [&](int64_t t) {
      double* ri = a.data() + (j + 1 + t) * K;
      double s = 0.0;
#pragma omp simd reduction(+ : s)
      for (int64_t k = 0; k < j; ++k) s += ri[k] * rj[k];
      ri[j] = (ri[j] - s) / rj[j];
    });
  }
}

// U, upper triangular with Uᵀ U = H⁻¹, for H [K, K] positive definite: L = chol(H), M = L⁻¹, H⁻¹ = Mᵀ M,
// then U = chol(H⁻¹)ᵀ. Rows of the result are U's rows (only j >= i is meaningful).
std::vector<double> inverse_cholesky_upper(std::vector<double> h, int64_t K) {
  cholesky_lower(h, K);
  // Mᵀ row by row: row c of Mᵀ is column c of L⁻¹, from L x = e_c by forward substitution.
  std::vector<double> mt(size_t(K * K), 0.0);
  parallel_for(K, [&](int64_t c) {
    double* x = mt.data() + c * K;
    for (int64_t i = c; i < K; ++i) {
      const double* li = h.data() + i * K;
      double s = 0.0;
#pragma omp simd reduction(+ : s)
      for (int64_t k = c; k < i; ++k) s += li[k] * x[k];
      x[i] = ((i == c ? 1.0 : 0.0) - s) / li[i];
    }
  });
  // H⁻¹[i, j] = sum over k >= max(i, j) of M[k, i] M[k, j] = rows i and j of Mᵀ, dotted.
  std::vector<double> inv(size_t(K * K));
  parallel_for(K, [&](int64_t i) {
    const double* xi = mt.data() + i * K;
    for (int64_t j = 0; j <= i; ++j) {
      const double* xj = mt.data() + j * K;
      double s = 0.0;
#pragma omp simd reduction(+ : s)
      for (int64_t k = i; k < K; ++k) s += xi[k] * xj[k];
      inv[size_t(i * K + j)] = s;
      inv[size_t(j * K + i)] = s;
    }
  });
  cholesky_lower(inv, K);
  std::vector<double> u(size_t(K * K), 0.0);
  for (int64_t i = 0; i < K; ++i)
    for (int64_t j = i; j < K; ++j) u[size_t(i * K + j)] = inv[size_t(j * K + i)];
  return u;
}

}  // namespace

GptqFactor gptq_factor(const double* H, int64_t K) {
  GptqFactor f;
  f.K = K;
  f.perm.resize(size_t(K));
  std::iota(f.perm.begin(), f.perm.end(), 0);
  std::stable_sort(f.perm.begin(), f.perm.end(), [&](int64_t a, int64_t b) { return H[a * K + a] > H[b * K + b]; });
  f.dead.resize(size_t(K));
  std::vector<double> hp(size_t(K * K));
  double mean_diag = 0.0;
  for (int64_t i = 0; i < K; ++i) {
    const int64_t pi = f.perm[size_t(i)];
    f.dead[size_t(i)] = !(H[pi * K + pi] > 0.0);
    for (int64_t j = 0; j < K; ++j) hp[size_t(i * K + j)] = H[pi * K + f.perm[size_t(j)]];
    if (f.dead[size_t(i)]) hp[size_t(i * K + i)] = 1.0;
    mean_diag += hp[size_t(i * K + i)];
  }
  mean_diag /= double(K);
  for (int64_t i = 0; i < K; ++i) hp[size_t(i * K + i)] += 0.01 * mean_diag;
  f.u = inverse_cholesky_upper(std::move(hp), K);
  return f;
}

void gptq_quantize(const float* w, int64_t N, const GptqFactor& f, int qmax, int8_t* q, float* scale) {
  const int64_t K = f.K;
  for (int64_t n = 0; n < N; ++n) scale[n] = channel_scale(w + n * K, K, qmax);
  // Rows are independent given U: each walks its columns in order, rounding one and moving the error.
  parallel_for(N, [&](int64_t n) {
    std::vector<double> row(static_cast<size_t>(K));
    for (int64_t i = 0; i < K; ++i) row[size_t(i)] = f.dead[size_t(i)] ? 0.0 : double(w[n * K + f.perm[size_t(i)]]);
    const double s = scale[n];
    for (int64_t i = 0; i < K; ++i) {
      const double v = std::min(double(qmax), std::max(-double(qmax), std::nearbyint(row[size_t(i)] / s)));
      q[n * K + f.perm[size_t(i)]] = int8_t(v);
      const double* ui = f.u.data() + i * K;
      const double err = (row[size_t(i)] - v * s) / ui[i];
      for (int64_t j = i + 1; j < K; ++j) row[size_t(j)] -= err * ui[j];
    }
  });
}

namespace {
// dst = src · weights, f32, one oneDNN matmul run once.
void f32_product(const dnnl::memory::desc& src_md, const float* src, const dnnl::memory::desc& w_md, const float* w,
                 const dnnl::memory::desc& dst_md, float* dst) {
  using dnnl::memory;
  const dnnl::matmul mm(dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, w_md, dst_md), cpu_engine()));
  mm.execute(cpu_stream(), {{DNNL_ARG_SRC, memory(src_md, cpu_engine(), const_cast<float*>(src))},
                            {DNNL_ARG_WEIGHTS, memory(w_md, cpu_engine(), const_cast<float*>(w))},
                            {DNNL_ARG_DST, memory(dst_md, cpu_engine(), dst)}});
  cpu_stream().wait();
}
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;
}  // namespace

double output_change(const float* w, const int8_t* q, const float* scale, int64_t N, int64_t K, const double* H) {
  std::vector<float> d(size_t(N * K)), h(size_t(K * K)), dh(size_t(N * K));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) d[size_t(n * K + k)] = w[n * K + k] - scale[n] * float(q[n * K + k]);
  for (size_t i = 0; i < h.size(); ++i) h[i] = float(H[i]);
  const dnnl::memory::desc dm({N, K}, dt::f32, tag::ab), hm({K, K}, dt::f32, tag::ab);
  f32_product(dm, d.data(), hm, h.data(), dm, dh.data());
  double total = 0.0;
  for (size_t i = 0; i < d.size(); ++i) total += double(d[i]) * double(dh[i]);
  return total;
}

void add_gram(const float* x, int64_t rows, int64_t K, double* H) {
  std::vector<float> gram(size_t(K * K));
  f32_product(dnnl::memory::desc({K, rows}, dt::f32, tag::ba), x, dnnl::memory::desc({rows, K}, dt::f32, tag::ab), x,
              dnnl::memory::desc({K, K}, dt::f32, tag::ab), gram.data());
  for (size_t i = 0; i < gram.size(); ++i) H[i] += double(gram[i]);
}

}  // namespace vit

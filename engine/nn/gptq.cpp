// GPTQ rounding of a layer's weights from its inputs' Hessian; see gptq.h. Double precision throughout:
// the Hessian's inverse is ill-conditioned for inputs with a few large channels (LayerNorm outputs).
#include "engine/nn/gptq.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "engine/nn/ops.h"
#include "vit/error.h"

namespace vit {
namespace {

// In place: the lower Cholesky factor L of a [K, K] (row-major, A = L Lᵀ); the upper triangle is left as is.
void cholesky_lower(std::vector<double>& a, int64_t K) {
  for (int64_t j = 0; j < K; ++j) {
    double* rj = a.data() + j * K;
    double d = rj[j];
    for (int64_t k = 0; k < j; ++k) d -= rj[k] * rj[k];
    if (!(d > 0.0)) throw Error("GPTQ: the inputs' Hessian is not positive definite (column " + std::to_string(j) + ")");
    rj[j] = std::sqrt(d);
    parallel_for(K - j - 1, [&](int64_t t) {
      double* ri = a.data() + (j + 1 + t) * K;
      double s = ri[j];
      for (int64_t k = 0; k < j; ++k) s -= ri[k] * rj[k];
      ri[j] = s / rj[j];
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
      double s = i == c ? 1.0 : 0.0;
      for (int64_t k = c; k < i; ++k) s -= li[k] * x[k];
      x[i] = s / li[i];
    }
  });
  // H⁻¹[i, j] = sum over k >= max(i, j) of M[k, i] M[k, j] = rows i and j of Mᵀ, dotted.
  std::vector<double> inv(size_t(K * K));
  parallel_for(K, [&](int64_t i) {
    const double* xi = mt.data() + i * K;
    for (int64_t j = 0; j <= i; ++j) {
      const double* xj = mt.data() + j * K;
      double s = 0.0;
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

void gptq_quantize(const float* w, int64_t N, int64_t K, const double* H, int qmax, int8_t* q, float* scale) {
  for (int64_t n = 0; n < N; ++n) {
    float amax = 0.f;
    for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(w[n * K + k]));
    scale[n] = amax > 0.f ? amax / float(qmax) : 1.f;
  }
  std::vector<int64_t> perm(static_cast<size_t>(K));
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return H[a * K + a] > H[b * K + b]; });
  std::vector<char> dead(static_cast<size_t>(K));
  std::vector<double> hp(size_t(K * K));
  double mean_diag = 0.0;
  for (int64_t i = 0; i < K; ++i) {
    dead[size_t(i)] = !(H[perm[i] * K + perm[i]] > 0.0);
    for (int64_t j = 0; j < K; ++j) hp[size_t(i * K + j)] = H[perm[i] * K + perm[j]];
    if (dead[size_t(i)]) hp[size_t(i * K + i)] = 1.0;
    mean_diag += hp[size_t(i * K + i)];
  }
  mean_diag /= double(K);
  for (int64_t i = 0; i < K; ++i) hp[size_t(i * K + i)] += 0.01 * mean_diag;
  const std::vector<double> u = inverse_cholesky_upper(std::move(hp), K);

  // Rows are independent given U: each walks its columns in order, rounding one and moving the error.
  parallel_for(N, [&](int64_t n) {
    std::vector<double> row(static_cast<size_t>(K));
    for (int64_t i = 0; i < K; ++i) row[size_t(i)] = dead[size_t(i)] ? 0.0 : double(w[n * K + perm[i]]);
    const double s = scale[n];
    for (int64_t i = 0; i < K; ++i) {
      const double v = std::min(double(qmax), std::max(-double(qmax), std::nearbyint(row[size_t(i)] / s)));
      q[n * K + perm[i]] = int8_t(v);
      const double* ui = u.data() + i * K;
      const double err = (row[size_t(i)] - v * s) / ui[i];
      for (int64_t j = i + 1; j < K; ++j) row[size_t(j)] -= err * ui[j];
    }
  });
}

void add_gram(const float* x, int64_t rows, int64_t K, double* H) {
  using dnnl::memory;
  using dt = memory::data_type;
  using tag = memory::format_tag;
  const memory::desc xt({K, rows}, dt::f32, tag::ba), xm({rows, K}, dt::f32, tag::ab), g({K, K}, dt::f32, tag::ab);
  std::vector<float> gram(size_t(K * K));
  const dnnl::matmul mm(dnnl::matmul::primitive_desc(dnnl::matmul::desc(xt, xm, g), cpu_engine()));
  void* xp = const_cast<float*>(x);
  mm.execute(cpu_stream(), {{DNNL_ARG_SRC, memory(xt, cpu_engine(), xp)},
                            {DNNL_ARG_WEIGHTS, memory(xm, cpu_engine(), xp)},
                            {DNNL_ARG_DST, memory(g, cpu_engine(), gram.data())}});
  cpu_stream().wait();
  for (size_t i = 0; i < gram.size(); ++i) H[i] += double(gram[i]);
}

}  // namespace vit

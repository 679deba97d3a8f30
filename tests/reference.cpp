// Naive references; see reference.h.
#include "reference.h"

#include <cmath>

namespace vit::test {

std::vector<float> ref_linear(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
                              int64_t M, int64_t K, int64_t N) {
  std::vector<float> y(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = b.empty() ? 0.0 : b[size_t(n)];
      for (int64_t k = 0; k < K; ++k) s += double(x[size_t(m * K + k)]) * w[size_t(n * K + k)];
      y[size_t(m * N + n)] = float(s);
    }
  return y;
}

std::vector<float> ref_layer_norm(const std::vector<float>& x, const std::vector<float>& g, const std::vector<float>& b,
                                  int64_t M, int64_t D, float eps) {
  std::vector<float> y(x.size());
  for (int64_t m = 0; m < M; ++m) {
    double mean = 0, var = 0;
    for (int64_t d = 0; d < D; ++d) mean += x[size_t(m * D + d)];
    mean /= double(D);
    for (int64_t d = 0; d < D; ++d) var += (x[size_t(m * D + d)] - mean) * (x[size_t(m * D + d)] - mean);
    var /= double(D);
    for (int64_t d = 0; d < D; ++d)
      y[size_t(m * D + d)] = float((x[size_t(m * D + d)] - mean) / std::sqrt(var + eps) * g[size_t(d)] + b[size_t(d)]);
  }
  return y;
}

float ref_gelu(float x) { return float(0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)))); }
float ref_quick_gelu(float x) { return float(x / (1.0 + std::exp(-1.702 * double(x)))); }
float ref_gelu_tanh(float x) {
  const double v = x;
  return float(0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v))));
}

void ref_epilogue(std::vector<float>& y, Epilogue ep, const std::vector<float>& start) {
  for (size_t i = 0; i < y.size(); ++i) {
    if (ep == Epilogue::Gelu) y[i] = ref_gelu(y[i]);
    if (ep == Epilogue::QuickGelu) y[i] = ref_quick_gelu(y[i]);
    if (ep == Epilogue::GeluTanh) y[i] = ref_gelu_tanh(y[i]);
    if (ep == Epilogue::AddToDst) y[i] += start[i];
  }
}

std::vector<float> ref_attention(const std::vector<float>& qkv, int64_t B, int64_t T, int64_t H, int64_t Dh,
                                 const std::vector<float>& bias) {
  const int64_t D = H * Dh;
  std::vector<float> out(static_cast<size_t>(B * T * D));
  std::vector<double> p(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        const float* q = &qkv[size_t((b * T + i) * 3 * D + h * Dh)];
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < T; ++j) {
          const float* k = &qkv[size_t((b * T + j) * 3 * D + D + h * Dh)];
          double s = 0;
          for (int64_t d = 0; d < Dh; ++d) s += double(q[d]) * k[d];
          p[size_t(j)] = s / std::sqrt(double(Dh)) + (bias.empty() ? 0.0 : double(bias[size_t((h * T + i) * T + j)]));
          mx = std::max(mx, p[size_t(j)]);
        }
        for (auto& v : p) sum += (v = std::exp(v - mx));
        for (int64_t d = 0; d < Dh; ++d) {
          double s = 0;
          for (int64_t j = 0; j < T; ++j) s += p[size_t(j)] / sum * qkv[size_t((b * T + j) * 3 * D + 2 * D + h * Dh + d)];
          out[size_t((b * T + i) * D + h * Dh + d)] = float(s);
        }
      }
  return out;
}

std::vector<float> ref_vit_forward(const TensorMap& w, const TinySpec& s, const std::vector<float>& images, int64_t B) {
  auto W = [&](const std::string& n) -> const std::vector<float>& { return w.at(n).second; };
  const int64_t D = s.D, P = s.patch, G = s.img / P, N = G * G;
  const int64_t prefix = int64_t(s.class_token) + int64_t(s.dist_token), T = N + prefix;
  std::vector<float> logits;
  for (int64_t b = 0; b < B; ++b) {
    // patch_embed: conv P x P stride P, written as a direct convolution
    std::vector<float> x(static_cast<size_t>(T * D));
    const auto& pw = W("patch_embed.proj.weight");
    const auto& pb = W("patch_embed.proj.bias");
    for (int64_t gy = 0; gy < G; ++gy)
      for (int64_t gx = 0; gx < G; ++gx)
        for (int64_t d = 0; d < D; ++d) {
          double acc = pb[size_t(d)];
          for (int64_t c = 0; c < 3; ++c)
            for (int64_t ky = 0; ky < P; ++ky)
              for (int64_t kx = 0; kx < P; ++kx)
                acc += double(pw[size_t(((d * 3 + c) * P + ky) * P + kx)]) *
                       images[size_t(((b * 3 + c) * s.img + gy * P + ky) * s.img + gx * P + kx)];
          x[size_t((prefix + gy * G + gx) * D + d)] = float(acc);
        }
    const auto& pos = W("pos_embed");
    if (s.no_embed_class)
      for (int64_t i = 0; i < N * D; ++i) x[size_t(prefix * D + i)] += pos[size_t(i)];
    int64_t t = 0;
    if (s.class_token) for (int64_t d = 0; d < D; ++d) x[size_t(t * D + d)] = W("cls_token")[size_t(d)];
    if (s.class_token) ++t;
    if (s.dist_token) for (int64_t d = 0; d < D; ++d) x[size_t(t * D + d)] = W("dist_token")[size_t(d)];
    if (!s.no_embed_class)
      for (int64_t i = 0; i < T * D; ++i) x[size_t(i)] += pos[size_t(i)];
    for (int64_t l = 0; l < s.depth; ++l) {
      const std::string p = "blocks." + std::to_string(l) + ".";
      auto h = ref_layer_norm(x, W(p + "norm1.weight"), W(p + "norm1.bias"), T, D, 1e-6f);
      auto qkv = ref_linear(h, W(p + "attn.qkv.weight"), W(p + "attn.qkv.bias"), T, D, 3 * D);
      auto a = ref_attention(qkv, 1, T, s.heads, D / s.heads);
      auto o = ref_linear(a, W(p + "attn.proj.weight"), W(p + "attn.proj.bias"), T, D, D);
      for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
      h = ref_layer_norm(x, W(p + "norm2.weight"), W(p + "norm2.bias"), T, D, 1e-6f);
      auto f = ref_linear(h, W(p + "mlp.fc1.weight"), W(p + "mlp.fc1.bias"), T, D, s.mlp);
      for (auto& v : f) v = ref_gelu(v);
      o = ref_linear(f, W(p + "mlp.fc2.weight"), W(p + "mlp.fc2.bias"), T, s.mlp, D);
      for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    }
    std::vector<float> pooled(size_t(D), 0.f);
    if (!s.fc_norm) {
      x = ref_layer_norm(x, W("norm.weight"), W("norm.bias"), T, D, 1e-6f);
      std::vector<float> row(x.begin(), x.begin() + D);
      auto y = ref_linear(row, W("head.weight"), W("head.bias"), 1, D, s.classes);
      if (s.dist_token) {
        std::vector<float> row2(x.begin() + D, x.begin() + 2 * D);
        auto y2 = ref_linear(row2, W("head_dist.weight"), W("head_dist.bias"), 1, D, s.classes);
        for (size_t i = 0; i < y.size(); ++i) y[i] = (y[i] + y2[i]) / 2;
      }
      logits.insert(logits.end(), y.begin(), y.end());
      continue;
    }
    for (int64_t t2 = prefix; t2 < T; ++t2)
      for (int64_t d = 0; d < D; ++d) pooled[size_t(d)] += x[size_t(t2 * D + d)] / float(N);
    pooled = ref_layer_norm(pooled, W("fc_norm.weight"), W("fc_norm.bias"), 1, D, 1e-6f);
    auto y = ref_linear(pooled, W("head.weight"), W("head.bias"), 1, D, s.classes);
    logits.insert(logits.end(), y.begin(), y.end());
  }
  return logits;
}

}  // namespace vit::test

// The vectorised host passes (engine/nn/rows.h) against scalar references, every ISA variant this CPU
// runs, on many ViT row widths and odd ones (ncnn style); the fused LayerNorm + quantize against
// LayerNorm then quantize.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/nn/linear.h"
#include "engine/nn/quantize.h"
#include "engine/nn/rows.h"
#include "reference.h"

namespace vit::test {
namespace {

// Widths of ViT rows (D, 3D, M for Tiny, Small, Base; T) and odd ones around the vector lengths.
const int64_t kWidths[] = {1, 3, 7, 8, 15, 16, 17, 31, 64, 96, 192, 197, 384, 576, 768, 1152, 1536, 2304, 3072, 3077};

std::vector<const RowKernels*> variants() {
  int n = 0;
  const RowKernels* const* all = all_row_kernels(&n);
  return {all, all + n};
}

TEST(Rows, RangeAndQuantizeEqualTheScalarCode) {
  std::mt19937 rng(1);
  for (const RowKernels* k : variants())
    for (int64_t n : kWidths) {
      auto x = random_vector(static_cast<size_t>(n), rng, 3.f);
      x[size_t(n / 2)] = 9.5f;  // an outlier, as ViT activations have
      float lo = x[0], hi = x[0];
      for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v);
      float got_lo, got_hi;
      k->range(x.data(), n, &got_lo, &got_hi);
      EXPECT_EQ(got_lo, lo) << k->isa << " n=" << n;
      EXPECT_EQ(got_hi, hi) << k->isa << " n=" << n;
      for (const int top : {255, 127}) {
        const Affine a = activation_affine(lo, hi, top);
        std::vector<uint8_t> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
        quantize_u8(x.data(), n, a, want.data(), top);
        k->quantize(x.data(), n, 1.f / a.scale, float(a.zero), float(top), got.data());
        EXPECT_EQ(got, want) << k->isa << " n=" << n << " top=" << top;
      }
    }
}

TEST(Rows, QuantizeRoundsHalfToEvenAndSaturatesAsTheScalarCode) {
  const Affine a = activation_affine(-1.28f, 1.27f);
  std::vector<float> x = {0.f, -1.28f, 1.27f, 0.005f, 0.015f, 5.f, -5.f, std::nanf(""), 0.025f, -0.005f};
  while (x.size() < 37) x.push_back(0.01f * float(x.size()) - 0.2f + 0.005f);  // ties all along
  std::vector<uint8_t> want(x.size()), got(x.size());
  quantize_u8(x.data(), int64_t(x.size()), a, want.data());
  for (const RowKernels* k : variants()) {
    k->quantize(x.data(), int64_t(x.size()), 1.f / a.scale, float(a.zero), 255.f, got.data());
    EXPECT_EQ(got, want) << k->isa;
  }
}

// v = float(acc - zero * colsum) * w_scale * sa + bias, in the scalar code's order; then GELU, QuickGELU
// or added.
TEST(Rows, DequantizeEqualsTheScalarCodeAndActivationsAreWithinTheirTolerance) {
  std::mt19937 rng(2);
  std::uniform_int_distribution<int32_t> acc_d(-2000000, 2000000), col_d(-5000, 5000);
  for (const RowKernels* k : variants())
    for (int64_t n : kWidths) {
      std::vector<int32_t> acc(static_cast<size_t>(n)), colsum(static_cast<size_t>(n));
      for (auto& v : acc) v = acc_d(rng);
      for (auto& v : colsum) v = col_d(rng);
      const auto w_scale = random_vector(static_cast<size_t>(n), rng, 1e-3f), bias = random_vector(static_cast<size_t>(n), rng),
                 start = random_vector(static_cast<size_t>(n), rng);
      const int32_t zero = 117;
      const float sa = 0.0173f;
      for (int mode = 0; mode < 5; ++mode) {  // write, GELU, add, QuickGELU, GELU's tanh form
        const RowActivation act = mode == 1   ? RowActivation::Gelu
                                  : mode == 3 ? RowActivation::QuickGelu
                                  : mode == 4 ? RowActivation::GeluTanh
                                              : RowActivation::None;
        for (const float* b : {bias.data(), static_cast<const float*>(nullptr)}) {
          std::vector<float> got = start;
          k->dequantize(acc.data(), n, zero, colsum.data(), w_scale.data(), sa, b, act, mode == 2, got.data());
          for (int64_t i = 0; i < n; ++i) {
            const float v = float(acc[size_t(i)] - zero * colsum[size_t(i)]) * w_scale[size_t(i)] * sa +
                            (b ? b[i] : 0.f);
            const size_t j = size_t(i);
            if (mode == 0) ASSERT_EQ(got[j], v) << k->isa << " n=" << n << " i=" << i;
            if (mode == 2) ASSERT_EQ(got[j], start[j] + v) << k->isa << " n=" << n << " i=" << i;
            if (mode == 1)
              ASSERT_NEAR(got[j], ref_gelu(v), 1e-6f * std::max(1.f, std::fabs(v))) << k->isa << " n=" << n << " v=" << v;
            if (mode == 3)
              ASSERT_NEAR(got[j], ref_quick_gelu(v), 1e-6f * std::max(1.f, std::fabs(v)))
                  << k->isa << " n=" << n << " v=" << v;
            if (mode == 4)
              ASSERT_NEAR(got[j], ref_gelu_tanh(v), 1e-6f * std::max(1.f, std::fabs(v)))
                  << k->isa << " n=" << n << " v=" << v;
          }
        }
      }
    }
}

// The products may be read from the very memory the results go to (fc1's s32 sums in its f32 output).
TEST(Rows, DequantizeInPlace) {
  for (const RowKernels* k : variants()) {
    const int64_t n = 197;
    std::vector<int32_t> acc(static_cast<size_t>(n)), colsum(static_cast<size_t>(n), 3);
    for (int64_t i = 0; i < n; ++i) acc[size_t(i)] = int32_t(i * 1000 - 50000);
    std::vector<float> w_scale(static_cast<size_t>(n), 0.01f), want(static_cast<size_t>(n));
    k->dequantize(acc.data(), n, 2, colsum.data(), w_scale.data(), 0.5f, nullptr, RowActivation::Gelu, false,
                  want.data());
    std::vector<float> inplace(static_cast<size_t>(n));
    std::memcpy(inplace.data(), acc.data(), acc.size() * sizeof(int32_t));
    k->dequantize(reinterpret_cast<const int32_t*>(inplace.data()), n, 2, colsum.data(), w_scale.data(), 0.5f, nullptr,
                  RowActivation::Gelu, false, inplace.data());
    EXPECT_EQ(inplace, want) << k->isa;
  }
}

// erf within 1e-6 relative of std::erf over the range GELU meets in ViTs (|x / sqrt 2| up to about 10),
// densest near 0 where a relative error is hardest to keep; GELU within 1e-6 of a double reference.
TEST(Rows, ErfAndGeluAgainstTheLibrary) {
  std::vector<float> x;
  for (float v = 1e-8f; v < 12.f; v *= 1.0007f) {
    x.push_back(v);
    x.push_back(-v);
  }
  x.push_back(0.f);
  std::vector<float> e(x.size()), g(x.size());
  for (const RowKernels* k : variants()) {
    k->erf(x.data(), int64_t(x.size()), e.data());
    k->gelu(x.data(), int64_t(x.size()), g.data());
    double worst_erf = 0, worst_gelu = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = std::erf(double(x[i]));
      if (want != 0) worst_erf = std::max(worst_erf, std::fabs(e[i] - want) / std::fabs(want));
      else EXPECT_EQ(e[i], 0.f);
      const double gw = 0.5 * double(x[i]) * (1 + std::erf(double(x[i]) / std::sqrt(2.0)));
      worst_gelu = std::max(worst_gelu, std::fabs(g[i] - gw) / std::max(1.0, std::fabs(double(x[i]))));
    }
    EXPECT_LE(worst_erf, 1e-6) << k->isa;
    EXPECT_LE(worst_gelu, 1e-6) << k->isa;
    std::printf("%s: erf's largest relative error %.3g, GELU's %.3g\n", k->isa, worst_erf, worst_gelu);
  }
}

TEST(Rows, AddAndLayerNorm) {
  std::mt19937 rng(3);
  for (const RowKernels* k : variants())
    for (int64_t n : kWidths) {
      const auto x = random_vector(static_cast<size_t>(n), rng, 4.f), gamma = random_vector(static_cast<size_t>(n), rng),
                 beta = random_vector(static_cast<size_t>(n), rng);
      std::vector<float> y = gamma, want = gamma;
      k->add(x.data(), n, y.data());
      for (size_t i = 0; i < want.size(); ++i) want[i] += x[i];
      EXPECT_EQ(y, want) << k->isa << " n=" << n;
      float lo, hi;
      k->layer_norm(x.data(), n, gamma.data(), beta.data(), 1e-6f, y.data(), &lo, &hi);
      double mean = 0, var = 0;
      for (float v : x) mean += v;
      mean /= double(n);
      for (float v : x) var += (v - mean) * (v - mean);
      var /= double(n);
      float l = y[0], h = y[0];
      for (int64_t i = 0; i < n; ++i) {
        const double r = (x[size_t(i)] - mean) / std::sqrt(var + 1e-6) * gamma[size_t(i)] + beta[size_t(i)];
        ASSERT_NEAR(y[size_t(i)], r, 1e-5 * std::max(1.0, std::fabs(r))) << k->isa << " n=" << n << " i=" << i;
        l = std::min(l, y[size_t(i)]);
        h = std::max(h, y[size_t(i)]);
      }
      EXPECT_EQ(lo, l);
      EXPECT_EQ(hi, h);
    }
}

struct NormCase {
  int64_t B, T, D, N;
};

// LayerNorm and the int8 layer's quantization in one step give what LayerNorm, then the layer on its
// f32 output, gives: bit for bit, on whichever int8 path this CPU takes; h is oneDNN's LayerNorm
// within rounding.
TEST(Rows, FusedLayerNormQuantizeEqualsLayerNormThenQuantize) {
  for (const NormCase c : {NormCase{1, 197, 192, 576}, NormCase{2, 197, 192, 768}, NormCase{3, 50, 64, 96},
                           NormCase{2, 197, 768, 2304}, NormCase{1, 13, 7, 5}}) {
    std::mt19937 rng(uint32_t(c.D * 7 + c.N));
    const auto x = random_vector(size_t(c.B * c.T * c.D), rng, 3.f), w = random_vector(size_t(c.N * c.D), rng, 0.1f),
               b = random_vector(size_t(c.N), rng), gamma = random_vector(size_t(c.D), rng),
               beta = random_vector(size_t(c.D), rng);
    Arena store;
    const LayerNormWeights ln = make_layer_norm(store, gamma.data(), beta.data(), c.D, 1e-6f);
    const LinearWeights lw = make_linear(store, w.data(), b.data(), c.D, c.N, c.T, Epilogue::Gelu, Precision::Int8);
    LinearScratch s;
    BufferTable t;
    add_linear_scratch(t, &s, Precision::Int8, c.B, c.T, c.D, c.N);
    const Arena scratch = t.carve();
    const int64_t M = c.B * c.T;
    std::vector<float> h(size_t(M * c.D)), fused(size_t(M * c.N)), apart(size_t(M * c.N)), h_onednn(h.size());
    Program p;
    p.add(norm_quantize_step("norm", ln, lw, c.B, c.T, x.data(), h.data(), s));
    for (Step& st : linear_steps("fc", lw, c.B, c.T, h.data(), fused.data(), s, LinearInput::Quantized)) p.add(std::move(st));
    p.run();
    std::vector<float> h_rows(h.size());
    for (int64_t r = 0; r < M; ++r)
      row_kernels().layer_norm(x.data() + r * c.D, c.D, gamma.data(), beta.data(), 1e-6f, h_rows.data() + r * c.D,
                               nullptr, nullptr);
    EXPECT_EQ(h, h_rows);
    Program q;
    for (Step& st : linear_steps("fc", lw, c.B, c.T, h_rows.data(), apart.data(), s)) q.add(std::move(st));
    q.add(layer_norm_step("norm", ln, M, x.data(), h_onednn.data()));
    q.run();
    EXPECT_EQ(fused, apart) << c.D << "x" << c.N;
    EXPECT_LT(max_abs_diff(h, h_onednn), 2e-5f) << c.D;
  }
}

// fc1 whose pass after the product also quantizes its rows for fc2 (int8's per-row grid) gives what fc1,
// then fc2 quantizing fc1's f32 output, gives: bit for bit, fc1's f32 output included, at the token counts of
// 224, 384 and 512 px images.
TEST(Rows, Fc1QuantizingForFc2EqualsFc2QuantizingItsInput) {
  const int64_t B = 2, D = 192, M = 768;
  std::mt19937 rng(9);
  const auto w1 = random_vector(size_t(M * D), rng, 0.1f), b1 = random_vector(size_t(M), rng),
             w2 = random_vector(size_t(D * M), rng, 0.05f), b2 = random_vector(size_t(D), rng);
  for (const int64_t T : {197, 577, 1025}) {
    const auto x = random_vector(size_t(B * T * D), rng, 2.f), start = random_vector(size_t(B * T * D), rng);
    Arena store;
    const LinearWeights fc1 = make_linear(store, w1.data(), b1.data(), D, M, T, Epilogue::Gelu, Precision::Int8);
    const LinearWeights fc2 = make_linear(store, w2.data(), b2.data(), M, D, T, Epilogue::AddToDst, Precision::Int8);
    if (!can_quantize_for(fc1, fc2))
      GTEST_SKIP() << "this CPU (" << cpu_isa().name << ") runs int8 fused per image, on per-image grids: nothing to fuse";
    LinearScratch s;
    BufferTable t;
    add_linear_scratch(t, &s, Precision::Int8, B, T, M, D);
    const Arena scratch = t.carve();
    std::vector<float> h1(size_t(B * T * M)), h2(h1.size()), y1 = start, y2 = start;
    Program fused, apart;
    for (Step& st : linear_steps("fc1", fc1, B, T, x.data(), h1.data(), s, LinearInput::F32, LinearOutput::Quantized))
      fused.add(std::move(st));
    for (Step& st : linear_steps("fc2", fc2, B, T, h1.data(), y1.data(), s, LinearInput::Quantized)) fused.add(std::move(st));
    fused.run();
    for (Step& st : linear_steps("fc1", fc1, B, T, x.data(), h2.data(), s)) apart.add(std::move(st));
    for (Step& st : linear_steps("fc2", fc2, B, T, h2.data(), y2.data(), s)) apart.add(std::move(st));
    apart.run();
    EXPECT_EQ(h1, h2) << "T=" << T;
    EXPECT_EQ(y1, y2) << "T=" << T;
  }
}

}  // namespace
}  // namespace vit::test

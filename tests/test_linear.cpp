// The lower-precision linear layers and their quantizers against naive references: int8 on ViT shapes
// (exactly, on inputs and weights the int8 grids represent; within its rounding on random data), bf16
// where the CPU has it (refused with a message naming the instruction set where it has not), and the
// quantizer's rounding and saturation.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/nn/gptq.h"
#include "engine/nn/linear.h"
#include "engine/nn/quantize.h"
#include "reference.h"

namespace vit::test {
namespace {

TEST(Quantize, WeightsRoundHalfToEvenAndSaturate) {
  // Row 0: max 2 -> scale 2/4 = 0.5; 0.25 / 0.5 = 0.5 -> 0 (even), 0.75 / 0.5 = 1.5 -> 2, -1.25 -> -2.5 -> -2.
  const float w[2 * 4] = {2.f, 0.25f, 0.75f, -1.25f, 0.f, 0.f, 0.f, 0.f};
  int8_t q[8];
  float scale[2];
  quantize_weights(w, 2, 4, 4, q, scale);
  EXPECT_EQ(scale[0], 0.5f);
  EXPECT_EQ(q[0], 4);
  EXPECT_EQ(q[1], 0);
  EXPECT_EQ(q[2], 2);
  EXPECT_EQ(q[3], -2);
  EXPECT_EQ(scale[1], 1.f);  // a row of zeros
  for (int k = 4; k < 8; ++k) EXPECT_EQ(q[k], 0);
  const float nan_row[2] = {std::nanf(""), 1.f};  // a hostile checkpoint: no undefined behaviour
  quantize_weights(nan_row, 1, 2, 127, q, scale);
  EXPECT_EQ(q[1], 127);
}

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Σ_n δ_nᵀ H δ_n for δ = w - scale·q: what rounding does to the layer's outputs on the Hessian's inputs.
double rounding_error(const std::vector<float>& w, const std::vector<int8_t>& q, const std::vector<float>& scale,
                      int64_t N, int64_t K, const std::vector<double>& H) {
  double total = 0.0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < K; ++i)
      for (int64_t j = 0; j < K; ++j)
        total += (w[size_t(n * K + i)] - double(scale[size_t(n)]) * q[size_t(n * K + i)]) * H[size_t(i * K + j)] *
                 (w[size_t(n * K + j)] - double(scale[size_t(n)]) * q[size_t(n * K + j)]);
  return total;
}

TEST(Gptq, AddGramIsXTransposeX) {
  const int64_t rows = 37, K = 19;
  const std::vector<float> x = random_values(size_t(rows * K), 3);
  std::vector<double> H(size_t(K * K), 1.0);  // added to, not overwritten
  add_gram(x.data(), rows, K, H.data());
  for (int64_t i = 0; i < K; ++i)
    for (int64_t j = 0; j < K; ++j) {
      double want = 1.0;
      for (int64_t r = 0; r < rows; ++r) want += double(x[size_t(r * K + i)]) * x[size_t(r * K + j)];
      EXPECT_NEAR(H[size_t(i * K + j)], want, 1e-4 * std::max(1.0, std::fabs(want))) << i << "," << j;
    }
}

// w [N, K] rounded to int8 on the grid +-qmax two ways: by GPTQ for the inputs' Gram matrix H [K, K], and to
// nearest (quantize_weights); each its weights and its per-row scales.
struct TwoRoundings {
  std::vector<int8_t> q;
  std::vector<float> s;
  std::vector<int8_t> q_rtn;
  std::vector<float> s_rtn;
};
TwoRoundings gptq_and_nearest(const std::vector<float>& w, int64_t N, int64_t K, const std::vector<double>& H, int qmax) {
  TwoRoundings r{std::vector<int8_t>(size_t(N * K)), std::vector<float>(size_t(N)), std::vector<int8_t>(size_t(N * K)),
                 std::vector<float>(size_t(N))};
  gptq_quantize(w.data(), N, gptq_factor(H.data(), K), qmax, r.q.data(), r.s.data());
  quantize_weights(w.data(), N, K, qmax, r.q_rtn.data(), r.s_rtn.data());
  return r;
}

// With uncorrelated inputs of equal variance there is no better rounding than to nearest: GPTQ gives
// quantize_weights' answer exactly.
TEST(Gptq, UncorrelatedInputsRoundToNearest) {
  const int64_t N = 12, K = 40;
  const std::vector<float> w = random_values(size_t(N * K), 5);
  std::vector<double> H(size_t(K * K), 0.0);
  for (int64_t k = 0; k < K; ++k) H[size_t(k * K + k)] = 3.0;
  for (int qmax : {127, 64}) {
    const auto [q, s, q_rtn, s_rtn] = gptq_and_nearest(w, N, K, H, qmax);
    EXPECT_EQ(q, q_rtn) << qmax;
    EXPECT_EQ(s, s_rtn) << qmax;
  }
}

// Correlated inputs (x = A z, some channels large, as LayerNorm outputs have): GPTQ's rounding moves the
// outputs on those inputs less than rounding to nearest, on the same grid, within ±qmax; an input that
// is always zero gets zero weights.
TEST(Gptq, CorrelatedInputsMoveTheOutputsLessThanRoundingToNearest) {
  const int64_t N = 24, K = 48, rows = 400;
  const std::vector<float> w = random_values(size_t(N * K), 7), z = random_values(size_t(rows * K), 8),
                           a = random_values(size_t(K * K), 9);
  std::vector<float> x(size_t(rows * K), 0.f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < K - 1; ++i) {  // channel K-1 stays zero
      float v = 0.f;
      for (int64_t j = 0; j < K; ++j) v += a[size_t(i * K + j)] * z[size_t(r * K + j)];
      x[size_t(r * K + i)] = v * (i % 7 == 0 ? 8.f : 1.f);
    }
  std::vector<double> H(size_t(K * K), 0.0);
  add_gram(x.data(), rows, K, H.data());
  for (int qmax : {127, 64}) {
    const auto [q, s, q_rtn, s_rtn] = gptq_and_nearest(w, N, K, H, qmax);
    EXPECT_EQ(s, s_rtn) << qmax;
    for (int64_t n = 0; n < N; ++n) EXPECT_EQ(q[size_t(n * K + K - 1)], 0) << qmax;
    for (int8_t v : q) EXPECT_LE(std::abs(int(v)), qmax);
    const double gptq = rounding_error(w, q, s, N, K, H), rtn = rounding_error(w, q_rtn, s_rtn, N, K, H);
    EXPECT_LT(gptq, 0.8 * rtn) << qmax;
    EXPECT_NEAR(output_change(w.data(), q.data(), s.data(), N, K, H.data()), gptq, 1e-3 * gptq) << qmax;
  }
}

TEST(Quantize, ActivationGridHoldsZeroAndSaturates) {
  const Affine a = activation_affine(-1.28f, 1.27f);
  EXPECT_FLOAT_EQ(a.scale, 0.01f);
  EXPECT_EQ(a.zero, 128);
  const float x[6] = {0.f, -1.28f, 1.27f, 0.005f, 0.015f, 5.f};
  uint8_t q[6];
  quantize_u8(x, 6, a, q);
  EXPECT_EQ(q[0], 128);  // zero exactly
  EXPECT_EQ(q[1], 0);
  EXPECT_EQ(q[2], 255);
  EXPECT_EQ(q[3], 128);  // 0.5 rounds to even
  EXPECT_EQ(q[4], 130);  // 1.5 rounds to even
  EXPECT_EQ(q[5], 255);  // saturates
  EXPECT_EQ(activation_affine(0.5f, 2.f).zero, 0);  // the grid always reaches down to 0
  EXPECT_EQ(activation_affine(0.f, 0.f).scale, 1.f);
  const float bad[2] = {std::nanf(""), -std::nanf("")};
  quantize_u8(bad, 2, a, q);  // no undefined behaviour
  // The 7-bit grid (0..127) of a CPU without VNNI whose weights keep 8 bits.
  const Affine a7 = activation_affine(-0.64f, 0.63f, 127);
  EXPECT_FLOAT_EQ(a7.scale, 0.01f);
  EXPECT_EQ(a7.zero, 64);
  quantize_u8(x, 6, a7, q, 127);
  EXPECT_EQ(q[0], 64);
  EXPECT_EQ(q[2], 127);  // 1.27 saturates at the top
  EXPECT_EQ(q[5], 127);
}

struct Case {
  int64_t B, T, K, N;
  Epilogue ep;
};

std::string case_name(const ::testing::TestParamInfo<Case>& i) {
  const char* ep[] = {"none", "gelu", "quickgelu", "gelutanh", "residual"};
  return std::to_string(i.param.B) + "x" + std::to_string(i.param.T) + "x" + std::to_string(i.param.K) + "x" +
         std::to_string(i.param.N) + "_" + ep[int(i.param.ep)];
}

// The naive result, epilogue applied (AddToDst: onto `start`).
std::vector<float> naive(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
                         const Case& c, const std::vector<float>& start) {
  auto y = ref_linear(x, w, b, c.B * c.T, c.K, c.N);
  ref_epilogue(y, c.ep, start);
  return y;
}

std::vector<float> run_linear(Precision p, const std::vector<float>& x, const std::vector<float>& w,
                              const std::vector<float>& b, const Case& c, std::vector<float> y,
                              LinearForm form = LinearForm::Auto, LinearForm* chosen = nullptr,
                              Int8Split split = Int8Split::SevenBitWeights) {
  Arena store;
  const LinearWeights lw = make_linear(store, w.data(), b.data(), c.K, c.N, c.T, c.ep, p, WeightLayout::Auto, form, split);
  if (chosen) *chosen = lw.form;
  LinearScratch s;
  BufferTable t;
  add_linear_scratch(t, &s, p, c.B, c.T, c.K, c.N);
  const Arena scratch_memory = t.carve();
  Program prog;
  for (Step& st : linear_steps("t", lw, c.B, c.T, x.data(), y.data(), s)) prog.add(std::move(st));
  prog.run();
  return y;
}

class Int8Linear : public ::testing::TestWithParam<Case> {};

const Int8Split kSplits[] = {Int8Split::SevenBitWeights, Int8Split::SevenBitInputs};

// Inputs on an exact u8 grid in every row (each row spans the grid's whole range in steps of 0.01: -1.28 to 1.27
// on 0..255) and weights on an exact int8 grid per output channel: the int8 layer must give the f32 answer, on
// either split of the bits.
TEST_P(Int8Linear, ExactOnRepresentableValues) {
  for (const Int8Split split : kSplits) {
    const Case c = GetParam();
    const Int8Grid grid = int8_grid(split);
    const int qmax = grid.weight_max, top = grid.input_max;
    std::mt19937 rng(uint32_t(c.K * 31 + c.N));
    std::uniform_int_distribution<int> xq(0, top), wq(-qmax, qmax);
    std::vector<float> x(size_t(c.B * c.T * c.K)), w(size_t(c.N * c.K));
    for (int64_t r = 0; r < c.B * c.T; ++r)
      for (int64_t k = 0; k < c.K; ++k)
        x[size_t(r * c.K + k)] = 0.01f * float((k == 0 ? 0 : k == 1 ? top : xq(rng)) - (top + 1) / 2);
    for (int64_t n = 0; n < c.N; ++n) {
      const float s = 0.001f * float(1 + n % 7);
      for (int64_t k = 0; k < c.K; ++k) w[size_t(n * c.K + k)] = s * float(k == 0 ? qmax : wq(rng));
    }
    const auto b = random_vector(size_t(c.N), rng), start = random_vector(size_t(c.B * c.T * c.N), rng);
    const auto want = naive(x, w, b, c, start);
    const auto got = run_linear(Precision::Int8, x, w, b, c, c.ep == Epilogue::AddToDst ? start : std::vector<float>(want.size(), -7.f),
                                LinearForm::Auto, nullptr, split);
    float mag = 0;
    for (float v : want) mag = std::max(mag, std::fabs(v));
    EXPECT_LT(max_abs_diff(got, want), 2e-5f * std::max(1.f, mag)) << "weights to " << qmax << ", inputs to " << top;
  }
}

// Random data: the error stays within what the two grids' rounding allows.
TEST_P(Int8Linear, WithinRoundingOnRandomValues) {
  for (const Int8Split split : kSplits) {
    const Case c = GetParam();
    const Int8Grid grid = int8_grid(split);
    std::mt19937 rng(uint32_t(c.K * 17 + c.N));
    const auto x = random_vector(size_t(c.B * c.T * c.K), rng, 2.f), w = random_vector(size_t(c.N * c.K), rng, 0.1f),
               b = random_vector(size_t(c.N), rng), start = random_vector(size_t(c.B * c.T * c.N), rng);
    const auto want = naive(x, w, b, c, start);
    const auto got = run_linear(Precision::Int8, x, w, b, c, c.ep == Epilogue::AddToDst ? start : std::vector<float>(want.size(), 0.f),
                                LinearForm::Auto, nullptr, split);
    // Each product is off by at most half a step of the input's grid times |w|, plus half a step of the
    // weight's grid times |x|; random signs add like sqrt(K), 4 of those is far beyond chance.
    float xmax = 0, wmax = 0;
    for (float v : x) xmax = std::max(xmax, std::fabs(v));
    for (float v : w) wmax = std::max(wmax, std::fabs(v));
    const float per_term = 0.5f * (2 * xmax / float(grid.input_max)) * wmax + 0.5f * (wmax / float(grid.weight_max)) * xmax;
    EXPECT_LT(max_abs_diff(got, want), 4.f * std::sqrt(float(c.K)) * per_term) << "weights to " << grid.weight_max;
  }
}

// ViT shapes (DeiT-Tiny's four layers, ViT-B's qkv) and odd ones.
const Case kShapes[] = {Case{1, 197, 192, 576, Epilogue::None},     Case{2, 197, 192, 768, Epilogue::Gelu},
                        Case{2, 197, 768, 192, Epilogue::AddToDst}, Case{1, 197, 192, 192, Epilogue::AddToDst},
                        Case{3, 50, 64, 96, Epilogue::Gelu},        Case{1, 197, 768, 2304, Epilogue::None},
                        Case{2, 13, 7, 5, Epilogue::AddToDst},      Case{2, 197, 192, 768, Epilogue::QuickGelu},
                        Case{2, 196, 64, 256, Epilogue::GeluTanh}};

INSTANTIATE_TEST_SUITE_P(VitShapes, Int8Linear, ::testing::ValuesIn(kShapes), case_name);

class LinearForms : public ::testing::TestWithParam<Case> {};

// A layer gives the same answers as a matmul and as a 1x1 convolution, whichever form its rules pick:
// int8's batched path bit for bit (exact s32 sums, one dequantize pass); f32 within its rounding. Where
// a form cannot be had (bf16, int8's fused paths; a convolution oneDNN only has a reference kernel for)
// the layer runs as a matmul.
TEST_P(LinearForms, SameAnswersWhicheverFormWins) {
  const Case c = GetParam();
  std::mt19937 rng(uint32_t(c.K * 5 + c.N));
  const auto x = random_vector(size_t(c.B * c.T * c.K), rng, 2.f), w = random_vector(size_t(c.N * c.K), rng, 0.1f),
             b = random_vector(size_t(c.N), rng), start = random_vector(size_t(c.B * c.T * c.N), rng);
  const auto y0 = c.ep == Epilogue::AddToDst ? start : std::vector<float>(start.size(), -7.f);
  for (Precision p : {Precision::F32, Precision::Int8}) {
    LinearForm as_matmul, as_conv;
    const auto m = run_linear(p, x, w, b, c, y0, LinearForm::Matmul, &as_matmul);
    const auto v = run_linear(p, x, w, b, c, y0, LinearForm::Conv1x1, &as_conv);
    const auto a = run_linear(p, x, w, b, c, y0);
    EXPECT_EQ(as_matmul, LinearForm::Matmul);
    std::printf("%s %s: as asked for a convolution, runs as %s\n", precision_name(p), case_name({c, 0}).c_str(),
                form_name(as_conv));
    if (p == Precision::Int8) {
      EXPECT_EQ(m, v);
      EXPECT_EQ(a, m);
    } else {
      const auto want = naive(x, w, b, c, start);
      EXPECT_LT(max_abs_diff(m, want), 2e-4f * std::sqrt(float(c.K)));
      EXPECT_LT(max_abs_diff(v, want), 2e-4f * std::sqrt(float(c.K)));
      EXPECT_LT(max_abs_diff(a, want), 2e-4f * std::sqrt(float(c.K)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(VitShapes, LinearForms, ::testing::ValuesIn(kShapes), case_name);

TEST(Bf16Linear, MatchesTheReferenceOrIsRefusedByName) {
  const Case c{2, 197, 192, 768, Epilogue::Gelu};
  std::mt19937 rng(3);
  const auto x = random_vector(size_t(c.B * c.T * c.K), rng), w = random_vector(size_t(c.N * c.K), rng, 0.1f),
             b = random_vector(size_t(c.N), rng);
  if (!cpu_isa().bf16) {
    Arena store;
    expect_error([&] { make_linear(store, w.data(), b.data(), c.K, c.N, c.T, c.ep, Precision::BF16); },
                 "bf16 needs a CPU with avx512_bf16 or AMX; oneDNN runs this one as " + cpu_isa().name);
    GTEST_SKIP() << "this CPU runs as " << cpu_isa().name << ", without bf16: only the refusal was checked";
  }
  const auto want = naive(x, w, b, c, {});
  const auto got = run_linear(Precision::BF16, x, w, b, c, std::vector<float>(want.size(), 0.f));
  // bf16 keeps 8 significant bits of inputs and weights: relative error about 2^-8 per product.
  EXPECT_LT(max_abs_diff(got, want), 4.f * std::sqrt(float(c.K)) * 0.1f * 1.f / 128.f);
}

}  // namespace
}  // namespace vit::test

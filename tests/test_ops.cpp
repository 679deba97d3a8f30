// Each oneDNN op against the naive reference on seeded random data, ViT shapes (T = 197, 577) and odd ones.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/nn/attention.h"
#include "engine/nn/linear.h"
#include "engine/nn/ops.h"
#include "reference.h"

namespace vit::test {
namespace {

void run_step(Step& s) {
  Program p;
  p.add(std::move(s));
  p.run();
}

// Test names for suites run once per precision of the products (bf16 and int8 skip where the CPU lacks them).
std::string product_name(const ::testing::TestParamInfo<Precision>& info) {
  return info.param == Precision::F32 ? "F32" : info.param == Precision::BF16 ? "Bf16WhereTheCpuHasIt" : "Int8WhereTheCpuHasIt";
}

struct LinearCase {
  int64_t M, K, N;
  WeightLayout layout;
  Epilogue ep;
};

class LinearTest : public ::testing::TestWithParam<LinearCase> {};

TEST_P(LinearTest, MatchesReference) {
  const auto c = GetParam();
  std::mt19937 rng(uint32_t(c.M * 7 + c.K * 13 + c.N));
  const auto x = random_vector(size_t(c.M * c.K), rng), w = random_vector(size_t(c.N * c.K), rng, 0.1f),
             b = random_vector(size_t(c.N), rng);
  auto resid = random_vector(size_t(c.M * c.N), rng);
  auto want = ref_linear(x, w, b, c.M, c.K, c.N);
  ref_epilogue(want, c.ep, resid);
  Arena store;
  const LinearWeights lw = make_linear(store, w.data(), b.data(), c.K, c.N, c.M, c.ep, Precision::F32, c.layout);
  std::vector<float> y = c.ep == Epilogue::AddToDst ? resid : std::vector<float>(size_t(c.M * c.N), -7.f);
  Program p;
  for (Step& s : linear_steps("t", lw, 1, c.M, x.data(), y.data())) p.add(std::move(s));
  p.run();
  EXPECT_LT(max_abs_diff(y.data(), want.data(), want.size()), 2e-4f * std::sqrt(float(c.K)));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, LinearTest,
    ::testing::Values(LinearCase{197, 192, 576, WeightLayout::NK, Epilogue::None},
                      LinearCase{197, 192, 576, WeightLayout::Blocked, Epilogue::None},
                      LinearCase{197, 192, 768, WeightLayout::NK, Epilogue::Gelu},
                      LinearCase{197, 768, 192, WeightLayout::Blocked, Epilogue::AddToDst},
                      LinearCase{394, 192, 192, WeightLayout::NK, Epilogue::AddToDst},
                      LinearCase{577, 64, 96, WeightLayout::Blocked, Epilogue::Gelu},
                      LinearCase{197, 192, 768, WeightLayout::NK, Epilogue::QuickGelu},
                      LinearCase{257, 64, 256, WeightLayout::Blocked, Epilogue::QuickGelu},
                      LinearCase{196, 64, 256, WeightLayout::NK, Epilogue::GeluTanh},
                      LinearCase{1, 192, 1000, WeightLayout::NK, Epilogue::None},
                      LinearCase{13, 7, 5, WeightLayout::Blocked, Epilogue::None}));

class LayerNormTest : public ::testing::TestWithParam<std::pair<int64_t, int64_t>> {};

TEST_P(LayerNormTest, MatchesReference) {
  const auto [M, D] = GetParam();
  std::mt19937 rng(uint32_t(M + D));
  const auto x = random_vector(size_t(M * D), rng, 3.f, 1.f), g = random_vector(size_t(D), rng, 0.5f, 1.f),
             b = random_vector(size_t(D), rng);
  const auto want = ref_layer_norm(x, g, b, M, D, 1e-6f);
  Arena store;
  const LayerNormWeights ln = make_layer_norm(store, g.data(), b.data(), D, 1e-6f);
  std::vector<float> y(x.size());
  Step s = layer_norm_step("ln", ln, M, x.data(), y.data());
  run_step(s);
  EXPECT_LT(max_abs_diff(y.data(), want.data(), want.size()), 1e-4f);
}

INSTANTIATE_TEST_SUITE_P(Shapes, LayerNormTest,
                         ::testing::Values(std::make_pair(197, 192), std::make_pair(1576, 768), std::make_pair(3, 5),
                                           std::make_pair(577, 384)));

struct AttnCase {
  int64_t B, T, H, Dh;
};
class AttentionTest : public ::testing::TestWithParam<AttnCase> {};

TEST_P(AttentionTest, MatchesReference) {
  const auto c = GetParam();
  const int64_t D = c.H * c.Dh;
  std::mt19937 rng(uint32_t(c.B * 1000 + c.T));
  const auto qkv = random_vector(size_t(c.B * c.T * 3 * D), rng);
  const auto want = ref_attention(qkv, c.B, c.T, c.H, c.Dh);
  std::vector<float> heads(size_t(attention_scratch_floats(c.B, c.T, c.H, c.Dh))), out(size_t(c.B * c.T * D), -3.f);
  Program p;
  for (Step& s : attention_steps("attn", c.B, c.T, c.H, c.Dh, qkv.data(), heads.data(), nullptr, out.data()))
    p.add(std::move(s));
  p.run();
  EXPECT_LT(max_abs_diff(out.data(), want.data(), want.size()), 1e-4f);
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionTest,
                         ::testing::Values(AttnCase{1, 197, 3, 64}, AttnCase{2, 197, 12, 64}, AttnCase{1, 577, 3, 64},
                                           AttnCase{3, 17, 2, 16}, AttnCase{2, 50, 4, 8}));

// One (image, head) through a kernel: random qkv rows (stride ld, a gap after v), a bias on the scores, the
// packed buffers prefilled with 9 and the output rows with -7 past the head (Dh + 3 wide), the softmax written out.
// The bias and softmax rows are T + gap apart (an image's T tokens in a batch padded to T + gap), the softmax
// rows' gap prefilled with -5.
struct KernelRun {
  int64_t T, Dh, rows, ld, ldp;
  float scale;
  std::vector<float> qkv, bias, probs, out;
  KernelRun(const AttentionKernels& kernels, int64_t T_, int64_t Dh_, int64_t rows_, int64_t gap = 0)
      : T(T_), Dh(Dh_), rows(rows_), ld(3 * Dh_ + 5), ldp(T_ + gap), scale(1.f / std::sqrt(float(Dh_))) {
    std::mt19937 rng(uint32_t(T * 31 + Dh));
    const int64_t Tp = (T + 15) / 16 * 16, Dhp = (Dh + 15) / 16 * 16;
    qkv = random_vector(size_t(T * ld), rng, 2.f);
    bias = random_vector(size_t(rows * ldp), rng);
    std::vector<float> kt(size_t(attention_kt_floats(Dh, Tp)), 9.f), vp(size_t(attention_vp_floats(T, Tp, Dhp)), 9.f),
        work(size_t(kAttendWorkRows * (Tp + Dh)));
    probs.assign(size_t(rows * ldp), -5.f);
    out.assign(size_t(rows * (Dh + 3)), -7.f);
    kernels.pack(qkv.data() + Dh, qkv.data() + 2 * Dh, ld, T, Dh, Tp, Dhp, kt.data(), vp.data());
    AttendArgs a{qkv.data(), ld, rows, T, Dh, Tp, Dhp, scale, kt.data(), vp.data(),
                 bias.data(), probs.data(), ldp, out.data(), Dh + 3, work.data()};
    kernels.attend(a);
  }
  float q(int64_t i, int64_t d) const { return qkv[size_t(i * ld + d)]; }
  float k(int64_t j, int64_t d) const { return qkv[size_t(j * ld + Dh + d)]; }
  float v(int64_t j, int64_t d) const { return qkv[size_t(j * ld + 2 * Dh + d)]; }
  float bias_at(int64_t i, int64_t j) const { return bias[size_t(i * ldp + j)]; }
  float prob(int64_t i, int64_t j) const { return probs[size_t(i * ldp + j)]; }
  float output(int64_t i, int64_t d) const { return out[size_t(i * (Dh + 3) + d)]; }
};

// Runs one kernel over head widths under, at and past a vector, query counts that leave partial tiles and a
// single key, with bias and softmax rows packed (gap 0) and spaced as in a padded batch, and checks it against
// a naive loop in double over the operands as the kernel sees them. `operands(run)` gives that view: a
// `score(i, j)` (the scaled product of query i and key j) and an `out(i, d, p)` (output channel d of query i,
// given the naive softmax row p).
template <class Operands>
void expect_naive_attention(const AttentionKernels& kernels, int64_t odd_width, Operands operands) {
  const int64_t shapes[][3] = {{197, 64, 197}, {197, 72, 50}, {5, 8, 5}, {1, 16, 1}, {257, 40, 13}, {33, odd_width, 7}};
  for (const auto& [T, Dh, rows] : shapes)
    for (const int64_t gap : {0, 21}) {
      SCOPED_TRACE(std::string(kernels.isa) + " T " + std::to_string(T) + " Dh " + std::to_string(Dh) + " rows " +
                   std::to_string(rows) + " gap " + std::to_string(gap));
      const KernelRun run(kernels, T, Dh, rows, gap);
      const auto [score, out] = operands(run);
      double worst_p = 0, worst_o = 0;
      for (int64_t i = 0; i < rows; ++i) {
        std::vector<double> p(static_cast<size_t>(T));
        double top = -1e300, sum = 0;
        for (int64_t j = 0; j < T; ++j) top = std::max(top, p[size_t(j)] = score(i, j) + run.bias_at(i, j));
        for (auto& e : p) sum += (e = std::exp(e - top));
        for (auto& e : p) e /= sum;
        for (int64_t j = 0; j < T; ++j) worst_p = std::max(worst_p, std::fabs(p[size_t(j)] - run.prob(i, j)));
        for (int64_t j = T; j < T + gap; ++j) EXPECT_EQ(run.prob(i, j), -5.f) << "wrote past the row's keys";
        for (int64_t d = 0; d < Dh; ++d) worst_o = std::max(worst_o, std::fabs(out(i, d, p) - run.output(i, d)));
        for (int64_t d = Dh; d < Dh + 3; ++d) EXPECT_EQ(run.output(i, d), -7.f) << "wrote past the head";
      }
      EXPECT_LT(worst_p, 5e-6);
      EXPECT_LT(worst_o, 2e-5);
    }
}

// Every ISA's fused kernel on one (image, head), with a bias on the scores and the softmax written out.
TEST(AttentionKernels, EveryIsaMatchesTheNaiveLoop) {
  int count = 0;
  const AttentionKernels* const* all = all_attention_kernels(&count);
  for (int v = 0; v < count; ++v)
    expect_naive_attention(*all[v], 100, [](const KernelRun& run) {
      const auto score = [&run](int64_t i, int64_t j) {
        double dot = 0;
        for (int64_t d = 0; d < run.Dh; ++d) dot += double(run.q(i, d)) * run.k(j, d);
        return dot / std::sqrt(double(run.Dh));
      };
      const auto out = [&run](int64_t, int64_t d, const std::vector<double>& p) {
        double o = 0;
        for (int64_t j = 0; j < run.T; ++j) o += p[size_t(j)] * run.v(j, d);
        return o;
      };
      return std::pair(score, out);
    });
}

// The bf16 kernel (CPUs with avx512_bf16) computes exactly the attention of its bf16-rounded operands:
// q / sqrt(Dh), k and v rounded to nearest even, the f32 softmax rounded the same before it meets v,
// against a naive loop in double on those operands. (What the rounding costs end to end is measured on
// photos: tests/test_goldens.cpp, docs/PERFORMANCE.md.)
float round_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

TEST(AttentionKernels, Bf16ProductsAreTheAttentionOfBf16Operands) {
  const AttentionKernels* k = attention_kernels_bf16();
  if (!k) GTEST_SKIP() << "this CPU (" << cpu_isa().name << ") has no avx512_bf16: attention stays f32";
  expect_naive_attention(*k, 101, [](const KernelRun& run) {
    const auto score = [&run](int64_t i, int64_t j) {
      double dot = 0;
      for (int64_t d = 0; d < run.Dh; ++d) dot += double(round_bf16(run.q(i, d) * run.scale)) * round_bf16(run.k(j, d));
      return dot;
    };
    const auto out = [&run](int64_t i, int64_t d, const std::vector<double>&) {
      double o = 0;  // from the kernel's own f32 softmax, rounded
      for (int64_t j = 0; j < run.T; ++j) o += double(round_bf16(run.prob(i, j))) * round_bf16(run.v(j, d));
      return o;
    };
    return std::pair(score, out);
  });
}

// The int8 kernel (CPUs with avx512_vnni) computes exactly the attention of its int8 operands: q / sqrt(Dh)
// per row and k per key on symmetric grids of max |x| / 127, v per channel likewise, the f32 softmax per row
// on 0 .. its maximum in 255 steps, each rounded to nearest even of x * (127 / max) (or 255 / max), against a
// naive loop in double on those operands. (What it costs end to end is measured on photos:
// docs/PERFORMANCE.md.)
struct SymmetricGrid {
  float inv, scale;  // q = round(x * inv), x ~ q * scale
  SymmetricGrid(float max_abs, float levels)
      : inv(max_abs > 0.f ? levels / max_abs : 0.f), scale(max_abs > 0.f ? max_abs / levels : 1.f) {}
  double operator()(float x) const { return double(std::nearbyint(x * inv)) * scale; }
};

// The grid of max |x(i)| over i < n, in `levels` steps.
template <class X>
SymmetricGrid grid_over(X x, int64_t n, float levels) {
  float m = 0.f;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x(i)));
  return SymmetricGrid(m, levels);
}

TEST(AttentionKernels, Int8ProductsAreTheAttentionOfInt8Operands) {
  const AttentionKernels* k = attention_kernels_int8();
  if (!k) GTEST_SKIP() << "oneDNN runs this CPU as " << cpu_isa().name << ", without avx512_vnni: no int8 attention";
  std::vector<SymmetricGrid> query_grid, key_grid, channel_grid, prob_grid;
  expect_naive_attention(*k, 101, [&](const KernelRun& run) {
    query_grid.clear(), key_grid.clear(), channel_grid.clear(), prob_grid.clear();
    for (int64_t i = 0; i < run.rows; ++i) {
      query_grid.push_back(grid_over([&](int64_t d) { return run.q(i, d); }, run.Dh, 127.f));
      prob_grid.push_back(grid_over([&](int64_t j) { return run.prob(i, j); }, run.T, 255.f));  // the kernel's own softmax
    }
    for (int64_t j = 0; j < run.T; ++j) key_grid.push_back(grid_over([&](int64_t d) { return run.k(j, d); }, run.Dh, 127.f));
    for (int64_t d = 0; d < run.Dh; ++d) channel_grid.push_back(grid_over([&](int64_t j) { return run.v(j, d); }, run.T, 127.f));
    const auto score = [&run, &query_grid, &key_grid](int64_t i, int64_t j) {
      double dot = 0;
      for (int64_t d = 0; d < run.Dh; ++d) dot += query_grid[size_t(i)](run.q(i, d)) * key_grid[size_t(j)](run.k(j, d));
      return dot * run.scale;
    };
    const auto out = [&run, &prob_grid, &channel_grid](int64_t i, int64_t d, const std::vector<double>&) {
      double o = 0;
      for (int64_t j = 0; j < run.T; ++j) o += prob_grid[size_t(i)](run.prob(i, j)) * channel_grid[size_t(d)](run.v(j, d));
      return o;
    };
    return std::pair(score, out);
  });
}

// The softmax written out sums to one per row, and an image's result is the same in any batch, with f32
// products, with bf16 ones and with int8 ones (each where the CPU has them).
class AttentionSteps : public ::testing::TestWithParam<Precision> {};

TEST_P(AttentionSteps, ScoresAndBatchIndependence) {
  const int64_t T = 197, H = 3, Dh = 64, D = H * Dh;
  std::mt19937 rng(7);
  const auto qkv = random_vector(size_t(4 * T * 3 * D), rng);
  auto run = [&](int64_t B, const float* src, std::vector<float>* scores) {
    std::vector<float> heads(size_t(attention_scratch_floats(B, T, H, Dh))), out(size_t(B * T * D));
    scores->assign(size_t(B * H * T * T), 0.f);
    Program p;
    for (Step& s : attention_steps("attn", B, T, H, Dh, src, heads.data(), scores->data(), out.data(), nullptr, GetParam()))
      p.add(std::move(s));
    p.run();
    return out;
  };
  std::vector<float> s4, s1;
  const auto all = run(4, qkv.data(), &s4);
  const auto third = run(1, qkv.data() + 2 * T * 3 * D, &s1);
  EXPECT_TRUE(std::equal(third.begin(), third.end(), all.begin() + 2 * T * D));
  EXPECT_TRUE(std::equal(s1.begin(), s1.end(), s4.begin() + 2 * H * T * T));
  for (int64_t r = 0; r < 4 * H * T; r += 37) {
    double sum = 0;
    for (int64_t j = 0; j < T; ++j) sum += s4[size_t(r * T + j)];
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
}
INSTANTIATE_TEST_SUITE_P(Products, AttentionSteps, ::testing::Values(Precision::F32, Precision::BF16, Precision::Int8),
                         product_name);

// A bias looked up per head through an index (BEiT's relative position bias): written out dense, then
// given to the attention, against the naive attention with that bias added to the scores.
TEST_P(AttentionTest, WithLookedUpBiasMatchesReference) {
  const auto c = GetParam();
  const int64_t D = c.H * c.Dh, R = 7 + c.T % 5;
  std::mt19937 rng(uint32_t(c.B * 77 + c.T));
  const auto qkv = random_vector(size_t(c.B * c.T * 3 * D), rng), table = random_vector(size_t(R * c.H), rng, 3.f);
  std::vector<int32_t> index(size_t(c.T * c.T));
  for (auto& v : index) v = int32_t(rng() % uint32_t(R));
  std::vector<float> want_bias(size_t(c.H * c.T * c.T)), bias(want_bias.size(), -9.f);
  for (int64_t h = 0; h < c.H; ++h)
    for (int64_t ij = 0; ij < c.T * c.T; ++ij)
      want_bias[size_t(h * c.T * c.T + ij)] = table[size_t(index[size_t(ij)] * c.H + h)];
  const auto want = ref_attention(qkv, c.B, c.T, c.H, c.Dh, want_bias);
  std::vector<float> heads(size_t(attention_scratch_floats(c.B, c.T, c.H, c.Dh))), out(size_t(c.B * c.T * D), -3.f);
  Program p;
  p.add(lookup_bias_step("bias", c.H, c.T, table.data(), index.data(), bias.data()));
  for (Step& s : attention_steps("attn", c.B, c.T, c.H, c.Dh, qkv.data(), heads.data(), nullptr, out.data(), bias.data()))
    p.add(std::move(s));
  p.run();
  EXPECT_EQ(bias, want_bias);
  EXPECT_LT(max_abs_diff(out.data(), want.data(), want.size()), 1e-4f);
}

// Attention over a batch of images of different lengths padded to T (NaFlex), with f32 products, bf16 ones
// and int8 ones (each where the CPU has them): the steps on the padded batch, the softmax written out.
struct MaskedRun {
  std::vector<float> out, scores;
};
MaskedRun run_attention(int64_t B, int64_t T, int64_t H, int64_t Dh, const float* qkv, const int32_t* lengths,
                        Precision products, const float* bias = nullptr, bool causal = false) {
  MaskedRun r;
  std::vector<float> heads(size_t(attention_scratch_floats(B, T, H, Dh)), 9.f);
  r.out.assign(size_t(B * T * H * Dh), -3.f);
  r.scores.assign(size_t(B * H * T * T), -4.f);
  Program p;
  for (Step& s : attention_steps("attn", B, T, H, Dh, qkv, heads.data(), r.scores.data(), r.out.data(), bias, products,
                                 lengths, causal))
    p.add(std::move(s));
  p.run();
  return r;
}

// Image b of a padded qkv batch [B, T, 3, H, Dh]: its first n tokens, alone.
std::vector<float> image_tokens(const std::vector<float>& qkv, int64_t b, int64_t T, int64_t n, int64_t width) {
  return {qkv.begin() + b * T * width, qkv.begin() + (b * T + n) * width};
}

// What attention_steps multiplies in for products of a precision on this CPU.
Precision products_here(Precision p) {
  if (p == Precision::BF16 && attention_kernels_bf16()) return p;
  if (p == Precision::Int8 && attention_kernels_int8()) return p;
  return Precision::F32;
}

class MaskedAttention : public ::testing::TestWithParam<Precision> {};

// Random shapes and lengths (one token, full length, in between) against a naive masked softmax in
// double: each valid row's softmax over its image's keys only (zeros past them), padded rows of the
// softmax and of the output zero, the output of each valid row from its image's values. What runs in the
// padding (random qkv rows there) cannot matter. With bf16 or int8 products the reference takes the
// operands rounded as the kernel rounds them (Bf16ProductsAreTheAttentionOfBf16Operands,
// Int8ProductsAreTheAttentionOfInt8Operands), int8's grids over the image's own keys and values.
// causal: row i's softmax over keys 0..i only (and within its image's length).
void expect_naive_masked_softmax(Precision products, bool causal) {
  const Precision here = products_here(products);
  const int64_t shapes[][4] = {{3, 50, 2, 16}, {4, 197, 3, 64}, {2, 257, 1, 40}, {5, 17, 2, 8}, {2, 33, 2, 72},
                               {3, 77, 2, 32}, {2, 64, 3, 24}, {3, 1, 1, 8}, {2, 129, 2, 12}};
  for (const auto& [B, T, H, Dh] : shapes) {
    SCOPED_TRACE("B " + std::to_string(B) + " T " + std::to_string(T) + " H " + std::to_string(H) + " Dh " +
                 std::to_string(Dh));
    const int64_t D = H * Dh;
    const float scale = 1.f / std::sqrt(float(Dh));
    std::mt19937 rng(uint32_t(B * 131 + T));
    const auto qkv = random_vector(size_t(B * T * 3 * D), rng, 2.f);
    std::vector<int32_t> lengths(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b)
      lengths[size_t(b)] = b == 0 ? int32_t(T) : b == 1 ? 1 : int32_t(1 + rng() % uint32_t(T));
    const MaskedRun got = run_attention(B, T, H, Dh, qkv.data(), lengths.data(), products, nullptr, causal);
    const auto at = [&](int64_t b, int64_t t, int64_t part, int64_t h, int64_t d) {
      return qkv[size_t(((b * T + t) * 3 + part) * D + h * Dh + d)];
    };
    const auto operand = [&](float x, const SymmetricGrid& grid) {  // k or v as the kernel rounds it
      return here == Precision::BF16 ? double(round_bf16(x)) : here == Precision::Int8 ? grid(x) : double(x);
    };
    double worst_p = 0, worst_o = 0;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t n = lengths[size_t(b)];
      SCOPED_TRACE("image " + std::to_string(b) + " of length " + std::to_string(n));
      for (int64_t h = 0; h < H; ++h) {
        // The operands as the kernel rounds them: k per key and v per channel (int8's grids over the image's n keys).
        std::vector<double> k(size_t(n * Dh)), v(size_t(n * Dh));
        for (int64_t j = 0; j < n; ++j) {
          const SymmetricGrid grid = grid_over([&](int64_t d) { return at(b, j, 1, h, d); }, Dh, 127.f);
          for (int64_t d = 0; d < Dh; ++d) k[size_t(j * Dh + d)] = operand(at(b, j, 1, h, d), grid);
        }
        for (int64_t d = 0; d < Dh; ++d) {
          const SymmetricGrid grid = grid_over([&](int64_t j) { return at(b, j, 2, h, d); }, n, 127.f);
          for (int64_t j = 0; j < n; ++j) v[size_t(j * Dh + d)] = operand(at(b, j, 2, h, d), grid);
        }
        for (int64_t i = 0; i < T; ++i) {
          const float* probs = got.scores.data() + ((b * H + h) * T + i) * T;
          const float* out = got.out.data() + (b * T + i) * D + h * Dh;
          if (i >= n) {
            for (int64_t j = 0; j < T; ++j) ASSERT_EQ(probs[j], 0.f) << "padded row " << i;
            for (int64_t d = 0; d < Dh; ++d) ASSERT_EQ(out[d], 0.f) << "padded row " << i;
            continue;
          }
          const SymmetricGrid q_grid = grid_over([&](int64_t d) { return at(b, i, 0, h, d); }, Dh, 127.f);
          const int64_t m = causal ? std::min(n, i + 1) : n;  // the keys row i attends to
          std::vector<double> p(static_cast<size_t>(m));
          double top = -1e300, sum = 0;
          for (int64_t j = 0; j < m; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < Dh; ++d) {
              const float x = at(b, i, 0, h, d);
              const double q = here == Precision::BF16   ? round_bf16(x * scale)
                               : here == Precision::Int8 ? q_grid(x) * scale
                                                         : double(x * scale);
              dot += q * k[size_t(j * Dh + d)];
            }
            top = std::max(top, p[size_t(j)] = dot);
          }
          for (auto& e : p) sum += (e = std::exp(e - top));
          for (int64_t j = 0; j < m; ++j) worst_p = std::max(worst_p, std::fabs(p[size_t(j)] / sum - probs[j]));
          for (int64_t j = m; j < T; ++j) ASSERT_EQ(probs[j], 0.f) << "masked or padded key " << j << " of row " << i;
          // With bf16 or int8 products, the output from the kernel's own f32 softmax, rounded (int8: on its row's grid).
          const SymmetricGrid p_grid = grid_over([&](int64_t j) { return probs[j]; }, n, 255.f);
          for (int64_t d = 0; d < Dh; ++d) {
            double o = 0;
            for (int64_t j = 0; j < m; ++j) {
              const double w = here == Precision::BF16   ? double(round_bf16(probs[j]))
                               : here == Precision::Int8 ? p_grid(probs[j])
                                                         : p[size_t(j)] / sum;
              o += w * v[size_t(j * Dh + d)];
            }
            worst_o = std::max(worst_o, std::fabs(o - out[d]));
          }
        }
      }
    }
    EXPECT_LT(worst_p, 5e-6);
    EXPECT_LT(worst_o, 2e-5);
  }
}

TEST_P(MaskedAttention, MatchesTheNaiveMaskedSoftmax) { expect_naive_masked_softmax(GetParam(), false); }

// CLIP text's causal mask, over texts of different lengths and at full length, odd shapes (T = 1, 77, 129).
TEST_P(MaskedAttention, CausalMatchesTheNaiveCausalSoftmax) { expect_naive_masked_softmax(GetParam(), true); }

// With every image full length, the lengths change nothing at all, under a causal mask or none.
void expect_full_lengths_change_nothing(int64_t B, int64_t T, int64_t H, int64_t Dh, const std::vector<float>& qkv,
                                        Precision products, bool causal) {
  const std::vector<int32_t> full(static_cast<size_t>(B), int32_t(T));
  const MaskedRun masked = run_attention(B, T, H, Dh, qkv.data(), full.data(), products, nullptr, causal);
  const MaskedRun plain = run_attention(B, T, H, Dh, qkv.data(), nullptr, products, nullptr, causal);
  EXPECT_EQ(masked.out, plain.out);
  EXPECT_EQ(masked.scores, plain.scores);
}

// Without lengths, a causal mask over full rows is the masked softmax of a batch whose lengths are all T.
TEST_P(MaskedAttention, CausalWithoutLengthsIsTheFullLengthOne) {
  std::mt19937 rng(14);
  expect_full_lengths_change_nothing(2, 77, 2, 32, random_vector(size_t(2 * 77 * 3 * 2 * 32), rng), GetParam(), true);
}

// Each image of a padded batch gets bit for bit the answer it gets alone (its own length, no padding),
// whatever its neighbours' lengths; with every image full length, the lengths change nothing at all.
TEST_P(MaskedAttention, EachImageAsAloneBitForBit) {
  const Precision products = GetParam();
  const int64_t B = 4, T = 197, H = 3, Dh = 64, D = H * Dh;
  std::mt19937 rng(11);
  const auto qkv = random_vector(size_t(B * T * 3 * D), rng);
  const std::vector<int32_t> lengths = {197, 1, 120, 33};
  const MaskedRun batch = run_attention(B, T, H, Dh, qkv.data(), lengths.data(), products);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = lengths[size_t(b)];
    const auto mine = image_tokens(qkv, b, T, n, 3 * D);
    const MaskedRun alone = run_attention(1, n, H, Dh, mine.data(), nullptr, products);
    EXPECT_TRUE(std::equal(alone.out.begin(), alone.out.end(), batch.out.begin() + b * T * D)) << "image " << b;
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < n; ++i)
        ASSERT_TRUE(std::equal(alone.scores.begin() + (h * n + i) * n, alone.scores.begin() + (h * n + i + 1) * n,
                               batch.scores.begin() + ((b * H + h) * T + i) * T))
            << "image " << b << " head " << h << " row " << i;
  }
  expect_full_lengths_change_nothing(B, T, H, Dh, qkv, products, false);
}

// A bias over the padded batch's tokens is read in each image's own corner: as alone with that corner.
TEST_P(MaskedAttention, BiasReadInTheImagesCorner) {
  const Precision products = GetParam();
  const int64_t B = 2, T = 40, H = 2, Dh = 16, D = H * Dh;
  std::mt19937 rng(12);
  const auto qkv = random_vector(size_t(B * T * 3 * D), rng), bias = random_vector(size_t(H * T * T), rng, 3.f);
  const std::vector<int32_t> lengths = {23, 40};
  const MaskedRun batch = run_attention(B, T, H, Dh, qkv.data(), lengths.data(), products, bias.data());
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = lengths[size_t(b)];
    std::vector<float> corner;
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < n; ++i) corner.insert(corner.end(), &bias[size_t((h * T + i) * T)], &bias[size_t((h * T + i) * T + n)]);
    const auto mine = image_tokens(qkv, b, T, n, 3 * D);
    const MaskedRun alone = run_attention(1, n, H, Dh, mine.data(), nullptr, products, corner.data());
    EXPECT_TRUE(std::equal(alone.out.begin(), alone.out.end(), batch.out.begin() + b * T * D)) << "image " << b;
  }
}

TEST_P(MaskedAttention, LengthOutsideTheBatchIsAnError) {
  const int64_t B = 2, T = 9, H = 1, Dh = 8;
  std::mt19937 rng(13);
  const auto qkv = random_vector(size_t(B * T * 3 * H * Dh), rng);
  for (const int32_t bad : {0, -3, 10}) {
    const std::vector<int32_t> lengths = {9, bad};
    expect_error([&] { run_attention(B, T, H, Dh, qkv.data(), lengths.data(), GetParam()); },
                 "attn: image 1 of the batch has length " + std::to_string(bad) + ", outside [1, 9] tokens");
  }
}

INSTANTIATE_TEST_SUITE_P(Products, MaskedAttention, ::testing::Values(Precision::F32, Precision::BF16, Precision::Int8),
                         product_name);

// B images of T rows of q, k and v for groups / 2 heads, turned in place by the rotary step from token `first`
// on with random angles (a table per head when tables > 1); `worst(turned)` is the largest difference from
// the rotation written out in double, turned(t, ch, at) giving the channel's value where it turns (the prefix
// tokens and v stay as they were).
struct RotaryRun {
  int64_t B, T, first, groups, Dh, stride, half;
  std::vector<float> x, angle, got;
  RotaryRun(int64_t B_, int64_t T_, int64_t first_, int64_t groups_, int64_t Dh_, uint32_t seed,
            RotaryLayout layout = RotaryLayout::Interleaved, int64_t tables = 1)
      : B(B_), T(T_), first(first_), groups(groups_), Dh(Dh_), stride(groups_ / 2 * 3 * Dh_), half(Dh_ / 2) {
    std::mt19937 rng(seed);
    x = random_vector(size_t(B * T * stride), rng, 2.f);
    angle = random_vector(size_t(tables * (T - first) * half), rng, 20.f);
    std::vector<float> sin(angle.size()), cos(angle.size());
    for (size_t i = 0; i < angle.size(); ++i) sin[i] = std::sin(angle[i]), cos[i] = std::cos(angle[i]);
    got = x;
    Step s = rotary_step("rope", B, T, first, groups, Dh, stride, sin.data(), cos.data(), got.data(), layout, tables);
    run_step(s);
  }
  // The angle of pair p of row t in table h.
  double angle_at(int64_t h, int64_t t, int64_t p) const { return angle[size_t((h * (T - first) + t - first) * half + p)]; }
  template <class Turned>
  float worst(Turned turned) const {
    float w = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t ch = 0; ch < stride; ++ch) {
          const size_t at = size_t((b * T + t) * stride + ch);
          const double want = t >= first && ch < groups * Dh ? turned(t, ch, at) : double(x[at]);
          w = std::max(w, float(std::fabs(want - got[at])));
        }
    return w;
  }
  // The interleaved layout's rotation of channel ch (pairs 2i, 2i + 1) by angle a.
  double interleaved(size_t at, int64_t ch, double a) const {
    const double x0 = x[at - size_t(ch % 2)], x1 = x[at - size_t(ch % 2) + 1];
    return ch % 2 == 0 ? x0 * std::cos(a) - x1 * std::sin(a) : x1 * std::cos(a) + x0 * std::sin(a);
  }
};

// Rotary embedding in place on fused q/k/v rows: the first `groups` heads of tokens first.. turned, the
// rest of every row and the prefix tokens untouched; against the rotation written out in double.
TEST(RotaryTest, MatchesReference) {
  const int64_t shapes[][5] = {{1, 257, 1, 4, 64}, {2, 197, 1, 6, 64}, {3, 17, 2, 4, 8}, {1, 5, 0, 2, 2}, {2, 50, 3, 6, 32}};
  for (const auto& sh : shapes) {  // B, T, first, groups, Dh; rows of 3 * groups / 2 heads (q, k and v)
    const int64_t B = sh[0], T = sh[1], first = sh[2], groups = sh[3], Dh = sh[4];
    const RotaryRun r(B, T, first, groups, Dh, uint32_t(B * 31 + T));
    const float worst = r.worst([&](int64_t t, int64_t ch, size_t at) {
      return r.interleaved(at, ch, r.angle_at(0, t, (ch % Dh) / 2));
    });
    EXPECT_LT(worst, 2e-6f) << B << "x" << T << " from " << first << ", " << groups << " groups of " << Dh;
  }
}

// A table per head (RoPE-Mixed: q's head h and k's head h turned by table h of `tables`), against the rotation
// written out in double.
TEST(RotaryTest, TablePerHeadMatchesReference) {
  const int64_t H = 3, Dh = 8;
  const RotaryRun r(2, 21, 1, 2 * H, Dh, 17, RotaryLayout::Interleaved, H);
  EXPECT_LT(r.worst([&](int64_t t, int64_t ch, size_t at) {
    return r.interleaved(at, ch, r.angle_at((ch / Dh) % H, t, (ch % Dh) / 2));
  }), 2e-6f);
}

// The rotate-half layout (DINOv3, Naver's RoPE ViTs): channel i pairs with i + Dh/2 and both turn by angle i,
// timm's x * cos + rope_rotate_half(x) * sin with sin, cos = cat([angles, angles]); against that written out
// in double over whole rows, the prefix tokens and v untouched.
TEST(RotaryTest, RotateHalfMatchesReference) {
  const int64_t shapes[][5] = {{1, 261, 5, 4, 64}, {2, 21, 5, 6, 32}, {3, 17, 1, 4, 8}, {1, 5, 0, 2, 2}};
  for (const auto& sh : shapes) {  // B, T, first, groups, Dh; rows of 3 * groups / 2 heads (q, k and v)
    const int64_t B = sh[0], T = sh[1], first = sh[2], groups = sh[3], Dh = sh[4];
    const RotaryRun r(B, T, first, groups, Dh, uint32_t(B * 37 + T), RotaryLayout::Half);
    const int64_t half = Dh / 2;
    const float worst = r.worst([&](int64_t t, int64_t ch, size_t at) {
      const int64_t j = ch % Dh;
      const size_t head = at - size_t(j);
      const double a = r.angle_at(0, t, j % half);
      // rope_rotate_half(x) = cat([-x2, x1]): channel j < Dh/2 takes -x[j + Dh/2], the others x[j - Dh/2].
      const double rotated = j < half ? -double(r.x[head + size_t(j + half)]) : double(r.x[head + size_t(j - half)]);
      return double(r.x[at]) * std::cos(a) + rotated * std::sin(a);
    });
    EXPECT_LT(worst, 2e-6f) << B << "x" << T << " from " << first << ", " << groups << " groups of " << Dh;
  }
}

// RMSNorm: x * rsqrt(mean(x^2) + eps) * weight (timm's rms_norm), against it in double, in place and not, and
// through layer_norm_step (the norm step every model norm runs).
TEST(RmsNormTest, MatchesReference) {
  const int64_t shapes[][2] = {{197, 64}, {5, 1024}, {1, 1}, {33, 1536}};  // M, D
  for (const auto& sh : shapes) {
    const int64_t M = sh[0], D = sh[1];
    std::mt19937 rng(uint32_t(M * 7 + D));
    const auto x = random_vector(size_t(M * D), rng, 3.f), gamma = random_vector(size_t(D), rng, 2.f);
    Arena store;
    const LayerNormWeights rn = make_rms_norm(store, gamma.data(), D, 1e-5f);
    std::vector<float> got(x.size(), -9.f), inplace = x;
    Step s = rms_norm_step("rms", rn, M, x.data(), got.data());
    run_step(s);
    Step t = rms_norm_step("rms", rn, M, inplace.data(), inplace.data());
    run_step(t);
    std::vector<float> via_norm_step(x.size(), -9.f);  // what a model's norm step runs for an RMSNorm
    Step u = layer_norm_step("rms", rn, M, x.data(), via_norm_step.data());
    run_step(u);
    EXPECT_EQ(got, via_norm_step) << M << "x" << D;
    float worst = 0;
    for (int64_t m = 0; m < M; ++m) {
      double sq = 0;
      for (int64_t i = 0; i < D; ++i) sq += double(x[size_t(m * D + i)]) * x[size_t(m * D + i)];
      const double r = 1.0 / std::sqrt(sq / double(D) + 1e-5);
      for (int64_t i = 0; i < D; ++i) {
        const double want = x[size_t(m * D + i)] * r * gamma[size_t(i)];
        worst = std::max(worst, float(std::fabs(want - got[size_t(m * D + i)]) / std::max(1.0, std::fabs(want))));
      }
    }
    EXPECT_LT(worst, 2e-6f) << M << "x" << D;
    EXPECT_EQ(got, inplace) << M << "x" << D;
  }
}

// SwiGLU's gate: silu(gate) * values, against the formula in double.
TEST(SwigluTest, MatchesReference) {
  const int64_t shapes[][2] = {{197, 170}, {257, 512}, {3, 1}, {50, 2048}};  // M, H
  for (const auto& sh : shapes) {
    const int64_t M = sh[0], H = sh[1];
    std::mt19937 rng(uint32_t(M + H));
    const auto x = random_vector(size_t(M * 2 * H), rng, 8.f);
    std::vector<float> got(size_t(M * H), -5.f);
    Step s = swiglu_step("swiglu", M, H, x.data(), got.data());
    run_step(s);
    float worst = 0;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t i = 0; i < H; ++i) {
        const double g = x[size_t(m * 2 * H + i)], v = x[size_t(m * 2 * H + H + i)];
        const double want = g / (1.0 + std::exp(-g)) * v;
        worst = std::max(worst, float(std::fabs(want - got[size_t(m * H + i)]) / std::max(1.0, std::fabs(want))));
      }
    EXPECT_LT(worst, 1e-6f) << M << "x" << H;
  }
}

// AttentionPoolLatent's core for image b of a batch padded to T tokens (q: one query of H heads; kv: rows of k
// then v), over its first n tokens, in double: the pooled [H * Dh].
std::vector<float> ref_attention_pool(const std::vector<float>& q, const std::vector<float>& kv, int64_t b, int64_t T,
                                      int64_t n, int64_t H, int64_t Dh) {
  const int64_t D = H * Dh;
  std::vector<float> want(static_cast<size_t>(D));
  for (int64_t h = 0; h < H; ++h) {
    std::vector<double> p(static_cast<size_t>(n));
    double top = -1e300, sum = 0;
    for (int64_t t = 0; t < n; ++t) {
      double dot = 0;
      for (int64_t d = 0; d < Dh; ++d) dot += double(q[size_t(h * Dh + d)]) * kv[size_t((b * T + t) * 2 * D + h * Dh + d)];
      top = std::max(top, p[size_t(t)] = dot / std::sqrt(double(Dh)));
    }
    for (auto& v : p) sum += (v = std::exp(v - top));
    for (int64_t d = 0; d < Dh; ++d) {
      double o = 0;
      for (int64_t t = 0; t < n; ++t) o += p[size_t(t)] / sum * kv[size_t((b * T + t) * 2 * D + D + h * Dh + d)];
      want[size_t(h * Dh + d)] = float(o);
    }
  }
  return want;
}

// AttentionPoolLatent's core with one query, against a naive loop in double.
TEST(AttentionPoolTest, MatchesReference) {
  const int64_t shapes[][4] = {{1, 196, 2, 32}, {3, 197, 3, 64}, {2, 5, 1, 7}};  // B, T, H, Dh
  for (const auto& shape : shapes) {
    const int64_t B = shape[0], T = shape[1], H = shape[2], Dh = shape[3];
    std::mt19937 rng(uint32_t(B * 100 + T));
    const int64_t D = H * Dh;
    const auto q = random_vector(size_t(D), rng, 2.f), kv = random_vector(size_t(B * T * 2 * D), rng, 2.f);
    std::vector<float> scores(size_t(B * H * T)), got(size_t(B * D), -7.f), want;
    for (int64_t b = 0; b < B; ++b) {
      const auto one = ref_attention_pool(q, kv, b, T, T, H, Dh);
      want.insert(want.end(), one.begin(), one.end());
    }
    Step s = attention_pool_step("pool", B, T, H, Dh, q.data(), kv.data(), scores.data(), got.data());
    run_step(s);
    EXPECT_LT(max_abs_diff(got, want), 1e-5f) << B << "x" << T << "x" << H << "x" << Dh;
  }
}

// The attention pool over images of different lengths padded to T: each image's softmax over its own
// tokens only (timm's attn_pool with the key mask of create_attention_mask(symmetric=False)), against the
// naive loop in double on those tokens; bit for bit the answer it gets alone; its scores past them zero.
TEST(AttentionPoolTest, MaskedMatchesReferenceAndAlone) {
  const int64_t B = 4, T = 61, H = 3, Dh = 16, D = H * Dh;
  std::mt19937 rng(21);
  const auto q = random_vector(size_t(D), rng, 2.f), kv = random_vector(size_t(B * T * 2 * D), rng, 2.f);
  const std::vector<int32_t> lengths = {61, 1, 30, 47};
  std::vector<float> scores(size_t(B * H * T), -9.f), got(size_t(B * D), -7.f);
  Step s = attention_pool_step("pool", B, T, H, Dh, q.data(), kv.data(), scores.data(), got.data(), lengths.data());
  run_step(s);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = lengths[size_t(b)];
    const std::vector<float> want = ref_attention_pool(q, kv, b, T, n, H, Dh);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = n; t < T; ++t) EXPECT_EQ(scores[size_t((b * H + h) * T + t)], 0.f);
    EXPECT_LT(max_abs_diff(got.data() + b * D, want.data(), size_t(D)), 1e-5f) << "image " << b;
    std::vector<float> mine(kv.begin() + b * T * 2 * D, kv.begin() + (b * T + n) * 2 * D), alone(static_cast<size_t>(D)),
        alone_scores(size_t(H * n));
    Step a = attention_pool_step("pool", 1, n, H, Dh, q.data(), mine.data(), alone_scores.data(), alone.data());
    run_step(a);
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), got.begin() + b * D)) << "image " << b;
  }
  for (const int32_t bad : {0, 62}) {
    const std::vector<int32_t> wrong = {3, bad, 5, 6};
    Step e = attention_pool_step("pool", B, T, H, Dh, q.data(), kv.data(), scores.data(), got.data(), wrong.data());
    expect_error([&] { run_step(e); }, "pool: image 1 of the batch has length " + std::to_string(bad) + ", outside [1, 61] tokens");
  }
}

TEST(PatchifyTest, MatchesConvolutionLayout) {
  // patchify + linear must equal a direct P x P stride-P convolution.
  const int64_t B = 2, C = 3, S = 48, P = 16, D = 10, G = S / P;
  std::mt19937 rng(5);
  const auto img = random_vector(size_t(B * C * S * S), rng), w = random_vector(size_t(D * C * P * P), rng, 0.05f),
             b = random_vector(size_t(D), rng);
  std::vector<float> patches(size_t(B * G * G * C * P * P)), y(size_t(B * G * G * D));
  Program p;
  p.add(patchify_step("patchify", B, C, S, S, P, img.data(), patches.data()));
  Arena store;
  const LinearWeights lw = make_linear(store, w.data(), b.data(), C * P * P, D, B * G * G, Epilogue::None, Precision::F32,
                                       WeightLayout::NK);
  for (Step& s : linear_steps("proj", lw, B, G * G, patches.data(), y.data())) p.add(std::move(s));
  p.run();
  float worst = 0;
  for (int64_t bb = 0; bb < B; ++bb)
    for (int64_t gy = 0; gy < G; ++gy)
      for (int64_t gx = 0; gx < G; ++gx)
        for (int64_t d = 0; d < D; ++d) {
          double acc = b[size_t(d)];
          for (int64_t c = 0; c < C; ++c)
            for (int64_t ky = 0; ky < P; ++ky)
              for (int64_t kx = 0; kx < P; ++kx)
                acc += double(w[size_t(((d * C + c) * P + ky) * P + kx)]) *
                       img[size_t(((bb * C + c) * S + gy * P + ky) * S + gx * P + kx)];
          worst = std::max(worst, float(std::fabs(acc - y[size_t(((bb * G + gy) * G + gx) * D + d)])));
        }
  EXPECT_LT(worst, 1e-4f);
}

// timm's _pos_embed: prefix tokens before the patch rows, the position table over all of them or over
// the patches only (no_embed_class).
TEST(EmbedTokensTest, MatchesTimmPosEmbed) {
  const int64_t B = 3, N = 5, D = 4;
  std::mt19937 rng(8);
  const auto patches = random_vector(size_t(B * N * D), rng), cls = random_vector(size_t(D), rng),
             dist = random_vector(size_t(D), rng), pos = random_vector(size_t((N + 2) * D), rng);
  for (const bool covers_prefix : {true, false})
    for (const int prefix : {0, 1, 2}) {
      const int64_t T = prefix + N;
      std::vector<const float*> rows = {cls.data(), dist.data()};
      rows.resize(size_t(prefix));
      std::vector<float> x(size_t(B * T * D), -9.f);
      Step s = embed_tokens_step("embed", B, N, D, rows, pos.data(), covers_prefix, patches.data(), x.data());
      run_step(s);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t < T; ++t)
          for (int64_t d = 0; d < D; ++d) {
            const float v = t < prefix ? rows[size_t(t)][d] : patches[size_t((b * N + t - prefix) * D + d)];
            const int64_t pos_row = covers_prefix ? t : t - prefix;
            const float want = pos_row >= 0 ? v + pos[size_t(pos_row * D + d)] : v;
            ASSERT_EQ(x[size_t((b * T + t) * D + d)], want) << "prefix " << prefix << " covers " << covers_prefix;
          }
    }
}

TEST(PoolTest, SelectTokenAndMeanOfTokens) {
  const int64_t B = 2, T = 6, D = 3;
  std::mt19937 rng(9);
  const auto x = random_vector(size_t(B * T * D), rng);
  std::vector<float> tok(size_t(B * D)), mean(size_t(B * D));
  Step s1 = select_token_step("pool", B, T, D, 1, x.data(), tok.data());
  run_step(s1);
  Step s2 = mean_tokens_step("pool", B, T, D, 2, x.data(), mean.data());
  run_step(s2);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t d = 0; d < D; ++d) {
      EXPECT_EQ(tok[size_t(b * D + d)], x[size_t((b * T + 1) * D + d)]);
      double sum = 0;
      for (int64_t t = 2; t < T; ++t) sum += x[size_t((b * T + t) * D + d)];
      EXPECT_NEAR(mean[size_t(b * D + d)], sum / double(T - 2), 1e-6);
    }
}

// Mean pooling over images of different lengths padded to T: each image's tokens first..length-1 only
// (timm's global_pool_naflex), bit for bit as alone; lengths that leave no token refused.
TEST(PoolTest, MaskedMeanOfTokens) {
  const int64_t B = 3, T = 9, D = 5, first = 1;
  std::mt19937 rng(22);
  const auto x = random_vector(size_t(B * T * D), rng);
  const std::vector<int32_t> lengths = {9, 2, 6};
  std::vector<float> mean(size_t(B * D));
  Step s = mean_tokens_step("pool", B, T, D, first, x.data(), mean.data(), lengths.data());
  run_step(s);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = lengths[size_t(b)];
    for (int64_t d = 0; d < D; ++d) {
      double sum = 0;
      for (int64_t t = first; t < n; ++t) sum += x[size_t((b * T + t) * D + d)];
      EXPECT_NEAR(mean[size_t(b * D + d)], sum / double(n - first), 1e-6);
    }
    std::vector<float> alone(static_cast<size_t>(D));
    Step a = mean_tokens_step("pool", 1, n, D, first, x.data() + b * T * D, alone.data());
    run_step(a);
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), mean.begin() + b * D)) << "image " << b;
  }
  const std::vector<int32_t> wrong = {9, 1, 6};  // no token after the prefix
  Step e = mean_tokens_step("pool", B, T, D, first, x.data(), mean.data(), wrong.data());
  expect_error([&] { run_step(e); }, "pool: image 1 of the batch has length 1, outside [2, 9] tokens");
}

TEST(PoolTest, AverageOfTwo) {
  std::vector<float> x = {1.f, -2.f, 3.5f}, y = {3.f, 2.f, -0.5f};
  Step s = average_step("avg", 3, y.data(), x.data());
  run_step(s);
  EXPECT_EQ(x, (std::vector<float>{2.f, 0.f, 1.5f}));
}

// The arena a BufferTable carves holds exactly its buffers, 64-byte aligned and disjoint; a fixed arena
// refuses to grow.
TEST(ArenaTest, BufferTableCarvesWhatItSizes) {
  float *a = nullptr, *b = nullptr;
  int8_t* c = nullptr;
  BufferTable t;
  t.add("a", &a, 3);
  t.add("b", &b, 100);
  t.add("c", &c, 65);
  EXPECT_EQ(t.bytes(), 64u + 448u + 128u);
  EXPECT_EQ(t.largest(), "b (0.0 MiB)");
  Arena arena = t.carve();
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uint8_t*>(b) - reinterpret_cast<uint8_t*>(a), 64);
  EXPECT_EQ(reinterpret_cast<int8_t*>(c) - reinterpret_cast<int8_t*>(b), 448);
  EXPECT_EQ(arena.bytes_used(), t.bytes());
  expect_error([&] { arena.alloc(1); }, "no room");
}

}  // namespace
}  // namespace vit::test

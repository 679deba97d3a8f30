// Each oneDNN op against the naive reference on seeded random data, ViT shapes (T = 197, 577) and odd ones.
#include <gtest/gtest.h>

#include <cmath>

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
  for (size_t i = 0; i < want.size(); ++i) {
    if (c.ep == Epilogue::Gelu) want[i] = ref_gelu(want[i]);
    if (c.ep == Epilogue::QuickGelu) want[i] = ref_quick_gelu(want[i]);
    if (c.ep == Epilogue::GeluTanh) want[i] = ref_gelu_tanh(want[i]);
    if (c.ep == Epilogue::AddToDst) want[i] += resid[i];
  }
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
  std::vector<float> heads(qkv.size()), scores(size_t(c.B * c.H * c.T * c.T)), out(size_t(c.B * c.T * D), -3.f);
  Program p;
  for (Step& s : attention_steps("attn", c.B, c.T, c.H, c.Dh, qkv.data(), heads.data(), scores.data(), out.data()))
    p.add(std::move(s));
  p.run();
  EXPECT_LT(max_abs_diff(out.data(), want.data(), want.size()), 1e-4f);
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionTest,
                         ::testing::Values(AttnCase{1, 197, 3, 64}, AttnCase{2, 197, 12, 64}, AttnCase{1, 577, 3, 64},
                                           AttnCase{3, 17, 2, 16}, AttnCase{2, 50, 4, 8}));

// AttentionPoolLatent's core with one query, against a naive loop in double.
TEST(AttentionPoolTest, MatchesReference) {
  const int64_t shapes[][4] = {{1, 196, 2, 32}, {3, 197, 3, 64}, {2, 5, 1, 7}};  // B, T, H, Dh
  for (const auto& shape : shapes) {
    const int64_t B = shape[0], T = shape[1], H = shape[2], Dh = shape[3];
    std::mt19937 rng(uint32_t(B * 100 + T));
    const int64_t D = H * Dh;
    const auto q = random_vector(size_t(D), rng, 2.f), kv = random_vector(size_t(B * T * 2 * D), rng, 2.f);
    std::vector<float> scores(size_t(B * H * T)), got(size_t(B * D), -7.f), want(size_t(B * D));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        std::vector<double> p(static_cast<size_t>(T));
        double top = -1e300, sum = 0;
        for (int64_t t = 0; t < T; ++t) {
          double dot = 0;
          for (int64_t d = 0; d < Dh; ++d) dot += double(q[size_t(h * Dh + d)]) * kv[size_t((b * T + t) * 2 * D + h * Dh + d)];
          p[size_t(t)] = dot / std::sqrt(double(Dh));
          top = std::max(top, p[size_t(t)]);
        }
        for (auto& v : p) sum += (v = std::exp(v - top));
        for (int64_t d = 0; d < Dh; ++d) {
          double o = 0;
          for (int64_t t = 0; t < T; ++t) o += p[size_t(t)] / sum * kv[size_t((b * T + t) * 2 * D + D + h * Dh + d)];
          want[size_t(b * D + h * Dh + d)] = float(o);
        }
      }
    Step s = attention_pool_step("pool", B, T, H, Dh, q.data(), kv.data(), scores.data(), got.data());
    run_step(s);
    EXPECT_LT(max_abs_diff(got, want), 1e-5f) << B << "x" << T << "x" << H << "x" << Dh;
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

// Attention through oneDNN's matmuls (ops.h, AttentionRoad::Matmuls) against a naive loop in double, at the
// token counts of ViTs at 224, 384 and 512 px (T = 197, 577, 1025) and heads 3, 6, 12, 16; with f32 products,
// bf16 ones (where the CPU has them) and for an int8 model; the softmax it writes out; an image's answer in
// any batch; the road's choice at load and in the environment.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "engine/nn/ops.h"
#include "models/network.h"
#include "model_files.h"
#include "reference.h"

namespace vit::test {
namespace {


float bf16_rounded(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  u = ((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16) << 16;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// The attention of qkv [B, T, 3, H, Dh] in double, with q, k, v and the softmax rows rounded to bf16 first
// when bf16 is true (the operands the bf16 matmuls see); the softmax rows into probs [B, H, T, T].
std::vector<float> naive_attention(const std::vector<float>& qkv, int64_t B, int64_t T, int64_t H, int64_t Dh, bool bf16,
                                   std::vector<float>* probs) {
  const int64_t D = H * Dh;
  const auto in = [&](int64_t b, int64_t t, int64_t part, int64_t h, int64_t d) {
    const float x = qkv[size_t((b * T + t) * 3 * D + part * D + h * Dh + d)];
    return double(bf16 ? bf16_rounded(x) : x);
  };
  std::vector<float> out(size_t(B * T * D));
  probs->assign(size_t(B * H * T * T), 0.f);
  std::vector<double> p(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        double top = -1e300, sum = 0;
        for (int64_t j = 0; j < T; ++j) {
          double s = 0;
          for (int64_t d = 0; d < Dh; ++d) s += in(b, i, 0, h, d) * in(b, j, 1, h, d);
          top = std::max(top, p[size_t(j)] = s / std::sqrt(double(Dh)));
        }
        for (auto& e : p) sum += (e = std::exp(e - top));
        for (int64_t j = 0; j < T; ++j) {
          p[size_t(j)] /= sum;
          (*probs)[size_t(((b * H + h) * T + i) * T + j)] = float(p[size_t(j)]);
          if (bf16) p[size_t(j)] = bf16_rounded(float(p[size_t(j)]));
        }
        for (int64_t d = 0; d < Dh; ++d) {
          double s = 0;
          for (int64_t j = 0; j < T; ++j) s += p[size_t(j)] * in(b, j, 2, h, d);
          out[size_t((b * T + i) * D + h * Dh + d)] = float(s);
        }
      }
  return out;
}

// The matmul road's output for B images of qkv, the softmax written into scores when it is not null.
std::vector<float> run_matmuls(const float* qkv, int64_t B, int64_t T, int64_t H, int64_t Dh, Precision products,
                               std::vector<float>* scores) {
  std::vector<float> work(size_t(attention_matmul_floats(B, T, H, Dh, products)), 9.f), out(size_t(B * T * H * Dh), -3.f);
  if (scores) scores->assign(size_t(B * H * T * T), -5.f);
  Program p;
  for (Step& s : attention_matmul_steps("attn", B, T, H, Dh, qkv, work.data(), scores ? scores->data() : nullptr,
                                        out.data(), products))
    p.add(std::move(s));
  p.run();
  return out;
}

std::string product_name(const ::testing::TestParamInfo<Precision>& info) {
  return info.param == Precision::F32 ? "F32" : info.param == Precision::BF16 ? "Bf16WhereTheCpuHasIt" : "ForAnInt8Model";
}

struct Shape {
  int64_t B, T, H, Dh;
};

class MatmulRoad : public ::testing::TestWithParam<Precision> {
 protected:
  // What the road multiplies in for the products asked; skips bf16 where the CPU cannot.
  Precision products() {
    const Precision got = attention_matmul_products(GetParam());
    if (GetParam() == Precision::BF16 && got != Precision::BF16)
      ADD_FAILURE() << "bf16 products asked on a CPU with bf16, and the road gives " << precision_name(got);
    return got;
  }
  void SetUp() override {
    if (GetParam() == Precision::BF16 && !cpu_isa().bf16)
      GTEST_SKIP() << "oneDNN runs this CPU as " << cpu_isa().name
                   << ", without avx512_bf16 or AMX: it has no bf16 matmul to run the road's bf16 products";
  }
};

// Odd shapes: T = 197 (224 px), 577 (384 px), 1025 (512 px), 17; heads 3, 6, 12, 16; head widths 64, 32, 24, 8.
TEST_P(MatmulRoad, MatchesTheNaiveAttentionAndWritesItsSoftmax) {
  const Precision p = products();
  const bool bf16 = p == Precision::BF16;
  const Shape shapes[] = {{2, 197, 3, 64}, {1, 197, 12, 64}, {1, 577, 6, 32}, {1, 1025, 16, 8}, {3, 17, 6, 24}};
  for (const Shape& c : shapes) {
    SCOPED_TRACE("B " + std::to_string(c.B) + " T " + std::to_string(c.T) + " H " + std::to_string(c.H) + " Dh " +
                 std::to_string(c.Dh));
    std::mt19937 rng(uint32_t(c.T * 7 + c.H));
    const auto qkv = random_vector(size_t(c.B * c.T * 3 * c.H * c.Dh), rng, 1.5f);
    std::vector<float> want_p, got_p;
    const auto want = naive_attention(qkv, c.B, c.T, c.H, c.Dh, bf16, &want_p);
    const auto got = run_matmuls(qkv.data(), c.B, c.T, c.H, c.Dh, p, &got_p);
    // bf16: the scores are summed in f32 over rounded operands, so a softmax entry may land on the other side
    // of a bf16 rounding step than the naive loop's: at most 2^-8 of it, times |v| <= 1.5.
    EXPECT_LT(max_abs_diff(got, want), bf16 ? 2e-3f : 2e-5f);
    EXPECT_LT(max_abs_diff(got_p, want_p), 2e-5f);
    // And without the softmax kept: the same answer, bit for bit.
    EXPECT_EQ(run_matmuls(qkv.data(), c.B, c.T, c.H, c.Dh, p, nullptr), got);
  }
}

// An image's answer and softmax are the same, bit for bit, alone and third in a batch of four, at one thread and
// at two (oneDNN may divide a small batch's products between threads otherwise than a large one's).
TEST_P(MatmulRoad, AnImageAnswersAsInAnyBatch) {
  const Precision p = products();
  const int64_t T = 197, H = 6, Dh = 64, per = T * 3 * H * Dh;
  std::mt19937 rng(3);
  const auto qkv = random_vector(size_t(4 * per), rng);
  const int before = set_threads(0);
  for (int threads : {1, 2}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    set_threads(threads);
    std::vector<float> s4, s1;
    const auto all = run_matmuls(qkv.data(), 4, T, H, Dh, p, &s4);
    const auto third = run_matmuls(qkv.data() + 2 * per, 1, T, H, Dh, p, &s1);
    EXPECT_TRUE(std::equal(third.begin(), third.end(), all.begin() + 2 * T * H * Dh));
    EXPECT_TRUE(std::equal(s1.begin(), s1.end(), s4.begin() + 2 * H * T * T));
  }
  set_threads(before);
}

INSTANTIATE_TEST_SUITE_P(Products, MatmulRoad, ::testing::Values(Precision::F32, Precision::BF16, Precision::Int8),
                         product_name);

// VIT_ATTENTION set for the scope of one test, restored after it.
class ForcedRoad {
 public:
  explicit ForcedRoad(const char* value) {
    if (const char* old = std::getenv("VIT_ATTENTION")) old_ = old;
    ::setenv("VIT_ATTENTION", value, 1);
  }
  ~ForcedRoad() {
    if (old_.empty()) ::unsetenv("VIT_ATTENTION");
    else ::setenv("VIT_ATTENTION", old_.c_str(), 1);
  }

 private:
  std::string old_;
};

TEST(AttentionRoadChoice, TheEnvironmentForcesARoadAndAnythingElseIsRefused) {
  {
    const ForcedRoad r("matmuls");
    EXPECT_EQ(attention_road(1, 197, 3, 64, Precision::F32), AttentionRoad::Matmuls);
  }
  {
    const ForcedRoad r("fused");
    EXPECT_EQ(attention_road(1, 197, 3, 64, Precision::F32), AttentionRoad::Fused);
  }
  const ForcedRoad r("fastest");
  expect_error([] { attention_road(1, 197, 3, 64, Precision::F32); },
               "VIT_ATTENTION=fastest: expected fused, matmuls or timed (the default)");
}

// Timed once per shape: asked again, the same answer (a model's Plans all take one road).
TEST(AttentionRoadChoice, TimedOncePerShape) {
  const ForcedRoad r("timed");
  const AttentionRoad first = attention_road(2, 50, 3, 16, Precision::F32);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(attention_road(2, 50, 3, 16, Precision::F32), first);
}

// A model on either road: the same logits within f32's rounding, f32 and int8, and in int8 an image's logits bit
// for bit alone and inside a batch on the matmul road too; a Plan that keeps its attention gets it from either.
TEST(AttentionRoadChoice, AModelGivesTheSameAnswersOnEitherRoad) {
  TempDir d;
  TinySpec s;
  write_tiny_model(d.path(), s, 3);
  std::mt19937 rng(11);
  const size_t per = size_t(3 * s.img * s.img);
  const auto images = random_vector(per * 3, rng);
  const auto logits_of = [&](ViT& m, const float* first, int64_t B) {
    std::vector<float> out(size_t(B * s.classes));
    m.forward(first, B, out.data());
    return out;
  };
  for (Precision p : {Precision::F32, Precision::Int8}) {
    SCOPED_TRACE(precision_name(p));
    std::vector<float> logits[2];
    for (int road = 0; road < 2; ++road) {
      const ForcedRoad r(road ? "matmuls" : "fused");
      ViT m = ViT::load(d.path(), "", 0, p);
      EXPECT_EQ(m.attention_road(), road ? AttentionRoad::Matmuls : AttentionRoad::Fused);
      logits[road] = logits_of(m, images.data(), 3);
      if (road && p == Precision::Int8) {
        const auto alone = logits_of(m, images.data() + 2 * per, 1);
        EXPECT_TRUE(std::equal(alone.begin(), alone.end(), logits[road].begin() + 2 * s.classes));
      }
      auto plan = m.make_plan(3, ViT::PlanOptions{true});
      std::memcpy(plan->input(), images.data(), images.size() * sizeof(float));
      plan->run();
      const float* a = plan->attention(0);
      double sum = 0;
      for (int64_t j = 0; j < m.config().tokens(); ++j) sum += a[j];
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
    EXPECT_LT(max_abs_diff(logits[0], logits[1]), 1e-4f);
  }
}

}  // namespace
}  // namespace vit::test

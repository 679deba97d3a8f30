// top_k: softmax probabilities, order, ties (lower index first, as torch.topk on CPU) and k beyond the classes.
#include <gtest/gtest.h>

#include <cmath>

#include "vit/topk.h"

namespace vit {
namespace {

TEST(TopK, ProbabilitiesAndOrder) {
  const float logits[4] = {1.f, 3.f, 2.f, 0.f};
  const auto top = top_k(logits, 4, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].index, 1);
  EXPECT_EQ(top[1].index, 2);
  EXPECT_EQ(top[2].index, 0);
  const double sum = std::exp(1.0) + std::exp(3.0) + std::exp(2.0) + 1.0;
  EXPECT_NEAR(top[0].prob, std::exp(3.0) / sum, 1e-7);
  EXPECT_NEAR(top[2].prob, std::exp(1.0) / sum, 1e-7);
}

TEST(TopK, TiesKeepTheLowerIndexFirst) {
  const float logits[5] = {0.5f, 2.f, 0.5f, 2.f, 2.f};
  const auto top = top_k(logits, 5, 4);
  ASSERT_EQ(top.size(), 4u);
  EXPECT_EQ(top[0].index, 1);
  EXPECT_EQ(top[1].index, 3);
  EXPECT_EQ(top[2].index, 4);
  EXPECT_EQ(top[3].index, 0);
  EXPECT_EQ(top[0].prob, top[2].prob);
}

TEST(TopK, KBeyondTheClassesGivesEveryClass) {
  const float logits[3] = {0.f, 0.f, 1.f};
  const auto top = top_k(logits, 3, 10);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].index, 2);
  float sum = 0;
  for (const auto& s : top) sum += s.prob;
  EXPECT_NEAR(sum, 1.f, 1e-6f);
  EXPECT_TRUE(top_k(logits, 3, 0).empty());
}

TEST(TopK, LargeLogitsDoNotOverflow) {
  const float logits[2] = {1000.f, 999.f};
  const auto top = top_k(logits, 2, 2);
  EXPECT_NEAR(top[0].prob, 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
}

}  // namespace
}  // namespace vit

// Attention rollout and per-head query attention (engine/attention_maps) against the definition written
// out naively: full T x T matrices, heads averaged, 0.5 A + 0.5 I renormalised, multiplied through.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "engine/explain/attention_maps.h"
#include "engine/explain/picture.h"
#include "test_util.h"

namespace vit::test {
namespace {

using Matrix = std::vector<double>;  // T x T

// Random softmax rows: [H, T, T], each row summing to 1.
std::vector<float> random_attention(int64_t H, int64_t T, std::mt19937* rng) {
  std::uniform_real_distribution<float> u(0.0f, 4.0f);
  std::vector<float> a(size_t(H * T * T));
  for (int64_t r = 0; r < H * T; ++r) {
    float s = 0;
    for (int64_t j = 0; j < T; ++j) s += (a[size_t(r * T + j)] = std::exp(u(*rng)));
    for (int64_t j = 0; j < T; ++j) a[size_t(r * T + j)] /= s;
  }
  return a;
}

std::vector<float> naive_rollout(const std::vector<std::vector<float>>& blocks, int64_t H, int64_t T, int64_t prefix,
                                 bool class_row) {
  Matrix R(size_t(T * T), 0.0);
  for (int64_t i = 0; i < T; ++i) R[size_t(i * T + i)] = 1;
  for (const auto& a : blocks) {  // R = Â_l R, first block first: R = Â_L ... Â_1
    Matrix m(size_t(T * T), 0.0);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t k = 0; k < T * T; ++k) m[size_t(k)] += a[size_t(h * T * T + k)] / double(H);
    for (int64_t i = 0; i < T; ++i) {
      double s = 0;
      for (int64_t j = 0; j < T; ++j) s += (m[size_t(i * T + j)] = 0.5 * m[size_t(i * T + j)] + (i == j ? 0.5 : 0.0));
      for (int64_t j = 0; j < T; ++j) m[size_t(i * T + j)] /= s;
    }
    Matrix next(size_t(T * T), 0.0);
    for (int64_t i = 0; i < T; ++i)
      for (int64_t k = 0; k < T; ++k)
        for (int64_t j = 0; j < T; ++j) next[size_t(i * T + j)] += m[size_t(i * T + k)] * R[size_t(k * T + j)];
    R = next;
  }
  std::vector<double> row(size_t(T), 0.0);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j)
      if (class_row ? i == 0 : true) row[size_t(j)] += R[size_t(i * T + j)] / (class_row ? 1.0 : double(T));
  const double top = *std::max_element(row.begin() + prefix, row.end());
  std::vector<float> out;
  for (int64_t j = prefix; j < T; ++j) out.push_back(float(row[size_t(j)] / top));
  return out;
}

TEST(AttentionMaps, RolloutMatchesTheDefinition) {
  std::mt19937 rng(7);
  struct Case {
    int64_t H, T, prefix, depth;
  };
  for (const Case c : {Case{3, 17, 1, 4}, Case{2, 18, 2, 3}, Case{4, 9, 1, 1}, Case{1, 16, 0, 5}}) {
    std::vector<std::vector<float>> blocks;
    std::vector<const float*> ptrs;
    for (int64_t l = 0; l < c.depth; ++l) blocks.push_back(random_attention(c.H, c.T, &rng));
    for (const auto& b : blocks) ptrs.push_back(b.data());
    for (const bool class_row : {true, false}) {
      if (class_row && c.prefix == 0) continue;  // a model without a class token explains with the mean row
      const auto got = attention_rollout(ptrs, c.H, c.T, c.prefix, class_row ? Query::ClassToken : Query::MeanOfRows);
      const auto want = naive_rollout(blocks, c.H, c.T, c.prefix, class_row);
      ASSERT_EQ(got.size(), size_t(c.T - c.prefix));
      EXPECT_LE(max_abs_diff(got, want), 1e-5f) << "H " << c.H << " T " << c.T << " depth " << c.depth;
      EXPECT_FLOAT_EQ(*std::max_element(got.begin(), got.end()), 1.0f);
    }
  }
}

TEST(AttentionMaps, QueryAttentionIsTheClassRowPerHead) {
  std::mt19937 rng(3);
  const int64_t H = 3, T = 10, prefix = 2;
  const auto a = random_attention(H, T, &rng);
  const auto got = query_attention(a.data(), H, T, prefix, Query::ClassToken);
  ASSERT_EQ(got.size(), size_t(H * (T - prefix)));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t j = prefix; j < T; ++j)
      EXPECT_EQ(got[size_t(h * (T - prefix) + j - prefix)], a[size_t(h * T * T + j)]) << h << " " << j;
}

TEST(AttentionMaps, NoPatchesIsAnError) {
  const std::vector<float> a(4, 0.5f);
  expect_error([&] { attention_rollout({a.data()}, 1, 2, 2, Query::ClassToken); }, "leave no patch");
}

// The width and height of draw_attention's picture of a grey w x h photo under a flat grid x grid map seen
// through window; the picture holds its three channels.
std::pair<int, int> drawn_size(int w, int h, const Rect& window, int grid, int max_side) {
  const std::vector<float> heat(size_t(grid) * size_t(grid), 0.5f);
  Image photo;
  photo.width = w;
  photo.height = h;
  photo.rgb.assign(size_t(w) * size_t(h) * 3, 160);
  const Image out = draw_attention(photo, window, {heat.data(), grid, grid}, "tench  0.70", max_side);
  EXPECT_EQ(out.rgb.size(), size_t(out.width) * size_t(out.height) * 3);
  return {out.width, out.height};
}

// A photo of extreme proportions keeps them, centred on a picture with room for its caption; an ordinary
// one is drawn at its own proportions, as large as --size allows.
TEST(AttentionPictures, ExtremeProportionsGetAMinimumSize) {
  const auto draw = [](int w, int h, int max_side) {
    return drawn_size(w, h, {0, 0, double(std::min(w, h)), double(std::min(w, h))}, 2, max_side);
  };
  EXPECT_EQ(draw(10000, 50, 1024), std::make_pair(1024, 96));
  EXPECT_EQ(draw(50, 10000, 1024), std::make_pair(320, 1024));
  EXPECT_EQ(draw(10000, 50, 64), std::make_pair(64, 64));  // never past max_side
  EXPECT_EQ(draw(800, 600, 400), std::make_pair(400, 300));
}

// A photo smaller than the model's input (100x100 for a 224x224 model) is drawn enlarged past that input, at
// 448 pixels on its longer side, never past max_side.
TEST(AttentionPictures, SmallPhotosAreEnlargedToAReadableSize) {
  const auto draw = [](int w, int h, int max_side) { return drawn_size(w, h, {0, 0, double(w), double(h)}, 14, max_side); };
  EXPECT_EQ(draw(100, 100, 1024), std::make_pair(448, 448));
  EXPECT_EQ(draw(128, 160, 1024), std::make_pair(358, 448));
  EXPECT_EQ(draw(100, 100, 256), std::make_pair(256, 256));
}

// The map stands out on any photo: where attention is highest the picture is the map's colour whatever the
// photo beneath (a black and a white photo differ there by at most a fifth of the range), where it is lowest
// the photo shows through.
TEST(AttentionPictures, TheHottestPlaceIsTheMapsColourOnAnyPhoto) {
  std::vector<float> heat(16, 0.f);
  heat[1 * 4 + 1] = 1.f;  // cell (1, 1) of 4x4: at (168, 168) of a 448x448 picture, cell (3, 3) at (392, 392)
  const auto pixel = [&](uint8_t grey, int x, int y) {
    Image photo;
    photo.width = photo.height = 224;
    photo.rgb.assign(size_t(224 * 224 * 3), grey);
    const Image out = draw_attention(photo, {0, 0, 224, 224}, {heat.data(), 4, 4}, "", 448);
    EXPECT_EQ(std::make_pair(out.width, out.height), std::make_pair(448, 448));
    const uint8_t* p = out.rgb.data() + (size_t(y) * size_t(out.width) + size_t(x)) * 3;
    return std::vector<int>{p[0], p[1], p[2]};
  };
  const std::vector<int> hot_black = pixel(0, 168, 168), hot_white = pixel(255, 168, 168);
  const std::vector<int> cold_black = pixel(0, 392, 392), cold_white = pixel(255, 392, 392);
  for (int k = 0; k < 3; ++k) {
    EXPECT_LE(std::abs(hot_white[size_t(k)] - hot_black[size_t(k)]), 51) << "channel " << k;
    EXPECT_GE(cold_white[size_t(k)] - cold_black[size_t(k)], 100) << "channel " << k;
  }
  EXPECT_GE(hot_black[0], 200) << "inferno's hottest colour is a bright yellow";
}

// A panorama's caption is sized by its height, not its width: the band leaves the top three quarters of the
// picture as they are without a caption.
TEST(AttentionPictures, APanoramasCaptionLeavesMostOfIt) {
  const std::vector<float> heat{0.f, 1.f, 0.5f, 0.25f, 0.75f, 1.f};
  Image photo;
  photo.width = 3000;
  photo.height = 600;
  photo.rgb.assign(size_t(3000 * 600 * 3), 180);
  const Rect whole{0, 0, 3000, 600};
  const Image with = draw_attention(photo, whole, {heat.data(), 1, 6}, "airliner  0.93", 1024);
  const Image without = draw_attention(photo, whole, {heat.data(), 1, 6}, "", 1024);
  ASSERT_EQ(std::make_pair(with.width, with.height), std::make_pair(1024, 205));
  const size_t kept = size_t(with.width) * size_t(with.height * 3 / 4) * 3;
  EXPECT_TRUE(std::equal(with.rgb.begin(), with.rgb.begin() + long(kept), without.rgb.begin()));
  EXPECT_NE(with.rgb, without.rgb);
}

}  // namespace
}  // namespace vit::test

// What a PrecisionRoad (engine/nn/precision_road.h) decides for a precision: the int8 passes it folds
// around a product give what the plain layers give, bit for bit, and only where the rows really are
// the ones it quantized; which layers take the batch and which run image by image; attention's products.
#include <gtest/gtest.h>

#include <random>

#include "engine/nn/precision_road.h"
#include "engine/nn/rows.h"
#include "reference.h"

namespace vit::test {
namespace {

std::vector<std::string> names(const std::vector<Step>& steps) {
  std::vector<std::string> n;
  for (const Step& s : steps) n.push_back(s.name);
  return n;
}

Program program(std::vector<Step> steps) {
  Program p;
  for (Step& s : steps) p.add(std::move(s));
  return p;
}

std::vector<Step> operator+(std::vector<Step> a, std::vector<Step> b) {
  for (Step& s : b) a.push_back(std::move(s));
  return a;
}

// An int8 MLP on LayerNorm(x), as a block runs it: norm2 and fc1's quantization in one sweep, fc1's pass
// quantizing its rows for fc2, fc2 starting from them; against LayerNorm, fc1, fc2 each quantizing its
// own input. A layer given other rows than those quantized for it quantizes them itself.
TEST(PrecisionRoad, Int8FoldsTheNormAndTheNextLayersQuantizationIntoItsPasses) {
  const int64_t B = 2, T = 50, D = 64, M = 96;
  std::mt19937 rng(5);
  const auto x = random_vector(size_t(B * T * D), rng, 2.f), gamma = random_vector(size_t(D), rng),
             beta = random_vector(size_t(D), rng), w1 = random_vector(size_t(M * D), rng, 0.1f),
             b1 = random_vector(size_t(M), rng), w2 = random_vector(size_t(D * M), rng, 0.05f),
             b2 = random_vector(size_t(D), rng), start = random_vector(size_t(B * T * D), rng);
  Arena store;
  const LayerNormWeights ln = make_layer_norm(store, gamma.data(), beta.data(), D, 1e-6f);
  const LinearWeights fc1 = make_linear(store, w1.data(), b1.data(), D, M, T, Epilogue::Gelu, Precision::Int8);
  const LinearWeights fc2 = make_linear(store, w2.data(), b2.data(), M, D, T, Epilogue::AddToDst, Precision::Int8);
  PrecisionRoad plan(Precision::Int8, B);
  BufferTable t;
  plan.add_scratch(t, T, M, D);
  const Arena scratch = t.carve();
  std::vector<float> h(size_t(B * T * D)), mlp(size_t(B * T * M)), y = start;
  std::vector<Step> steps = plan.norm_linear("norm2", ln, x.data(), h.data(), "fc1", fc1, T, mlp.data(), &fc2);
  steps = std::move(steps) + plan.linear("fc2", fc2, T, mlp.data(), y.data());
  EXPECT_EQ(names(steps), (std::vector<std::string>{"norm2", "fc1", "fc1.dequantize", "fc2", "fc2.dequantize"}));
  program(std::move(steps)).run();

  // Apart: the LayerNorm as the fused sweep computes it, then each layer quantizing its own input.
  std::vector<float> h_rows(h.size()), mlp_apart(mlp.size()), y_apart = start;
  for (int64_t r = 0; r < B * T; ++r)
    row_kernels().layer_norm(x.data() + r * D, D, gamma.data(), beta.data(), 1e-6f, h_rows.data() + r * D, nullptr,
                             nullptr);
  PrecisionRoad apart(Precision::Int8, B);
  BufferTable ta;
  apart.add_scratch(ta, T, M, D);
  const Arena scratch_apart = ta.carve();
  steps = apart.linear("fc1", fc1, T, h_rows.data(), mlp_apart.data());
  steps = std::move(steps) + apart.linear("fc2", fc2, T, mlp_apart.data(), y_apart.data());
  EXPECT_EQ(names(steps), (std::vector<std::string>{"fc1.quantize", "fc1", "fc1.dequantize", "fc2.quantize", "fc2",
                                                    "fc2.dequantize"}));
  program(std::move(steps)).run();
  EXPECT_EQ(h, h_rows);
  EXPECT_EQ(mlp, mlp_apart);
  EXPECT_EQ(y, y_apart);

  // fc1 quantized for fc2, but fc2 then given other rows: it quantizes those.
  std::vector<float> other = mlp_apart, y_other = start;
  steps = plan.linear("fc1", fc1, T, h_rows.data(), mlp.data(), &fc2);
  steps = std::move(steps) + plan.linear("fc2", fc2, T, other.data(), y_other.data());
  EXPECT_EQ(names(steps).back(), "fc2.dequantize");
  EXPECT_EQ(names(steps)[size_t(names(steps).size() - 3)], "fc2.quantize");
  program(std::move(steps)).run();
  EXPECT_EQ(y_other, y_apart);
}

// f32 takes the batch in one product; a bf16 or int8 model runs its layers that are not int8 (an f32
// patch embedding or head) image by image, each image's answer what it gives alone; int8 layers take
// the batch.
TEST(PrecisionRoad, LayersTakeTheBatchOrEachImageAsThePrecisionSays) {
  const int64_t B = 3, T = 10, K = 32, N = 24;
  std::mt19937 rng(8);
  const auto x = random_vector(size_t(B * T * K), rng), w = random_vector(size_t(N * K), rng, 0.2f),
             b = random_vector(size_t(N), rng);
  Arena store;
  const LinearWeights f32 = make_linear(store, w.data(), b.data(), K, N, T, Epilogue::None, Precision::F32);
  const LinearWeights int8 = make_linear(store, w.data(), b.data(), K, N, T, Epilogue::None, Precision::Int8);
  std::vector<float> alone(size_t(B * T * N));
  for (int64_t i = 0; i < B; ++i)
    program(linear_steps("p", f32, 1, T, x.data() + i * T * K, alone.data() + i * T * N)).run();
  for (const Precision p : {Precision::F32, Precision::BF16, Precision::Int8}) {
    PrecisionRoad plan(p, B);
    BufferTable t;
    plan.add_scratch(t, T, K, N);
    const Arena scratch = t.carve();
    std::vector<float> y(size_t(B * T * N));
    const std::vector<Step> steps = plan.linear("p", f32, T, x.data(), y.data());
    EXPECT_EQ(steps.size(), p == Precision::F32 ? 1u : size_t(B)) << precision_name(p);
    program(plan.linear("p", f32, T, x.data(), y.data())).run();
    if (p != Precision::F32) EXPECT_EQ(y, alone) << precision_name(p);
    if (p == Precision::Int8)
      EXPECT_EQ(names(plan.linear("q", int8, T, x.data(), y.data())),
                (std::vector<std::string>{"q.quantize", "q", "q.dequantize"}));
  }
}

// Each precision's attention asks for products of its own precision (attention_kernels falls back to f32
// where the CPU lacks them).
TEST(PrecisionRoad, AttentionTakesProductsOfItsOwnPrecision) {
  EXPECT_EQ(attention_products(Precision::F32), Precision::F32);
  EXPECT_EQ(attention_products(Precision::BF16), Precision::BF16);
  EXPECT_EQ(attention_products(Precision::Int8), Precision::Int8);
}

// The oneDNN matmul road has no mask: attention asked of it with a bias, lengths or a causal mask is refused
// (the fused road takes all three).
TEST(PrecisionRoad, TheMatmulRoadRefusesWhatOnlyTheFusedKernelMasks) {
  const int64_t B = 2, T = 5, H = 1, Dh = 8;
  std::vector<float> qkv(size_t(B * T * 3 * H * Dh)), heads(1 << 12), out(size_t(B * T * H * Dh)), bias(size_t(H * T * T));
  const std::vector<int32_t> lengths(static_cast<size_t>(B), int32_t(T));
  const PrecisionRoad plan(Precision::F32, B);
  const auto ask = [&](const float* b, const int32_t* l, bool causal) {
    plan.attention("attn", B, T, H, Dh, qkv.data(), heads.data(), nullptr, out.data(), b, l, AttentionRoad::Matmuls,
                   causal);
  };
  for (int i = 0; i < 3; ++i)
    expect_error([&] { ask(i == 0 ? bias.data() : nullptr, i == 1 ? lengths.data() : nullptr, i == 2); },
                 "attn: internal: attention through oneDNN matmuls given a bias, lengths or a causal mask");
  EXPECT_FALSE(plan.attention("attn", B, T, H, Dh, qkv.data(), heads.data(), nullptr, out.data(), nullptr,
                              lengths.data(), AttentionRoad::Fused, true)
                   .empty());
}

}  // namespace
}  // namespace vit::test

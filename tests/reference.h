// Naive scalar references for the oneDNN ops and for a whole ViT forward, written straight from the
// definitions (and timm's VisionTransformer) with double accumulation, for the tests to compare against.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/nn/linear.h"
#include "test_util.h"

namespace vit::test {

// y[M, N] = x[M, K] W[N, K]^T + b
std::vector<float> ref_linear(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
                              int64_t M, int64_t K, int64_t N);
std::vector<float> ref_layer_norm(const std::vector<float>& x, const std::vector<float>& g, const std::vector<float>& b,
                                  int64_t M, int64_t D, float eps);
float ref_gelu(float x);
float ref_quick_gelu(float x);  // x * sigmoid(1.702 x), timm's QuickGELU
float ref_gelu_tanh(float x);   // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), torch's approximate='tanh'
// y after the linear layer's epilogue ep, in place: an activation, or (AddToDst) start added.
void ref_epilogue(std::vector<float>& y, Epilogue ep, const std::vector<float>& start);
// qkv [B, T, 3, H, Dh] -> out [B, T, H*Dh]
// bias: [H, T, T] added to every image's scaled scores before the softmax (none when empty).
std::vector<float> ref_attention(const std::vector<float>& qkv, int64_t B, int64_t T, int64_t H, int64_t Dh,
                                 const std::vector<float>& bias = {});
// images [B, 3, S, S] -> logits [B, C], the tiny model of TinySpec
std::vector<float> ref_vit_forward(const TensorMap& w, const TinySpec& s, const std::vector<float>& images, int64_t B);

}  // namespace vit::test

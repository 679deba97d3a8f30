// The PrecisionRoad of precision_road.h: a precision's choices for linear layers and attention, turned
// into the steps of linear.h and ops.h.
#include "engine/nn/precision_road.h"

#include "vit/error.h"

namespace vit {

Precision attention_products(Precision p) { return p; }

void PrecisionRoad::add_scratch(BufferTable& table, int64_t T, int64_t max_K, int64_t max_add_N) {
  add_linear_scratch(table, &scratch_, p_, B_, T, max_K, max_add_N);
}

bool PrecisionRoad::by_image(const LinearWeights& lw) const {
  return p_ != Precision::F32 && lw.precision != Precision::Int8;
}

LinearOutput PrecisionRoad::output_for(const LinearWeights& lw, const LinearWeights* next, float* dst) {
  quantized_rows_ = nullptr;
  quantized_for_ = nullptr;
  if (!next || !can_quantize_for(lw, *next)) return LinearOutput::F32;
  quantized_rows_ = dst;
  quantized_for_ = next;
  return LinearOutput::Quantized;
}

std::vector<Step> PrecisionRoad::product(const std::string& name, const LinearWeights& lw, int64_t rows,
                                         const float* src, float* dst, LinearInput in, LinearOutput out) const {
  if (!by_image(lw)) return linear_steps(name, lw, B_, rows, src, dst, scratch_, in, out);
  std::vector<Step> steps;
  for (int64_t b = 0; b < B_; ++b)
    for (Step& s : linear_steps(name, lw, 1, rows, src + b * rows * lw.K, dst + b * rows * lw.N, scratch_, in, out))
      steps.push_back(std::move(s));
  return steps;
}

std::vector<Step> PrecisionRoad::linear(const std::string& name, const LinearWeights& lw, int64_t rows,
                                        const float* src, float* dst, const LinearWeights* next) {
  const LinearInput in = quantized_for_ == &lw && quantized_rows_ == src ? LinearInput::Quantized : LinearInput::F32;
  return product(name, lw, rows, src, dst, in, output_for(lw, next, dst));
}

std::vector<Step> PrecisionRoad::norm_linear(const std::string& norm_name, const LayerNormWeights& ln,
                                             const float* src, float* normed, const std::string& name,
                                             const LinearWeights& lw, int64_t rows, float* dst,
                                             const LinearWeights* next) {
  const LinearOutput out = output_for(lw, next, dst);
  if (lw.precision == Precision::Int8 && ln.kind == NormKind::Layer) {  // an RMSNorm runs as a step of its own
    std::vector<Step> steps{norm_quantize_step(norm_name, ln, lw, B_, rows, src, normed, scratch_)};
    for (Step& s : product(name, lw, rows, normed, dst, LinearInput::Quantized, out)) steps.push_back(std::move(s));
    return steps;
  }
  std::vector<Step> steps{layer_norm_step(norm_name, ln, B_ * rows, src, normed)};
  for (Step& s : product(name, lw, rows, normed, dst, LinearInput::F32, out)) steps.push_back(std::move(s));
  return steps;
}

std::vector<Step> PrecisionRoad::attention(const std::string& name, int64_t images, int64_t T, int64_t H, int64_t Dh,
                                           const float* qkv, float* heads, float* scores, float* out,
                                           const float* bias, const int32_t* lengths, AttentionRoad road,
                                           bool causal) const {
  if (road == AttentionRoad::Matmuls) {
    if (bias || lengths || causal)
      throw Error(name, "internal: attention through oneDNN matmuls given a bias, lengths or a causal mask");
    return attention_matmul_steps(name, images, T, H, Dh, qkv, heads, scores, out, attention_products(p_));
  }
  return attention_steps(name, images, T, H, Dh, qkv, heads, scores, out, bias, attention_products(p_), lengths, causal);
}

}  // namespace vit

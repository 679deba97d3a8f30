// How a forward pass runs at one precision on this CPU, decided here once for every model: which images a
// linear layer's product takes, the scratch beside the layers, the int8 passes folded around a product,
// and the operands of attention's products. A model says which layer reads what; this says how.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/nn/linear.h"
#include "engine/nn/ops.h"
#include "vit/precision.h"

namespace vit {

// What attention's two products at precision p ask for (taken where the CPU has those kernels, else f32):
// p's own. int8 ones (avx512_vnni) cost int8's agreement with f32 nothing on the sample photos
// (docs/PERFORMANCE.md).
Precision attention_products(Precision p);

// One Plan's layers at the model's precision p, for B images:
// - F32: each layer one product over the batch, bias and activation fused.
// - BF16: every layer but an int8 one runs each image on its own, so that an image's answer never depends
//   on the images beside it; a bf16 layer's input is converted in the scratch.
// - Int8: an int8 layer takes the whole batch (each row quantized on its own grid into the scratch and the
//   s32 sums exact, so an image's answer does not depend on its batch either); the other layers of an int8
//   model (f32: the patch embedding, the head) run each image on its own as in bf16. A LayerNorm before an
//   int8 layer is normalized and quantized in one sweep; an int8 layer read by another int8 layer quantizes
//   its rows for it in its own pass.
// Layers of another precision than p (a model's f32 patch embedding and head) run as their weights say.
class PrecisionRoad {
 public:
  PrecisionRoad() = default;
  PrecisionRoad(Precision p, int64_t B) : p_(p), B_(B) {}
  Precision precision() const { return p_; }

  // The scratch the layers use, for images of T rows, layer inputs at most max_K wide and results added
  // into their destination at most max_add_N wide; the table's carve() places it, so this object must not
  // move until then. Nothing for f32.
  void add_scratch(BufferTable& table, int64_t T, int64_t max_K, int64_t max_add_N);

  // The steps of dst = layer(src), for B images of `rows` rows. next: the layer that reads dst next, with no
  // step between that writes to dst (null if none): an int8 layer then quantizes dst for it while writing
  // it, and the next call, for that layer on dst, starts from those rows.
  std::vector<Step> linear(const std::string& name, const LinearWeights& lw, int64_t rows, const float* src,
                           float* dst, const LinearWeights* next = nullptr);
  // The steps of normed = LayerNorm(src), then dst = layer(normed) (normed is written whatever the precision).
  std::vector<Step> norm_linear(const std::string& norm_name, const LayerNormWeights& ln, const float* src,
                                float* normed, const std::string& name, const LinearWeights& lw, int64_t rows,
                                float* dst, const LinearWeights* next = nullptr);
  // attention_steps (ops.h) for `images` images, with the products this precision takes; lengths: the
  // images' own lengths when they are padded to T (NaFlex, texts), else null. road: attention_road's choice
  // (Matmuls takes no bias, lengths or causal mask; heads then holds attention_matmul_floats). causal: CLIP
  // text's mask.
  std::vector<Step> attention(const std::string& name, int64_t images, int64_t T, int64_t H, int64_t Dh,
                              const float* qkv, float* heads, float* scores, float* out, const float* bias,
                              const int32_t* lengths = nullptr, AttentionRoad road = AttentionRoad::Fused,
                              bool causal = false) const;

 private:
  // Whether a layer runs image by image (bf16 and int8 models' layers that are not int8).
  bool by_image(const LinearWeights& lw) const;
  // Where a layer's output goes: quantized for `next` too when that is int8's to do.
  LinearOutput output_for(const LinearWeights& lw, const LinearWeights* next, float* dst);
  std::vector<Step> product(const std::string& name, const LinearWeights& lw, int64_t rows, const float* src,
                            float* dst, LinearInput in, LinearOutput out) const;

  Precision p_ = Precision::F32;
  int64_t B_ = 1;
  LinearScratch scratch_;
  // The rows the last layer left quantized in the scratch, and the layer they were quantized for.
  const float* quantized_rows_ = nullptr;
  const LinearWeights* quantized_for_ = nullptr;
};

}  // namespace vit

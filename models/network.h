// The Vision Transformer, mirroring timm's VisionTransformer.forward: patch embedding, class (and
// distillation) token, position table, L pre-norm blocks, final norm, pooling, head. Weights are
// loaded and reordered once; each batch size gets its own prepared Program and activation arena.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/nn/linear.h"
#include "engine/nn/ops.h"
#include "engine/nn/precision_road.h"
#include "engine/preprocess/position_tables.h"
#include "vit/model_kinds.h"
#include "vit_config.h"

namespace vit {

class RoundedWeights;
class TensorSource;

// The activation fused into an MLP's fc1 (and the attention pool's): SwiGLU's comes after fc1, on its halves (None).
Epilogue activation_epilogue(Activation a);

// Which precision a layer runs at: the model's (the blocks' linear layers, 99% of the FLOPs), or always
// f32 (the patch embedding takes raw pixels, the attention pool and heads give the outputs: docs/PERFORMANCE.md).
enum class PrecisionClass { Model, F32 };

struct BlockWeights {
  LayerNormWeights norm1, norm2;  // [D]
  LinearWeights qkv;              // [3D, D]
  LinearWeights proj;             // [D, D]
  LinearWeights fc1;              // [M, D]; SwiGLU: [2M, D], the gate's rows then the values'
  LinearWeights fc2;              // [D, M]
  LayerNormWeights mlp_norm;      // [M]: the norm inside the MLP (mlp.norm)
  Stored<float> rel_pos_table;    // [R, H]: BEiT's relative position bias table (attn.rel_pos_window)
  LayerNormWeights attn_norm;     // [D]: the norm on attention's output before proj (ViTConfig::attn.norm)
};

class ViT {
  struct PlanBuilder;  // builds a Plan's steps (network.cpp)

 public:
  // model: a .safetensors file or the folder holding model.safetensors (and config.json, and for
  // Hugging Face models perhaps preprocessor_config.json); config_path: a config.json that overrides
  // the one beside the weights ("" for none); img_size: run at S x S instead of the model's own size,
  // the position table resampled as timm does (0 for the model's size).
  // precision: how the linear layers compute (weights converted or quantized here, at load).
  // arch: the timm architecture of a checkpoint in timm's names, for what its tensors cannot say ("" for none:
  // then a config must say it, resolve_config).
  static ViT load(const std::string& model, const std::string& config_path = "", int64_t img_size = 0,
                  Precision precision = Precision::F32, const std::string& arch = "");
  // Random weights of a given shape (for benchmarks and tests).
  static ViT random(const ViTConfig& cfg, uint32_t seed = 0, Precision precision = Precision::F32);
  // The parameters of a model of this config as timm counts them (the sum of its tensors' numel): the tensors
  // the loader takes, walked over their shapes alone, with nothing built.
  static int64_t parameters(const ViTConfig& cfg);

  const ViTConfig& config() const { return cfg_; }
  // Pool another way than the checkpoint does (timm's reset_classifier(global_pool=...)): Plans made
  // afterwards use it. Token pooling needs a class token.
  void set_pool(Pool pool);
  // A NaFlex model's budget of patches per image (--max-patches): Plans made afterwards pad each image's
  // patches to it. Refused for other models, whose input is a fixed square.
  void set_max_patches(int64_t n);
  // One decoded image as this model's input (Plan::input() holds B of them, input_floats() each): timm's eval
  // transform, or NaFlex's (its patches). Returns its grid of patches: the model's, or the NaFlex grid the
  // image got, which the Plan running it is told (Plan::set_grid).
  PatchGrid prepare_input(const Image& image, float* dst) const;
  Precision precision() const { return precision_; }
  const std::string& source() const { return source_; }
  // The int8.safetensors of a folder `vit quantize` made ("" for none); its weights are used at int8.
  const std::string& int8_source() const { return int8_source_; }

  // A named intermediate tensor of a forward pass (forward_with_taps lists them), while it is in the arena.
  using TapFn = std::function<void(const std::string& name, const float* data, int64_t count)>;

  // Everything one batch size needs to run: its oneDNN primitives, bound to an activation arena.
  // Built from a loaded ViT (which must outlive it); independent Plans may run on different threads.
  class Plan {
   public:
    int64_t batch() const { return B_; }
    // [B, 3, H, W], or NaFlex's [B, max_patches, P * P * C]: ViT::prepare_input straight into it.
    float* input() const { return act_.input; }
    // Image b's grid of patches, as prepare_input returned it: a NaFlex model runs each image at its own (set for
    // every image before run()); any other model's is its fixed grid. Throws for a grid outside the model's.
    void set_grid(int64_t b, PatchGrid grid);
    PatchGrid grid_of(int64_t b) const { return grids_.empty() ? fixed_grid_ : grids_[size_t(b)]; }
    const float* run() const;                    // one forward pass; returns logits [B, C] in the arena
    // The same pass, reporting the named intermediate tensors forward_with_taps lists as it goes.
    const float* run(const TapFn& tap) const;
    const float* logits() const { return act_.logits; }  // [B, C]: the last run's
    // After run(): what timm's forward_features returns, [B, T, D] (final-normed where the model has a
    // final norm), and forward_head(..., pre_logits=True), [B, D] (pooled, then fc_norm where there is one).
    const float* tokens() const { return tokens_; }
    const float* features() const { return features_; }
    const Program& program() const { return program_; }
    // With PlanOptions::keep_attention, after run(): block l's softmax(QK^T / sqrt(Dh)), [B, H, T, T].
    const float* attention(int64_t block) const;
    // After run(), a NaFlex model's: image b's tokens (prefix and patches; the rest of its T rows are padding).
    int64_t tokens_of(int64_t b) const { return lengths_.empty() ? 0 : lengths_[size_t(b)]; }

   private:
    friend class ViT;
    friend struct ViT::PlanBuilder;
    // One forward pass's activations. Sized and placed by one table (activation_table in network.cpp).
    struct Activations {
      float* input;        // [B, 3, H, W]
      float* patches;      // [B*N, C*P*P]
      float* patch_embed;  // [B*N, D]
      float* x;            // [B, T, D] residual stream
      float* h;            // [B, T, D] normalized
      float* attn;         // [B, T, D] heads concatenated
      float* qkv;          // [B, T, 3, H, Dh]
      float* heads;        // the c images of one attention pass: their packed heads, or the matmul road's work
      float* scores;       // [c, H, T, T]; [L, B, H, T, T] when the Plan keeps the attention
      float* mlp;          // [B, T, M]
      float* mlp_gate;     // [B, T, 2M]: SwiGLU's fc1 output, the gate then the values
      float* rel_bias;     // [H, T, T]: the block's relative position bias, looked up (BEiT)
      float* pooled;       // [B, D]
      float* pooled_norm;  // [B, D]
      float* pooled_dist;  // [B, D]
      float* pool_scores;  // [B, H, T]: the attention pool's (SigLIP)
      float* logits;       // [B, C]
      float* logits_dist;  // [B, C]
    };
    struct Tap {
      size_t after_step;
      std::string name;
      const float* data;
      int64_t count;
    };
    int64_t B_ = 0, input_floats_ = 0;  // the batch, and one image's input floats
    int64_t prefix_ = 0;                // the tokens before the patches
    bool keeps_attention_ = false;
    int64_t depth_ = 0, scores_per_image_ = 0;  // for attention(): L, and H T^2
    Arena arena_;
    Activations act_{};
    PrecisionRoad precision_;  // how its layers and attention run at the model's precision
    Program program_;
    const float* tokens_ = nullptr;
    const float* features_ = nullptr;
    std::vector<Tap> taps_;
    PatchGrid fixed_grid_;          // a fixed-size model's grid
    int64_t budget_ = 0;            // NaFlex: the patches an image's grid may hold (max_patches)
    std::vector<PatchGrid> grids_;  // NaFlex: each image's grid (set_grid), {0, 0} until it is set
    std::vector<int32_t> lengths_;  // NaFlex: each image's tokens, its prefix and its grid's patches
  };
  struct PlanOptions {
    // Keep every block's attention probabilities, in f32 and over the whole batch at once (else the
    // attention runs a few images at a time, so its scores stay in cache, and each block overwrites them).
    bool keep_attention = false;
  };
  // Primitives are created for the calling thread's OpenMP thread count (set_threads).
  std::unique_ptr<Plan> make_plan(int64_t B, const PlanOptions& options) const;
  std::unique_ptr<Plan> make_plan(int64_t B) const { return make_plan(B, PlanOptions{}); }

  // Convenience for one thread: a Plan per batch size kept inside the model.
  Plan& plan(int64_t B);
  // images [B, 3, H, W] (preprocessed) -> logits [B, C].
  void forward(const float* images, int64_t B, float* logits);

  // forward that also reports named intermediate tensors, as timm's forward hooks would see them:
  // input, patch_embed, embed, blocks.{i}.norm1, blocks.{i}.norm2, blocks.{i}.mlp.fc1_gelu (fc1 is fused with
  // its GELU), blocks.{i}, norm, logits; and every linear layer's f32 input as {layer}.input (blocks.{i}.attn.qkv.input,
  // ..., head.input), which `vit quantize` calibrates from.
  void forward_with_taps(const float* images, int64_t B, const TapFn& tap);

  // The linear layers, named as the checkpoint names them (the blocks' from block 0: every block's
  // layers share their shapes, and with them their form and path).
  std::vector<std::pair<std::string, const LinearWeights*>> linear_layers() const;
  // Every block's linear layers by full name (blocks.0.attn.qkv, ...): the ones at the model's precision.
  std::vector<std::pair<std::string, const LinearWeights*>> block_linear_layers() const;
  // The floating-point operations (2 x multiply-adds) of a forward pass over `images` images, from the layers'
  // shapes and the config, no plan built: what a plan's Program::flops() sums step by step.
  double flops(int64_t images) const;
  // How attention's two products run on this CPU: the fused kernel's ISA and its operands' precision.
  std::string attention_summary() const;
  size_t weight_bytes() const;  // resident size of the weights (after any conversion or quantization)
  // Images per attention pass at batch B: as many as keep their scores within about a core's L2.
  int64_t attention_chunk(int64_t B) const;
  // The road attention takes at every batch size (attention_road in ops.h), chosen at load.
  AttentionRoad attention_road() const { return attention_road_; }

 private:
  ViT() = default;
  struct WeightLoader;  // fills the weights below from a TensorSource (network.cpp)
  void load_weights(TensorSource& src, RoundedWeights* rounded);
  // attention_road_ for this model: the road that times faster at a batch of 8's attention pass, one for
  // every batch size, so that an image's answer does not depend on its batch; always the fused kernel where
  // the model has a bias on its scores (BEiT) or images of their own lengths (NaFlex), which the matmuls
  // do not take.
  void choose_attention_road();
  // How a Plan at batch B divides its work, decided once by batch_layout and used both to size its
  // activations and to build its steps, so the two cannot disagree.
  struct BatchLayout {
    int64_t B = 0;
    bool keep_attention = false;
    // The attention passes in order, {first image, images}: chunks of images whose packed keys and
    // values stay in cache (attention_chunk).
    std::vector<std::pair<int64_t, int64_t>> attention_passes;
    int64_t largest_pass() const;
  };
  BatchLayout batch_layout(int64_t B, const PlanOptions& o) const;
  BufferTable activation_table(const BatchLayout& l, Plan* plan) const;

  ViTConfig cfg_;
  Precision precision_ = Precision::F32;
  AttentionRoad attention_road_ = AttentionRoad::Fused;
  std::string source_, int8_source_;
  Arena store_;                       // the memory every weight below lives in (declared first: dies last)
  LinearWeights patch_embed_;         // [D, C*P*P]
  Stored<float> cls_token_;           // [D] (empty without a class token)
  Stored<float> dist_token_;          // [D] (empty unless distilled)
  Stored<float> reg_token_;           // [R, D] (empty without register tokens)
  Stored<float> pos_embed_;           // [pos_len, D], resampled to the input grid
  std::shared_ptr<PositionTables> pos_tables_;  // NaFlex: the table resized per grid, kept for the next image
  Stored<int32_t> rel_pos_index_;     // [T, T]: every block's row of its relative position table (BEiT)
  Stored<float> rope_sin_, rope_cos_;  // [N, Dh / 2]: the rotary angles of each patch (EVA-02)
  std::vector<BlockWeights> blocks_;
  LayerNormWeights patch_norm_;       // AIMv2's norm right after the patch embedding (cfg_.patch_norm)
  LayerNormWeights norm_pre_;         // CLIP's norm before the blocks (cfg_.norm_pre)
  LayerNormWeights norm_;             // final norm over tokens (cfg_.pool.final_norm)
  LayerNormWeights fc_norm_;          // norm after pooling (cfg_.pool.fc_norm)
  // timm's AttentionPoolLatent (SigLIP's MAP head), cfg_.pool.attn().
  struct AttentionPool {
    Stored<float> q;             // [D]: q(latent), computed at load (the latent is a constant)
    LinearWeights kv;            // [2D, D]
    LinearWeights proj;          // [D, D]
    LayerNormWeights norm;       // [D]
    LinearWeights fc1, fc2;      // [Mp, D], [D, Mp]
  } attn_pool_;
  LinearWeights head_, head_dist_;    // [C, D] (none when C = 0)
  std::map<int64_t, std::unique_ptr<Plan>> plans_;  // for plan()
};

}  // namespace vit

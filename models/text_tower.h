// The text tower of a CLIP or SigLIP checkpoint, as open_clip's TextTransformer and transformers' CLIPTextTransformer
// and SiglipTextTransformer build it: token and position embeddings, the pre-norm blocks the image towers run (under
// CLIP's causal mask; SigLIP's attend over the whole padded context), the final LayerNorm, the pooled row, the
// projection. Weights come from the same file as the image tower's; its tokenizer from the files beside it.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/nn/linear.h"
#include "engine/nn/ops.h"
#include "engine/nn/precision_road.h"
#include "engine/text/tokenizer.h"
#include "text_config.h"
#include "network.h"

namespace vit {

class TextTower {
  struct Loader;   // fills the weights from a checkpoint (text_tower.cpp)
  struct Builder;  // builds a Plan's steps

 public:
  // model: a model folder, or its weights file (an OpenCLIP open_clip_model.safetensors with open_clip_config.json,
  // a Hugging Face CLIPModel or SiglipModel model.safetensors with config.json); tokenizer_folder: where the
  // tokenizer's files are when not beside the weights. precision: the blocks' linear layers' (as ViT::load).
  static TextTower load(const std::string& model, Precision precision = Precision::F32,
                        const std::string& tokenizer_folder = "");

  const TextConfig& config() const { return cfg_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  Precision precision() const { return precision_; }
  int64_t embedding_size() const { return cfg_.embed; }
  const std::string& source() const { return source_; }
  // How the model scores an image against a text (its forward): logit_scale.exp() * cosine (+ logit_bias, which
  // SigLIP's have and whose scores are each a sigmoid's); NaN when the checkpoint holds no logit_scale.
  float logit_scale() const { return logit_scale_; }
  const std::optional<float>& logit_bias() const { return logit_bias_; }

  // The texts' tokens, as the checkpoint's reference tokenizer makes them (Tokenizer::encode); a text it refuses
  // (not UTF-8) is named by its place: "text 3: not valid UTF-8: ...".
  std::vector<Tokens> tokenize(const std::vector<std::string>& texts) const;
  // The row of each sequence the embedding is read from (the config's pooling over its ids), and so the tokens it
  // needs: under a causal mask the tokens after that row change nothing of it.
  int64_t pooled_row(const Tokens& t) const;

  // Everything one batch of B texts of at most T tokens needs: its primitives, bound to its activations.
  class Plan {
   public:
    int64_t batch() const { return B_; }
    int64_t tokens() const { return T_; }
    // Sets the texts' ids (each one's first T, the rest not needed: pooled_row < T under the causal mask), runs,
    // and returns the embeddings [B, E], in the Plan's memory until the next run.
    const float* run(const std::vector<Tokens>& texts) const;

   private:
    friend class TextTower;
    friend struct TextTower::Builder;
    struct Activations {
      int32_t* ids;      // [B, T]
      int32_t* lengths;  // [B]: the rows each text runs (causal: its pooled row + 1; else T)
      int32_t* pooled_at;  // [B]
      float* x;          // [B, T, D] residual stream
      float* h;          // [B, T, D] normalized
      float* qkv;        // [B, T, 3D]
      float* heads;      // attention's packed keys and values, for the largest pass
      float* attn;       // [B, T, D]
      float* mlp;        // [B, T, M]
      float* pooled;     // [B, D]
      float* pooled_norm;  // [B, D]
      float* out;        // [B, E]
    };
    TextConfig cfg_;
    int64_t B_ = 0, T_ = 0;
    Arena arena_;
    Activations act_{};
    PrecisionRoad precision_;
    Program program_;
  };
  // T: the tokens per text the Plan runs (the context for an unmasked tower, whose every row counts).
  std::unique_ptr<Plan> make_plan(int64_t B, int64_t T) const;
  // Texts' embeddings [B, E], through a Plan of the batch's size and its longest needed tokens (kept for the next).
  std::vector<float> embed(const std::vector<Tokens>& texts);

 private:
  TextTower() = default;
  // Texts per attention pass at B texts: their packed keys and values about 1 MiB a thread, as ViT's.
  int64_t attention_chunk(int64_t B, int64_t T) const;

  TextConfig cfg_;
  Precision precision_ = Precision::F32;
  std::string source_;
  float logit_scale_ = 0;
  std::optional<float> logit_bias_;
  std::unique_ptr<Tokenizer> tokenizer_;
  Arena store_;                     // every weight below (declared first: dies last)
  Stored<float> token_embedding_;   // [V, D]
  Stored<float> position_embedding_;  // [context, D]
  std::vector<BlockWeights> blocks_;
  LayerNormWeights norm_;           // [D]: ln_final, final_layer_norm
  LinearWeights proj_;              // [E, D] (none for TextProjection::None)
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<Plan>> plans_;  // for embed()
};

}  // namespace vit

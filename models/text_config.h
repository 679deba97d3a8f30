// What a checkpoint's text tower is: its shape from the tensors, the rest (heads, activation, mask, pooling, its
// tokenizer) from the layout's config as the layout's own code reads it: OpenCLIP's open_clip_config.json (text_cfg,
// quick_gelu), Hugging Face's CLIPModel and SiglipModel config.json (text_config). Variants the engine does not run
// are refused by name.
#pragma once
#include <cstdint>
#include <string>

#include "engine/text/tokenizer.h"
#include "families.h"
#include "layouts.h"

namespace vit {

class Checkpoint;
struct ModelFiles;

// Which row of the last norm's output is the text's: the first position of the largest token id (open_clip's
// text_global_pool 'argmax', CLIPTextTransformer when eos_token_id is 2: the end-of-text token is the largest id),
// the first position of the end-of-text id (CLIPTextTransformer's other configs), the first or the last position.
enum class TextPool { Argmax, FirstEos, First, Last };
const char* text_pool_name(TextPool p);

// How the pooled row becomes the embedding: as it is (open_clip's proj_type 'none'), times a matrix [D, E] (open_clip's
// text_projection Parameter: x @ text_projection), or a linear layer [E, D] (open_clip's with proj_bias,
// CLIPModel's text_projection without a bias, SiglipTextTransformer's head with one).
enum class TextProjection { None, Matrix, Linear };

struct TextConfig {
  Layout layout = Layout::OpenClip;
  std::string family;         // "CLIP", "EVA-02 CLIP", "SigLIP", "SigLIP 2": what it is, for people
  int64_t vocab = 49408;      // V
  int64_t context = 77;       // the position table's rows: the most tokens a text has
  int64_t width = 512;        // D
  int64_t depth = 12;         // L
  int64_t heads = 8;          // H
  int64_t mlp = 2048;         // M
  int64_t embed = 512;        // E: the embedding's width
  Activation act = Activation::Gelu;
  float eps = 1e-5f;          // every LayerNorm's
  bool causal = true;         // CLIP's causal mask; SigLIP's towers attend over the whole padded context
  TextPool pool = TextPool::Argmax;
  int32_t eos_id = 0;         // TextPool::FirstEos's token
  TextProjection projection = TextProjection::Matrix;
  bool proj_bias = false;     // TextProjection::Linear with a bias
  TokenizerSpec tokenizer;
  int64_t head_dim() const { return width / heads; }
  std::string summary() const;  // "CLIP text: 12 blocks of width 512, 8 heads, ..."
};

// The row of a text's sequence (its context ids) that `c`'s pooling reads.
int64_t pooled_row(const TextConfig& c, const Tokens& t);

// The text tower's config from a checkpoint read as Tower::Text (its tensors' shapes) and the files beside it;
// tokenizer_folder: where its tokenizer's files are ("" for the model's folder).
TextConfig resolve_text_config(const Checkpoint& ck, const ModelFiles& files, const std::string& tokenizer_folder);

}  // namespace vit

// What a ViT is: its shape (read from the checkpoint's tensors), the few things tensors cannot say
// (heads, block order, pooling, eps, rotary embedding), and its preprocessing: from the config.json beside the
// weights, --config, or timm's own for the architecture --arch names; a checkpoint with none of them is refused.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "engine/preprocess/naflex.h"
#include "engine/preprocess/preprocess.h"
#include "families.h"
#include "vit/limits.h"

namespace vit {

class Checkpoint;

// Heads for a width in a model whose code makes one head per 64 channels (open_clip's head_width), at least one.
int64_t default_heads(int64_t width);

Pool pool_from_name(const std::string& name);  // timm's global_pool: "token", "avg", "map"; throws on others

// Where each setting of a ViTConfig came from, for `vit inspect`: "file (tensor shapes)", a config file's
// path, "default (...)", "timm's defaults for <arch>", "--img-size".
struct ConfigOrigin {
  std::string act, attention, classes, depth, eps, family, heads, input_size, labels, mlp, norms, patch, pool,
      preprocessing, rope, tokens, width;
  // (setting, origin) in the order `vit inspect` prints them.
  std::vector<std::pair<const char*, const std::string*>> settings() const {
    return {{"activation", &act},   {"attention", &attention},     {"classes", &classes}, {"depth", &depth},
            {"eps", &eps},          {"family", &family},           {"heads", &heads},     {"input size", &input_size},
            {"labels", &labels},    {"mlp", &mlp},                 {"norms", &norms},     {"patch", &patch},
            {"pool", &pool},        {"preprocessing", &preprocessing}, {"rotary", &rope}, {"tokens", &tokens},
            {"width", &width}};
  }
};

// The blocks' attention, as far as it differs between families.
struct Attention {
  bool qkv_bias = true;
  // BEiT (timm's beit.py) and EVA-02 (eva.py):
  bool k_bias = true;                   // false: q and v biases only (q_bias, v_bias), k's is zero
  bool qkv_fused = true;                // false: separate q_proj, k_proj, v_proj (EVA-02 base), fused at load
  bool norm = false;                    // a LayerNorm on attention's output before attn.proj (attn.norm:
                                        // EVA-02 CLIP's scale_attn_inner)
  int64_t rel_pos_window = 0;           // BEiT: the (square) window its relative position tables were trained
                                        // at, 0 without; resized for the input's grid as timm does
};

struct ViTConfig {
  std::string arch;                     // timm architecture name when known, else ""
  int64_t patch = 16;                   // P
  int64_t in_chans = 3;
  int64_t width = 192;                  // D
  int64_t depth = 12;                   // L
  int64_t heads = 3;                    // H
  int64_t mlp = 768;                    // M
  int64_t classes = 1000;               // C (0: no head, embeddings only)
  int64_t pos_grid_h = 14, pos_grid_w = 14;  // grid the stored position table was trained at
  bool class_token = true;
  int64_t reg_tokens = 0;               // DINOv2's register tokens, after the class token
  bool layer_scale = false;             // ls1/ls2 gammas on each block's branches (DeiT III, DINOv2)
  Family family = Family::ViT;          // its row of the family table (families.h)
  bool norm_pre = false;                // CLIP: a LayerNorm after the position table, before the blocks
  Activation act = Activation::Gelu;    // the MLP's: GELU, its tanh form, QuickGELU, or SwiGLU
  bool pos_antialias = true;            // position table resampled antialiased (timm's), else as torch's plain bicubic
  bool dist_token = false;              // DeiT distilled: second token and head_dist
  bool no_embed_class = false;          // position table covers patches only
  bool proj_bias = true;                // attn.proj and the MLP have biases (timm's proj_bias; AIMv2: none)
  bool patch_norm = false;              // a norm right after the patch embedding (patch_embed.norm, AIMv2)
  NormKind norm = NormKind::Layer;      // every norm's kind but the MLP's: LayerNorm, or RMSNorm (AIMv2)
  Attention attn;                       // the blocks' attention: its biases, projections, norm, relative bias
  bool pos_embed = true;                // a position table (pos_embed); BEiT's blocks have relative biases instead
  bool mlp_norm = false;                // a LayerNorm inside the MLP before fc2 (mlp.norm: EVA-02 base's
                                        // scale_mlp)
  Rotary rope;                          // 2-D rotary position embedding on the patch tokens' q and k (EVA-02)
  bool patch_bias = true;               // the patch embedding has a bias
  Naflex naflex;                        // NaFlex (families.h): its table (pos_grid_h x pos_grid_w) resized to each
                                        // image's grid at run time. Its row's.
  Pooling pool;                         // after the blocks: final norm, pooling, fc_norm, attention pool, head
  float eps = 1e-6f;
  PreprocessConfig pre;                 // pre.height x pre.width is the input size the model runs at
  std::vector<std::string> labels;      // from the config, empty when it has none
  std::string stored_as;                // the checkpoint's names and dtypes ("timm names, F32"); "" for random
  ConfigOrigin origin;                  // where each setting above came from

  int64_t img_h() const { return pre.height; }
  int64_t img_w() const { return pre.width; }
  int64_t prefix_tokens() const { return int64_t(class_token) + int64_t(dist_token) + reg_tokens; }
  int64_t grid_h() const { return img_h() / patch; }
  int64_t grid_w() const { return img_w() / patch; }
  int64_t patches() const { return naflex.on ? naflex.max_patches : grid_h() * grid_w(); }  // N
  int64_t tokens() const { return patches() + prefix_tokens(); }   // T
  int64_t head_dim() const { return width / heads; }               // Dh
  int64_t pool_heads() const { return pool.attn_heads ? pool.attn_heads : heads; }  // the attention pool's
  int64_t pos_len() const {
    return pos_embed ? pos_grid_h * pos_grid_w + (no_embed_class ? 0 : prefix_tokens()) : 0;
  }
  int64_t rel_pos_len() const {  // rows of a relative position table: every offset, and 3 for the class token
    return (2 * attn.rel_pos_window - 1) * (2 * attn.rel_pos_window - 1) + 3;
  }
  // One image's input: [C, H, W]; NaFlex: [max_patches, P * P * C] patches (its grid apart: Plan::set_grid).
  int64_t input_floats() const { return naflex.on ? naflex.max_patches * patch * patch * in_chans : in_chans * img_h() * img_w(); }
  NaflexConfig naflex_config() const;  // the NaFlex transform of this model (naflex.on only)
  bool swiglu() const { return act == Activation::SwiGLU; }  // the MLP gated: mlp is fc2's input width
  std::string summary() const;
};

// What besides the tensors describes a model. Each JSON is null when absent; its name is used in errors.
struct ConfigSources {
  const nlohmann::json* config = nullptr;        // config.json, timm or Hugging Face form
  std::string config_name;
  const nlohmann::json* preprocessor = nullptr;  // Hugging Face preprocessor_config.json
  std::string preprocessor_name;
  std::string arch;       // --arch: the timm architecture of a checkpoint in timm's names ("" for none)
  int64_t img_size = 0;   // --img-size: run at S x S (position table resampled), 0 for the model's own
};

// Sets the input size, an Error at `where` when it is out of range (1 to kMaxInputSize).
void set_input_size(ViTConfig* c, int64_t h, int64_t w, const std::string& where);

// An architecture the sources name (a timm config's "architecture", --arch) that the engine does not run is
// refused by its name, with its reason (refusal_of_arch), before any tensor is read.
void refuse_unrun_architecture(const ConfigSources& src);

// Shapes from the checkpoint, the rest from the sources; a config or --arch that contradicts the tensors is an
// error naming both. Without a config or --arch, only a torchvision checkpoint of one of torchvision's ViTs is
// run; anything else is refused, naming what the tensors do not say and the flags that give it.
ViTConfig resolve_config(const Checkpoint& ck, const ConfigSources& src);

// A timm architecture the engine runs (known_archs(), families.h), as timm's create_model(arch) builds it, for
// random-weight models. img_size > 0: run at S x S, the position table made at that size. Another name is
// refused with its reason (refusal_of_arch: docs/MODELS.md's).
ViTConfig config_for_arch(const std::string& arch, int64_t img_size = 0);

// A model's shape as its tensors show it, apart from its depth and head: its width, patch, MLP width and
// position table ("width 384, patch 16, MLP 1536, a 14x14 position table"), then its structure (structure_words).
std::string shape_description(const ViTConfig& c);
// Its tokens, norms, biases, layer scale, attention pool ("class token", "4 register tokens", "layer scale",
// "q and v biases", ...), one item per fact; sizes apart.
std::vector<std::string> structure_words(const ViTConfig& c);

}  // namespace vit

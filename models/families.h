// The model families, one table of them: a row per family (and per variant whose defaults its name
// decides, as CLIP's QuickGELU towers), holding all that is said of a family: the timm architecture names
// it takes (the allow-list, each name checked against timm itself by tests/test_sweep.cpp: docs/MODELS.md),
// its display name, the tensor that marks it in a file without a config, the settings of its blocks no
// tensor holds, what its head is, and the model_args it reads. What each architecture name brings (timm's
// shape, structure and preprocessing for it: `vit bench --arch` and `--arch` on a checkpoint) is timm's own,
// generated into models/timm_archs.inc. The families and variants the engine knows and does not run are
// refused by name, by architecture and by tensor.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/nn/ops.h"  // NormKind
#include "engine/preprocess/resample.h"
#include "vit/model_kinds.h"

namespace vit {

class SafeTensors;
struct ViTConfig;

enum class Family { ViT, DeiT, DeiT3, DINOv2, Clip, SigLIP, BEiT, EVA02, RopeViT, DINOv3, PE, AIMv2, EVA02Clip, NaFlex };
const char* family_name(Family f);  // "ViT", "DeiT III", "CLIP image tower", ...

// The MLP: fc1, an activation, fc2 (GELU, GELU's tanh form, QuickGELU x * sigmoid(1.702 x)), or SwiGLU's
// silu(gate) * value between them (fc1 holding the gate's rows, then the values').
enum class Activation { Gelu, GeluTanh, QuickGelu, SwiGLU };
const char* activation_name(Activation a);  // "GELU", "GELU (tanh)", "QuickGELU", "SwiGLU"

// Which rotary embedding turns q and k (timm's pos_embed_sincos.py): EVA-02's RotaryEmbeddingCat (integer
// coordinates, optionally rescaled to a reference grid; interleaved channel pairs), or DINOv3's
// RotaryEmbeddingDinoV3 (patch centres normalised to [-1, 1] by the grid; rotate-half channel pairs), or Naver's
// RotaryEmbeddingMixed (rope_type 'mixed': frequencies learned per block and head, the tensor rope.freqs;
// integer coordinates; interleaved pairs).
enum class RopeKind { EvaCat, DinoV3, Mixed };

// A 2-D rotary position embedding on the patch tokens' q and k (EVA-02's; in no tensor but RoPE-Mixed's).
struct Rotary {
  bool on = false;
  int64_t ref_h = 0, ref_w = 0;  // its ref_feat_shape: positions rescaled to this grid (0: none)
  RopeKind kind = RopeKind::EvaCat;
  bool xy = false;               // rope_grid_indexing 'xy' (Perception Encoder): each patch's x angles
                                 // first, then its y angles (else y, then x)
  float temperature = 10000.f;
  float grid_offset = 0.f;
};

// NaFlex (timm's naflexvit.py, SigLIP 2): each image resized at its own aspect ratio to a grid of at most
// max_patches patches and padded to that budget (engine/preprocess/naflex.h); the patch embedding a linear
// layer over channels-last patches (NaFlexEmbeds: embeds.proj), the position table resized to each image's grid
// at run time with pos_filter (antialiased), attention and pooling masked to the image's own tokens.
struct Naflex {
  bool on = false;
  int64_t max_patches = 256;            // SigLIP 2's budget (timm's transform defaults to 576)
  Filter pos_filter = Filter::Bicubic;  // timm's pos_embed_interp_mode
};

// What follows the blocks: the final norm, the pooling of the tokens into one, a norm after it, and the head.
// A row's defaults set its kind and the attention pool's heads; the tensors and configs decide the rest.
struct Pooling {
  Pool kind = Pool::Token;              // timm's global_pool: the class token ('token'), the mean of the patch
                                        // tokens ('avg') or the attention pool ('map')
  int64_t attn_heads = 0;               // the attention pool's own heads (attn_pool_num_heads; Perception Encoder:
                                        // 8), 0: the blocks'
  int64_t attn_mlp = 0;                 // SigLIP's attention-pool head (attn_pool.*): its MLP width, 0 without
  bool final_norm = true;               // LayerNorm over all tokens before pooling
  bool fc_norm = false;                 // LayerNorm after pooling instead
  HeadKind head = HeadKind::Classifier; // a classifier, a projection into a joint image-text space (no classes
                                        // to label with), or none (classes 0)

  bool attn() const { return attn_mlp > 0; }  // SigLIP's MAP head (AttentionPoolLatent)
};

// What a family's blocks and embeddings are when neither the tensors nor a config say: its timm model
// definition's defaults. (A checkpoint's tensors decide the rest: layer scale, tokens, norms, biases.) A row
// names only what differs from timm's VisionTransformer, each by name:
// `FamilyDefaults().with_act(Activation::SwiGLU).with_rope(16).with_pool(Pool::Avg)`.
struct FamilyDefaults {
  Activation act = Activation::Gelu;
  float eps = 1e-6f;          // LayerNorm's
  Rotary rope;                // none unless the row says
  Pooling pool;               // its kind and the attention pool's heads, when the row says
  NormKind norm = NormKind::Layer;  // every norm's kind: LayerNorm, or RMSNorm (AIMv2; its tensors have no bias)
  Naflex naflex;              // none unless the row says (its budget is timm's transform's for SigLIP 2)

  FamilyDefaults with_act(Activation a) const { return with(&FamilyDefaults::act, a); }
  FamilyDefaults with_eps(float e) const { return with(&FamilyDefaults::eps, e); }
  FamilyDefaults with_pool(Pool p) const { return with([p](FamilyDefaults& d) { d.pool.kind = p; }); }
  FamilyDefaults with_norm(NormKind n) const { return with(&FamilyDefaults::norm, n); }
  // A rotary embedding of `kind` at `temperature`, positions rescaled to a ref x ref grid (0: not rescaled).
  FamilyDefaults with_rope(int64_t ref, RopeKind kind = RopeKind::EvaCat, float temperature = 10000.f) const {
    FamilyDefaults d = *this;
    d.rope.on = true;
    d.rope.ref_h = d.rope.ref_w = ref;
    d.rope.kind = kind;
    d.rope.temperature = temperature;
    return d;
  }
  FamilyDefaults with_rope_xy() const { return with([](FamilyDefaults& d) { d.rope.xy = true; }); }
  FamilyDefaults with_rope_grid_offset(float o) const { return with([o](FamilyDefaults& d) { d.rope.grid_offset = o; }); }
  FamilyDefaults with_attn_pool_heads(int64_t h) const { return with([h](FamilyDefaults& d) { d.pool.attn_heads = h; }); }
  // A NaFlex model whose position table is resized to each image's grid with `filter`.
  FamilyDefaults with_naflex(Filter filter) const {
    FamilyDefaults d = *this;
    d.naflex.on = true;
    d.naflex.pos_filter = filter;
    return d;
  }

 private:
  template <typename T, typename V>
  FamilyDefaults with(T FamilyDefaults::*field, V value) const {
    FamilyDefaults d = *this;
    d.*field = T(value);
    return d;
  }
  template <typename Change>
  FamilyDefaults with(Change change) const {  // a copy changed by change(copy): a field of a part
    FamilyDefaults d = *this;
    change(d);
    return d;
  }
};

// The timm class a family's models are, which says what model_args its configs hold (model_arg_rules).
enum class TimmClass { VisionTransformer, Beit, Eva, NaFlexVit };

struct FamilyRow {
  Family family;
  const char* runs;     // the timm architectures of this family (variant) the engine runs: a regex over whole names
  const char* marker;   // in a file without a config, a tensor that says it is this family; null: none does
  HeadKind head;        // what a head on these models is (a fine-tuned CLIP tower's is a classifier: head_kind)
  FamilyDefaults defaults;
  TimmClass timm_class;
};
const FamilyRow& family_row(Family f);

// Whether the family is the image tower of an image-text model, whose text tower's embeddings can label its images
// (vit classify --text-embeddings): CLIP, SigLIP (and its NaFlex towers), EVA-02 CLIP, Perception Encoder core.
bool image_text_family(Family f);

// The row whose allow-list takes a timm architecture name (without a pretrained tag), null when none does.
const FamilyRow* family_of_arch(const std::string& arch);

// The row a checkpoint's tensors mark (the first in table order whose marker tensor it holds), else ViT's.
class Checkpoint;
const FamilyRow& family_of_tensors(const Checkpoint& ck);

// Why an architecture no row takes is refused: "<family> checkpoint: not supported yet (<arch>)" for the
// families and variants the engine knows it does not run, else "architecture '<arch>': not supported".
std::string refusal_of_arch(const std::string& arch);

// A config naming this architecture describes a ViT by its tensors and model_args alone (timm's
// VisionTransformer with its defaults): what weights/export.py writes for a model of one's own.
constexpr const char* kCustomArch = "vit_custom";

// The head of a model of family f with `classes` outputs, whose weights carry the pretrained tag `tag`
// (timm's pretrained_cfg.tag, or the part of a hub folder's name after the dot): a CLIP tower's head is its
// projection, unless the tag says it was fine-tuned on labels (timm's "*_ft_in1k", "*_ft_in12k", ...).
HeadKind head_kind(Family f, int64_t classes, const std::string& tag);

// What timm's create_model(arch) is, for an architecture the engine runs (models/timm_archs.inc: its width,
// depth, heads, MLP, patch, tokens, position table, norms, biases, head and global_pool; its default pretrained
// config's preprocessing) with its row's defaults: what `vit bench --arch` builds with random weights, and what
// `--arch` on a checkpoint says its tensors must agree with. False for a name no row takes.
bool arch_preset(const std::string& arch, ViTConfig* c);

// Every architecture the engine runs (the table's names the rows take), sorted: what --arch takes.
std::vector<std::string> known_archs();

// The heads timm gives an architecture the engine runs (what a config naming it without model_args.num_heads
// means), 0 for a name no row takes.
int64_t arch_heads(const std::string& arch);

// The tag of timm's default pretrained config for an architecture the engine runs ("openai",
// "laion2b_ft_in12k_in1k", ...; "" for none or another name): what --arch's head kind follows (head_kind).
std::string arch_tag(const std::string& arch);

// timm's eval preprocessing of a named architecture the engine runs (its default pretrained config's input
// size, mean and std, crop and interpolation), false for a name no row takes.
struct PreprocessConfig;
bool arch_preprocessing(const std::string& arch, PreprocessConfig* pre);

// Sets what a row says no tensor holds: the family, its activation, eps and rotary embedding.
void apply_family_defaults(const FamilyRow& row, ViTConfig* c);

// The family (or variant) of a checkpoint the engine cannot run yet ("EVA-02 with qk_norm", "CLIP image
// tower" in OpenCLIP's layout, ...), from its tensor names, else "".
std::string unsupported_family(const SafeTensors& st);

}  // namespace vit

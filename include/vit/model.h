// A model loaded once: its weights at one precision, its labels (or zero-shot text embeddings) and what the
// engine understood of it, shared by every Classifier and Explainer made over it, so that one process holds
// one copy of the weights whatever it asks of them. Standard types only; errors are vit::Error (vit/error.h).
//
//   vit::Model m("model_dir", {vit::Precision::Int8});
//   vit::Classifier c(m);  // classify, embed, logits
//   vit::Explainer e(m);   // attention maps, at the model's precision
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "vit/class_embeddings.h"
#include "vit/error.h"
#include "vit/limits.h"
#include "vit/model_files.h"
#include "vit/model_kinds.h"
#include "vit/precision.h"

namespace vit {

// What is fixed when a model is loaded, whatever is later asked of it.
struct LoadOptions {
  Precision precision = Precision::F32;
  int threads = 0;             // threads for decoding and inference (0: all cores)
  std::string labels;          // a labels file, one per line; "" for the checkpoint's, else ImageNet-1k's
  std::string config;          // a config.json overriding the one beside the weights
  std::string arch;            // the timm architecture of a checkpoint in timm's names without a config
                               // (timm's create_model(arch) and its default pretrained config); "" for none
  int img_size = 0;            // run at S x S, the position table resampled as timm does (0: the model's)
  int max_patches = 0;         // NaFlex models (SigLIP 2's naflexvit_*): each image at its own aspect ratio
                               // within this many patches (0: 256, SigLIP 2's); refused for other models
  std::optional<Pool> pool;    // pool otherwise than the checkpoint (unset: its own)
  // Zero-shot labels for a CLIP or SigLIP image tower: a safetensors file of class names and their text
  // embeddings (scripts/export_text_embeddings.py). Its classes replace the model's: each image is scored
  // by the cosine similarity of its embedding (timm's model(x)) with theirs times the model's logit scale.
  std::string text_embeddings;
  // The same in memory (vit/class_embeddings.h): what `vit classify --labels-text` makes with the model's own text
  // tower. Checked as a file's are (their width the model's, each label once, a positive scale, no zero row).
  std::shared_ptr<const ClassEmbeddings> class_embeddings;
};

// Throws vit::ArgumentError naming the first option out of range: the one range check of LoadOptions.
void check_load_options(const LoadOptions& options);

// What the engine understood of the model, as `vit inspect` prints it.
struct ModelInfo {
  std::string name;    // the model folder's name (of a lone weights file: the file's name without .safetensors)
  std::string family;  // ViT, DeiT, DeiT III, DINOv2, CLIP image tower, ...
  HeadKind head = HeadKind::None;
  int64_t embedding = 0;  // the width of Classifier::embed's rows (the pooled features)
  int64_t classes = 0;     // a classifier's classes, 0 for any other head (labels() has as many)
  int64_t projection = 0;  // a projection's width into its image-text space (embed's rows with head), else 0
  std::string file, arch, stored_as, precision, pool, interpolation, crop_mode;
  int64_t patch, width, depth, heads, mlp, input_height, input_width, tokens, parameters;
  double crop_pct;
  int resize;
  float mean[3], std[3];
  int64_t max_patches = 0;  // a NaFlex model's budget of patches per image (each at its own aspect ratio), else 0
  // The rest of what `vit inspect` prints. The model in words, a topic and its line each, in order
  // ("tokens", "197 = 196 patches (14x14) + class token"; "position table", ...).
  std::vector<std::pair<std::string, std::string>> description;
  // How it runs on this CPU: FLOPs per image (2 x multiply-adds), the weights' resident size at the
  // precision, the int8.safetensors `vit quantize` made beside them ("" for none), each linear layer
  // (the blocks' as blocks.*) and attention's products.
  double flops = 0;
  int64_t weight_bytes = 0;
  std::string int8_weights;
  struct Layer {
    std::string name, precision, how;  // "blocks.*.mlp.fc1", "int8", "matmul, s32 product, then dequantized per row"
  };
  std::vector<Layer> layers;
  std::string attention;
  // Where each setting came from, for those whose origin is known: ("heads", a config file's path),
  // ("patch", "file (tensor shapes)"), ("input size", "--img-size"), ...
  std::vector<std::pair<std::string, std::string>> origins;
};

// Immutable once loaded; copies share it (a copy is a pointer), and calls from several threads at once are
// safe. A Model is the image tower; the text tower of a CLIP or SigLIP checkpoint is loaded from the same
// path by vit::TextModel (vit/text.h).
class Model {
 public:
  // path: a .safetensors file or the folder holding model.safetensors (and config.json). Throws vit::Error
  // when the model, the config or the labels cannot be used, vit::ArgumentError (a vit::Error) when an
  // option is out of range or does not suit the model (img_size not a multiple of its patch).
  explicit Model(const std::string& path, const LoadOptions& options = {});

  const LoadOptions& options() const;
  Precision precision() const;
  // The classes it ranks: the head's, or the text embeddings'; 0 for a model without a classifier head.
  int64_t classes() const;
  const std::vector<std::string>& labels() const;
  ModelInfo info() const;

  struct Impl;  // the network, its pools of forward passes, labels (library/model_impl.h)
  const Impl& impl() const { return *impl_; }

 private:
  std::shared_ptr<const Impl> impl_;
};

}  // namespace vit

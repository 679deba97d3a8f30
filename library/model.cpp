// vit::Model (vit/model.h): the one place a model is loaded, and the table of its options (vit/load_options.h).
// Its options are checked once, the network loaded at their precision, its labels or zero-shot text embeddings
// read; Classifier and Explainer then share it (library/model_impl.h).
#include "library/model_impl.h"

#include <algorithm>

#include "engine/nn/ops.h"
#include "library/labels.h"
#include "vit/load_options.h"
#include "vit/threads.h"

namespace vit {

namespace {

// The table's kinds of row: a choice of words (the precision, the pool), a number, a text.
LoadOption choice_option(OptionKind kind, const char* name, const char* help) {
  return {name, name, kind, nullptr, 0, 0, "", nullptr, help};
}
// A whole number from 0 (the default, which `zero` names) to hi.
LoadOption number_option(const char* name, const char* what, int LoadOptions::*field, int hi, const char* zero,
                         const char* help) {
  return {name, what, OptionKind::Number, field, 0, hi, zero, nullptr, help};
}
LoadOption text_option(OptionKind kind, const char* name, const char* what, std::string LoadOptions::*field,
                       const char* help) {
  return {name, what, kind, nullptr, 0, 0, "", field, help};
}

}  // namespace

const std::vector<LoadOption>& load_option_table() {
  using O = LoadOptions;
  static const std::vector<LoadOption> table{
      choice_option(OptionKind::Precision, "precision",
                    "arithmetic of the linear layers: f32 (as timm), bf16 (CPUs with avx512_bf16) or int8"),
      number_option("threads", "threads", &O::threads, 4096, "all cores",
                    "threads for decoding and inference; 0: all cores (more than the cores: the cores, with a "
                    "warning)"),
      number_option("img_size", "image size", &O::img_size, int(kMaxInputSize), "the model's own",
                    "run at SxS pixels instead of the model's size (position table resampled as timm does); 0: the "
                    "model's size"),
      number_option("max_patches", "max patches", &O::max_patches, int(kMaxNaflexPatches), "256",
                    "NaFlex models (timm's naflexvit_*, SigLIP towers made with use_naflex): each whole image at its "
                    "own aspect ratio, resized to at most this many patches; 0: 256, SigLIP 2's"),
      text_option(OptionKind::Path, "config", "config", &O::config,
                  "config.json (timm or Hugging Face form) overriding the one beside the weights"),
      text_option(OptionKind::Name, "arch", "architecture", &O::arch,
                  "the timm architecture of a checkpoint in timm's names without a config.json (any that "
                  "docs/MODELS.md lists as running, e.g. vit_base_patch16_224): timm's create_model(NAME) and its "
                  "default pretrained config say what the tensors cannot (heads, block order, eps, pooling, "
                  "preprocessing); its tensors must be that architecture's"),
      text_option(OptionKind::Path, "labels", "labels", &O::labels, "class names, one per line (default: the model's, else ImageNet-1k)"),
      text_option(OptionKind::Path, "text_embeddings", "text embeddings", &O::text_embeddings,
                  "zero-shot labels for a CLIP or SigLIP image tower: a safetensors file of class names and their "
                  "text embeddings (scripts/export_text_embeddings.py); its classes replace the model's"),
      choice_option(OptionKind::Pool, "pool",
                    "pool the tokens otherwise than the model does: cls (or timm's token), mean (or avg) or map (the "
                    "attention pool, on models that have one); unset: the model's own"),
  };
  return table;
}

const LoadOption& load_option(const std::string& name) {
  for (const LoadOption& o : load_option_table())
    if (name == o.name) return o;
  throw Error("internal: no model option named '" + name + "'");
}

std::string option_flag(const LoadOption& option) {
  std::string flag = std::string("--") + option.name;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

namespace {

// Each word of a Pool option and the pooling it names: the command line's and timm's global_pool's.
const std::pair<const char*, Pool> kPoolWords[] = {
    {"cls", Pool::Token}, {"token", Pool::Token}, {"mean", Pool::Avg}, {"avg", Pool::Avg}, {"map", Pool::Map}};

}  // namespace

const std::vector<std::string>& option_choices(const LoadOption& option) {
  static const std::vector<std::string> precisions{"f32", "bf16", "int8"}, none;
  static const std::vector<std::string> pools = [] {
    std::vector<std::string> words;
    for (const auto& [word, pool] : kPoolWords) words.push_back(word);
    return words;
  }();
  return option.kind == OptionKind::Precision ? precisions : option.kind == OptionKind::Pool ? pools : none;
}

namespace {

// A Number's value, refused unless in its range.
void check_number(const LoadOption& option, int64_t v) {
  if (v >= option.lo && v <= option.hi) return;
  throw ArgumentError(std::string(option.what) + " " + std::to_string(v) + " is out of range (0 for " + option.zero +
                      ", or 1 to " + std::to_string(option.hi) + ")");
}

}  // namespace

void set_load_option(LoadOptions* o, const LoadOption& option, const std::string& value) {
  switch (option.kind) {
    case OptionKind::Number: {
      size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(value, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != value.size())
        throw ArgumentError(std::string(option.what) + ": '" + value + "' is not a whole number");
      check_number(option, v);
      o->*option.number = int(v);
      return;
    }
    case OptionKind::Path:
    case OptionKind::Name:
      if (value.empty()) throw ArgumentError(std::string(option.what) + ": an empty name names nothing");
      o->*option.text = value;
      return;
    case OptionKind::Precision:
      try {
        o->precision = precision_from_name(value);
      } catch (const Error& e) {
        throw ArgumentError(e.what());
      }
      return;
    case OptionKind::Pool:
      for (const auto& [word, pool] : kPoolWords)
        if (value == word) {
          o->pool = pool;
          return;
        }
      throw ArgumentError("pool '" + value + "' is not one of 'cls', 'token', 'mean', 'avg', 'map'");
  }
}

std::string load_option_value(const LoadOptions& o, const LoadOption& option) {
  switch (option.kind) {
    case OptionKind::Number: return std::to_string(o.*option.number);
    case OptionKind::Path:
    case OptionKind::Name: return o.*option.text;
    case OptionKind::Precision: return precision_name(o.precision);
    case OptionKind::Pool: return o.pool ? pool_name(*o.pool) : "";
  }
  return "";
}

void check_load_options(const LoadOptions& o) {
  for (const LoadOption& option : load_option_table())
    if (option.kind == OptionKind::Number) check_number(option, o.*option.number);
  if (!o.text_embeddings.empty() && !o.labels.empty())
    throw ArgumentError("labels and text embeddings both name the classes: give one");
  if (o.class_embeddings && (!o.text_embeddings.empty() || !o.labels.empty()))
    throw ArgumentError(std::string("class embeddings and a ") + (o.labels.empty() ? "text-embeddings" : "labels") +
                        " file both name the classes: give one");
}

namespace {

// The network at the options' precision, size, budget and pool.
ViT load_network(const std::string& path, const LoadOptions& o) {
  ViT network = ViT::load(path, o.config, o.img_size, o.precision, o.arch);
  if (o.max_patches > 0) network.set_max_patches(o.max_patches);
  if (o.pool) {
    try {
      network.set_pool(*o.pool);
    } catch (const Error& e) {  // a pool the model cannot do: the caller's choice, not a broken model
      throw ArgumentError(e.what());
    }
  }
  return network;
}

}  // namespace

Model::Model(const std::string& path, const LoadOptions& options) {
  check_load_options(options);
  const int threads = options.threads > 0 ? usable_threads(options.threads) : max_threads();
  set_threads(threads);
  auto impl = std::make_shared<Impl>(load_network(path, options), options, threads);
  const ViTConfig& c = impl->network.config();
  if (!options.text_embeddings.empty() || options.class_embeddings) {
    const std::string source = options.class_embeddings ? "class embeddings" : options.text_embeddings;
    if (!image_text_family(c.family))
      throw ArgumentError(source, "text embeddings label images with a CLIP or SigLIP image tower (or EVA-02 CLIP's, "
                                  "Perception Encoder's), and " + impl->network.source() + " is a " + family_name(c.family));
    const int64_t width = c.classes > 0 ? c.classes : c.width;
    impl->zero_shot = std::make_unique<ZeroShot>(options.class_embeddings
                                                     ? ZeroShot(*options.class_embeddings, width, source)
                                                     : ZeroShot::load(options.text_embeddings, width));
    impl->labels = impl->zero_shot->labels();
  } else {
    impl->labels = resolve_labels(options.labels, c);
  }
  impl_ = std::move(impl);
}

const LoadOptions& Model::options() const { return impl_->opt; }
Precision Model::precision() const { return impl_->network.precision(); }
int64_t Model::classes() const { return impl_->classes(); }
const std::vector<std::string>& Model::labels() const { return impl_->labels; }
ModelInfo Model::info() const { return impl_->info(); }

}  // namespace vit

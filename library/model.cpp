// vit::Model (vit/model.h): the one place a model is loaded. Its options are checked once, the network
// loaded at their precision, its labels or zero-shot text embeddings read; Classifier and Explainer then
// share it (library/model_impl.h).
#include "library/model_impl.h"

#include "engine/nn/ops.h"
#include "library/labels.h"
#include "vit/threads.h"

namespace vit {

void check_load_options(const LoadOptions& o) {
  if (o.threads < 0) throw ArgumentError("threads must be 0 (all cores) or more, got " + std::to_string(o.threads));
  if (o.img_size < 0 || o.img_size > kMaxInputSize)
    throw ArgumentError("image size " + std::to_string(o.img_size) + " is out of range (0 for the model's own, or 1 to " +
                        std::to_string(kMaxInputSize) + ")");
  if (o.max_patches < 0 || o.max_patches > kMaxNaflexPatches)
    throw ArgumentError("max patches " + std::to_string(o.max_patches) + " is out of range (0 for 256, or 1 to " +
                        std::to_string(kMaxNaflexPatches) + ")");
  if (!o.text_embeddings.empty() && !o.labels.empty())
    throw ArgumentError("labels and text embeddings both name the classes: give one");
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
  if (!options.text_embeddings.empty()) {
    if (!image_text_family(c.family))
      throw ArgumentError(options.text_embeddings, "text embeddings label images with a CLIP or SigLIP image tower (or "
                                                   "EVA-02 CLIP's, Perception Encoder's), and " +
                                                       impl->network.source() + " is a " + family_name(c.family));
    impl->zero_shot = std::make_unique<ZeroShot>(ZeroShot::load(options.text_embeddings, c.classes > 0 ? c.classes : c.width));
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

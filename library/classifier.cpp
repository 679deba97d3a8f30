// vit::Classifier (include/vit/vit.h): calls over a vit::Model (its network, labels and pool of Plans; shared).
// Each call checks out Plans of its own, so calls from several threads run side by side; inputs go through
// the batch runner (runner.h), which decodes on all threads and runs the good ones of each batch together.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "engine/image/image.h"
#include "vit/topk.h"
#include "engine/preprocess/preprocess.h"
#include "library/model_impl.h"
#include "library/runner.h"
#include "library/video.h"
#include "models/network.h"
#include "vit/vit.h"

namespace vit {

namespace {

// torch.nn.functional.normalize: x / max(||x||, 1e-12).
void unit_length(std::vector<float>* v) {
  double ss = 0;
  for (float x : *v) ss += double(x) * x;
  const float inv = float(1.0 / std::max(std::sqrt(ss), 1e-12));
  for (float& x : *v) x *= inv;
}

// What a fixed-size input path says to a NaFlex model, whose images are patches at their own shape.
std::string naflex_input_refusal(const ViT& m) {
  return m.source() + " is a NaFlex model (" + family_name(m.config().family) + "): it takes each image at its own aspect ratio as " +
         "patches within a budget, not a fixed [B, 3, H, W] tensor; give it image files (classify, embed) instead";
}

}  // namespace

ImageHeader read_image_header(const std::string& bytes) {
  ImageHeader h;
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  const ImageFormat format = image_format(data, bytes.size());
  h.image = read_image_size(data, bytes.size(), format, &h.width, &h.height) || format != ImageFormat::Other;
  return h;
}

struct Classifier::Impl {
  Impl(Model shared, const ClassifierSettings& o) : model(std::move(shared)), m(model.impl()), opt(o) {}
  Model model;           // shared with whatever else holds it
  const Model::Impl& m;  // its network, passes, labels
  ClassifierSettings opt;

  int64_t classes() const { return m.classes(); }
  const ViT& network() const { return m.network; }
  void use_threads() const { m.use_threads(); }

  // Runs preprocessed images [n, 3, H, W] in Plans of the batch size (or powers of two below it): each(plan,
  // b, image) for row b of a Plan, image its place among the n.
  void run_tensors(const float* images, int64_t n, const BetweenBatches& between,
                   const std::function<void(const ViT::Plan&, int64_t, int64_t)>& each) const {
    if (network().config().naflex.on) throw ArgumentError(naflex_input_refusal(network()));
    use_threads();
    const int64_t per = network().config().input_floats();
    for (int64_t first = 0, count = 0; first < n; first += count) {
      count = plan_batch(n - first, opt.batch);
      auto plan = m.plans.take(count);
      std::memcpy(plan->input(), images + first * per, size_t(count * per) * sizeof(float));
      plan->run();
      for (int64_t b = 0; b < count; ++b) each(*plan, b, first + b);
      m.plans.give_back(std::move(plan));
      if (first + count < n) check_between(between);
    }
  }

  // How classify and embed read their inputs: image files, or encoded files in memory (name, bytes).
  DecodeFn files(const std::vector<std::string>& paths) const {
    return [this, &paths](size_t i) { return decode_image_file(paths[i], opt.max_pixels, opt.exif_transpose); };
  }
  DecodeFn encoded(const std::vector<std::pair<std::string, std::string>>& images) const {
    return [this, &images](size_t i) {
      const std::string& bytes = images[i].second;
      return decode_image(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), images[i].first,
                          opt.max_pixels, opt.exif_transpose);
    };
  }

  DecodeFn pixels(const std::vector<Pixels>& images) const {
    return [this, &images](size_t i) {
      const Pixels& p = images[i];
      if (p.width <= 0 || p.height <= 0 || !p.rgb)
        throw Error(p.name, "no pixels (" + std::to_string(p.width) + "x" + std::to_string(p.height) + ")");
      if (int64_t(p.width) * p.height > opt.max_pixels) throw Error(p.name, "image of " + over_pixel_limit(p.width, p.height, opt.max_pixels));
      Image img;
      img.width = p.width;
      img.height = p.height;
      img.rgb.assign(p.rgb, p.rgb + size_t(p.width) * size_t(p.height) * 3);
      return img;
    };
  }

  Result answer(const std::string& name, const float* logits, int topk) const {
    Result r;
    r.file = name;
    const int64_t C = classes();
    // No ranking of NaNs: a model with non-finite weights (warned about at load) answers nothing.
    if (!std::all_of(logits, logits + C, [](float v) { return std::isfinite(v); })) {
      r.error = "the model's logits are not numbers (NaN or infinity): its weights hold non-finite values";
      return r;
    }
    for (const Scored& s : m.zero_shot ? m.zero_shot->top(logits, topk) : top_k(logits, C, topk)) r.top.push_back({s.index, m.labels[size_t(s.index)], s.prob});
    if (opt.keep_logits) r.logits.assign(logits, logits + C);
    return r;
  }

  // Classifies n inputs through the batch runner: decode(i) gives input i's image (or throws).
  std::vector<Result> run(size_t n, const std::function<std::string(size_t)>& name, const DecodeFn& decode, int topk,
                          const BetweenBatches& between) const {
    if (classes() == 0)
      throw Error(network().source(), "the model has no classifier head (embeddings only): use embed (vit embed), or for a "
                                  "CLIP or SigLIP tower text embeddings (--text-embeddings)");
    use_threads();
    std::vector<Result> out(n);
    run_batches(m.plans, n, {opt.batch, false, {}}, decode, [&](const ViT::Plan& plan, std::vector<BatchItem>& items) {
      std::vector<float> scores;
      for (const BatchItem& item : items) {
        if (item.row < 0) {
          out[item.index].file = name(item.index);
          out[item.index].error = item.error;
        } else {
          out[item.index] = answer(name(item.index), m.logits(plan, item.row, scores), topk);
        }
      }
    }, between);
    return out;
  }

  // Embeds n inputs through the batch runner: the features before the head (timm's pre_logits), or
  // after it (model(x)), and the tokens (forward_features) when asked.
  std::vector<Embedding> embed(size_t n, const std::function<std::string(size_t)>& name, const DecodeFn& decode,
                               const EmbedOptions& o, const BetweenBatches& between) const {
    use_threads();
    const ViTConfig& c = network().config();
    if (o.tokens && c.naflex.on)
      throw ArgumentError(std::string("tokens of a NaFlex model (") + family_name(c.family) + "): not supported yet (each image has a grid of its own)");
    const bool logits = o.head && c.classes > 0;  // without a head, timm's model(x) is the features
    const size_t E = size_t(logits ? c.classes : c.width), TD = size_t(c.tokens() * c.width);
    std::vector<Embedding> out(n);
    run_batches(m.plans, n, {opt.batch, false, {}}, decode, [&](const ViT::Plan& plan, std::vector<BatchItem>& items) {
      for (const BatchItem& item : items) {
        Embedding& e = out[item.index];
        e.file = name(item.index);
        if (item.row < 0) {
          e.error = item.error;
          continue;
        }
        const size_t row = size_t(item.row);
        const float* v = (logits ? plan.logits() : plan.features()) + row * E;
        e.embedding.assign(v, v + E);
        if (o.normalize) unit_length(&e.embedding);
        e.sequence = c.naflex.on ? plan.tokens_of(int64_t(row)) : c.tokens();
        if (o.tokens) e.tokens.assign(plan.tokens() + row * TD, plan.tokens() + (row + 1) * TD);
      }
    }, between);
    return out;
  }
};

namespace {

// Throws vit::ArgumentError for settings out of range.
const ClassifierSettings& checked(const ClassifierSettings& o) {
  check_batch_size(o.batch);
  if (o.max_pixels < 1) throw ArgumentError("max_pixels must be positive, got " + std::to_string(o.max_pixels));
  return o;
}

}  // namespace

Classifier::Classifier(const std::string& model, const ClassifierOptions& options) {
  checked(options);  // before the model is loaded
  impl_ = std::make_unique<Impl>(Model(model, options), options);
}

Classifier::Classifier(const Model& model, const ClassifierSettings& settings)
    : impl_(std::make_unique<Impl>(model, checked(settings))) {}

Classifier::~Classifier() = default;
Classifier::Classifier(Classifier&&) noexcept = default;
Classifier& Classifier::operator=(Classifier&&) noexcept = default;

std::vector<Result> Classifier::classify(const std::vector<std::string>& paths, int topk,
                                        const BetweenBatches& between) const {
  return impl_->run(paths.size(), [&](size_t i) { return paths[i]; }, impl_->files(paths), topk, between);
}

std::vector<Result> Classifier::classify_encoded(const std::vector<std::pair<std::string, std::string>>& images,
                                                 int topk, const BetweenBatches& between) const {
  return impl_->run(images.size(), [&](size_t i) { return images[i].first; }, impl_->encoded(images), topk, between);
}

std::vector<Result> Classifier::classify_pixels(const std::vector<Pixels>& images, int topk,
                                               const BetweenBatches& between) const {
  return impl_->run(images.size(), [&](size_t i) { return images[i].name; }, impl_->pixels(images), topk, between);
}

int64_t Classifier::classify_video(const std::string& path, const VideoSampling& sampling,
                                   const std::function<void(const std::vector<Result>&)>& on_results, int topk,
                                   const BetweenBatches& between) const {
  return classify_video_frames(*this, path, sampling, impl_->opt.batch, impl_->opt.max_pixels, topk, on_results,
                               between);
}

std::vector<Embedding> Classifier::embed(const std::vector<std::string>& paths, const EmbedOptions& o,
                                         const BetweenBatches& between) const {
  std::vector<std::string> images;
  for (const std::string& p : paths)
    if (!is_video_name(p)) images.push_back(p);
  if (images.size() < paths.size()) check_sampling(o.video);  // before any work, not at the first video
  std::vector<Embedding> embedded = impl_->embed(images.size(), [&](size_t i) { return images[i]; }, impl_->files(images), o, between);
  if (images.size() == paths.size()) return embedded;
  std::vector<Embedding> out;
  size_t next = 0;
  for (const std::string& p : paths) {
    if (is_video_name(p)) out.push_back(embed_video(p, o, between));
    else out.push_back(std::move(embedded[next++]));
  }
  return out;
}

Embedding Classifier::embed_video(const std::string& path, const EmbedOptions& o, const BetweenBatches& between) const {
  Embedding e = embed_video_frames(*this, path, o, impl_->opt.batch, impl_->opt.max_pixels, between);
  if (o.normalize && e.error.empty()) unit_length(&e.embedding);
  return e;
}

std::vector<Embedding> Classifier::embed_pixels(const std::vector<Pixels>& images, const EmbedOptions& o,
                                                const BetweenBatches& between) const {
  return impl_->embed(images.size(), [&](size_t i) { return images[i].name; }, impl_->pixels(images), o, between);
}

std::vector<Embedding> Classifier::embed_encoded(const std::vector<std::pair<std::string, std::string>>& images,
                                                 const EmbedOptions& o, const BetweenBatches& between) const {
  return impl_->embed(images.size(), [&](size_t i) { return images[i].first; }, impl_->encoded(images), o, between);
}

int64_t Classifier::embedding_size(const EmbedOptions& o) const {
  const ViTConfig& c = impl_->network().config();
  return o.head && c.classes > 0 ? c.classes : c.width;
}
int64_t Classifier::tokens() const { return impl_->network().config().tokens(); }
int64_t Classifier::width() const { return impl_->network().config().width; }

std::vector<float> Classifier::logits(const float* images, int64_t n, const BetweenBatches& between) const {
  if (n < 0) throw Error("logits: a negative image count, " + std::to_string(n));
  const int64_t C = impl_->m.logits_size();
  std::vector<float> out(size_t(n * C)), scores;
  impl_->run_tensors(images, n, between, [&](const ViT::Plan& plan, int64_t b, int64_t image) {
    std::memcpy(out.data() + image * C, impl_->m.logits(plan, b, scores), size_t(C) * sizeof(float));
  });
  return out;
}

std::vector<float> Classifier::probabilities(const float* logits, int64_t n) const {
  const int64_t C = impl_->classes();
  std::vector<float> out(size_t(n * C));
  for (int64_t b = 0; b < n; ++b) {
    const float* row = logits + b * C;
    for (const Scored& s : impl_->m.zero_shot ? impl_->m.zero_shot->top(row, int(C)) : top_k(row, C, int(C)))
      out[size_t(b * C + s.index)] = s.prob;
  }
  return out;
}

std::vector<float> Classifier::preprocess(const std::string& path) const {
  impl_->use_threads();
  const ViTConfig& c = impl_->network().config();
  if (c.naflex.on) throw ArgumentError(naflex_input_refusal(impl_->network()));
  std::vector<float> out(size_t(c.input_floats()));
  vit::preprocess(decode_image_file(path, impl_->opt.max_pixels, impl_->opt.exif_transpose), c.pre, out.data());
  return out;
}

ImageInput Classifier::image_input(const std::string& path) const {
  const ViTConfig& c = impl_->network().config();
  const Image image = decode_image_file(path, impl_->opt.max_pixels, impl_->opt.exif_transpose);
  ImageInput in;
  in.width = image.width;
  in.height = image.height;
  PatchGrid g{int(c.grid_h()), int(c.grid_w())};
  if (c.naflex.on) {
    g = naflex_grid(image.width, image.height, int(c.patch), int(c.naflex.max_patches));
    in.max_patches = c.naflex.max_patches;
  }
  in.grid_rows = g.rows;
  in.grid_cols = g.cols;
  in.input_height = c.naflex.on ? int(g.rows * c.patch) : int(c.img_h());  // (a partial grid reads its top left)
  in.input_width = c.naflex.on ? int(g.cols * c.patch) : int(c.img_w());
  in.tokens = c.prefix_tokens() + g.count();
  return in;
}

const Model& Classifier::model() const { return impl_->model; }
const ClassifierSettings& Classifier::settings() const { return impl_->opt; }
const std::vector<std::string>& Classifier::labels() const { return impl_->m.labels; }
int64_t Classifier::classes() const { return impl_->classes(); }
int64_t Classifier::logits_size() const { return impl_->m.logits_size(); }

std::vector<float> Classifier::embeddings(const float* images, int64_t n, const EmbedOptions& o,
                                          const BetweenBatches& between) const {
  if (n < 0) throw Error("embeddings: a negative image count, " + std::to_string(n));
  const ViTConfig& c = impl_->network().config();
  const bool logits = o.head && c.classes > 0;  // as Impl::embed chooses
  const int64_t E = logits ? c.classes : c.width;
  std::vector<float> out(size_t(n * E)), row;
  impl_->run_tensors(images, n, between, [&](const ViT::Plan& plan, int64_t b, int64_t image) {
    const float* v = (logits ? plan.logits() : plan.features()) + b * E;
    row.assign(v, v + E);
    if (o.normalize) unit_length(&row);
    std::copy(row.begin(), row.end(), out.begin() + image * E);
  });
  return out;
}

ModelInfo Classifier::info() const { return impl_->m.info(); }

}  // namespace vit

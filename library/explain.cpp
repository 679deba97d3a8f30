// vit::Explainer (vit/explain.h): a vit::Model's Plans that keep every block's attention (at the model's
// precision), run through the batch runner; each batch's maps (engine/explain/attention_maps.h) and pictures (picture.h) made on all
// threads, then handed over in input order.
#include "vit/explain.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <exception>

#include "engine/explain/attention_maps.h"
#include "engine/explain/picture.h"
#include "engine/image/image.h"
#include "engine/preprocess/naflex.h"
#include "library/model_impl.h"
#include "library/runner.h"
#include "models/network.h"
#include "vit/topk.h"

namespace vit {
namespace {

// The attention a batch may keep: every block's [H, T, T] per image, at most this much in all.
constexpr int64_t kAttentionBudget = int64_t(256) << 20;
constexpr int64_t kMaxExplainBatch = 8;

void check_picture_size(int size) {
  if (size < kMinPictureSize || size > kMaxPictureSize)
    throw ArgumentError("picture size " + std::to_string(size) + " is out of range (" + std::to_string(kMinPictureSize) +
                        " to " + std::to_string(kMaxPictureSize) + ")");
}

// How a call draws its pictures.
struct Drawing {
  ExplainMethod method;
  int size;
  bool heads;
};

// Throws vit::ArgumentError for settings out of range.
const ExplainerSettings& checked(const ExplainerSettings& o) {
  if (o.max_pixels < 1) throw ArgumentError("max_pixels must be positive, got " + std::to_string(o.max_pixels));
  check_picture_size(o.picture_size);
  return o;
}

}  // namespace

struct Explainer::Impl {
  Impl(Model shared, const ExplainerSettings& o)
      : model(std::move(shared)), m(model.impl()), network(m.network), opt(o), plans(m.attention_plans()) {
    const ViTConfig& c = network.config();
    const int64_t per_image = c.depth * c.heads * c.tokens() * c.tokens() * int64_t(sizeof(float));
    batch = std::clamp<int64_t>(kAttentionBudget / per_image, 1, kMaxExplainBatch);
    query = c.class_token ? Query::ClassToken : Query::MeanOfRows;
  }
  Model model;           // shared with whatever else holds it
  const Model::Impl& m;  // its network, labels and passes
  const ViT& network;
  ExplainerSettings opt;
  const PlanPool& plans;  // the model's Plans that keep every block's attention
  int64_t batch = 1;
  Query query = Query::ClassToken;

  Drawing drawing() const { return {opt.method, opt.picture_size, opt.heads}; }

  // A projection into a joint image-text space has no classes to explain but text embeddings' labels.
  int64_t classes() const { return m.classes(); }

  // Image k of the batch just run: its top class, maps and pictures (drawn as `d` says), into *e.
  void explain_one(const ViT::Plan& plan, int64_t k, const Image& photo, const Drawing& d, Explanation* e) const {
    const ViTConfig& c = network.config();
    const int64_t H = c.heads, T = c.tokens(), C = classes();
    // The image's own grid and tokens: a NaFlex image's (its attention the top left corner of the padded
    // batch's, ops.h), else the model's square.
    const PatchGrid grid = plan.grid_of(k);
    const int gh = grid.rows, gw = grid.cols;
    const int64_t N = grid.count(), Ti = c.prefix_tokens() + N;
    e->grid_rows = gh;
    e->grid_cols = gw;
    std::vector<float> scores;  // the zero-shot scores of the image embedding against the texts
    const float* logits = m.logits(plan, k, scores);
    e->logits.assign(logits, logits + C);
    const Scored top = m.zero_shot ? m.zero_shot->top(e->logits.data(), 1)[0] : top_k(e->logits.data(), C, 1)[0];
    e->top = {top.index, m.labels[size_t(top.index)], top.prob};
    std::vector<const float*> blocks;
    std::vector<std::vector<float>> own;  // a padded image's [H, Ti, Ti] cut from [H, T, T]
    for (int64_t l = 0; l < c.depth; ++l) {
      const float* a = plan.attention(l) + k * H * T * T;
      if (Ti == T) {
        blocks.push_back(a);
        continue;
      }
      std::vector<float>& b = own.emplace_back(size_t(H * Ti * Ti));
      for (int64_t r = 0; r < H * Ti; ++r)
        std::copy_n(a + (r / Ti * T + r % Ti) * T, Ti, b.data() + r * Ti);
      blocks.push_back(b.data());
    }
    e->rollout = attention_rollout(blocks, H, Ti, c.prefix_tokens(), query);
    e->last = query_attention(blocks.back(), H, Ti, c.prefix_tokens(), query);

    std::vector<float> shown = e->rollout;
    if (d.method == ExplainMethod::Last) {  // the heads' mean
      for (int64_t j = 0; j < N; ++j) {
        float s = 0;
        for (int64_t h = 0; h < H; ++h) s += e->last[size_t(h * N + j)];
        shown[size_t(j)] = s / float(H);
      }
    }
    // A NaFlex image is resized whole to its grid, no crop: the map covers the whole photo. Else the input's
    // window, of which the grid covers the top-left grid * P pixels (all of it when the size is a multiple).
    Rect window = c.naflex.on ? Rect{0, 0, double(photo.width), double(photo.height)}
                           : input_window(photo.width, photo.height, c.pre);
    if (!c.naflex.on) {
      window.w *= double(gw * c.patch) / double(c.img_w());
      window.h *= double(gh * c.patch) / double(c.img_h());
    }
    const std::string caption = fmt::format("{}  {:.2f}", e->top.label, e->top.prob);
    e->picture = encode_png(draw_attention(photo, window, {shown.data(), gh, gw}, caption, d.size),
                            opt.picture_software);
    if (!d.heads) return;
    std::vector<Heat> heats;
    std::vector<std::string> captions;
    for (int64_t h = 0; h < H; ++h) {
      heats.push_back({e->last.data() + h * N, gh, gw});
      captions.push_back("head " + std::to_string(h));
    }
    e->heads_picture = encode_png(draw_panels(photo, window, heats, captions, d.size), opt.picture_software);
  }

  // n inputs through the batch runner (decode(i) gives input i's image or throws), each batch's
  // Explanations to on_batch.
  void run(size_t n, const std::function<std::string(size_t)>& name, const DecodeFn& decode, const Drawing& d,
           const std::function<void(std::vector<Explanation>&)>& on_batch, const BetweenBatches& between) const {
    if (classes() == 0)
      throw Error(network.source(), "the model has no classifier head (embeddings only, or a projection into a joint "
                                  "image-text space without text embeddings): there is no class to explain");
    m.use_threads();
    run_batches(plans, n, {batch, true, {}}, decode, [&](const ViT::Plan& plan, std::vector<BatchItem>& items) {
      std::vector<Explanation> done = explain_batch(plan, items, name, d);
      on_batch(done);
    }, between);
  }

  // A batch the runner has just run: its images' explanations made on all threads, in input order.
  std::vector<Explanation> explain_batch(const ViT::Plan& plan, const std::vector<BatchItem>& items,
                                         const std::function<std::string(size_t)>& name, const Drawing& d) const {
    std::vector<Explanation> out(items.size());
    std::vector<std::exception_ptr> failures(items.size());
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t j = 0; j < items.size(); ++j) {
      const BatchItem& item = items[j];
      out[j].file = name(item.index);
      out[j].error = item.error;
      if (item.row < 0) continue;
      try {
        explain_one(plan, item.row, item.image, d, &out[j]);
      } catch (...) {
        failures[j] = std::current_exception();
      }
    }
    for (const std::exception_ptr& f : failures)
      if (f) std::rethrow_exception(f);
    return out;
  }
};

Explainer::~Explainer() = default;
Explainer::Explainer(Explainer&&) noexcept = default;
Explainer& Explainer::operator=(Explainer&&) noexcept = default;

// The settings are checked before the model is loaded.
Explainer::Explainer(const std::string& model, const ExplainOptions& options)
    : Explainer(Model(model, (checked(options), options)), options) {}

Explainer::Explainer(const Model& model, const ExplainerSettings& settings)
    : impl_(std::make_unique<Impl>(model, checked(settings))) {}

void Explainer::explain(const std::vector<ImagePath>& inputs,
                        const std::function<void(std::vector<Explanation>&)>& on_batch,
                        const BetweenBatches& between) const {
  const Impl& m = *impl_;
  const auto decode = [&](size_t i) {
    const ImagePath& in = inputs[i];
    if (!in.error.empty()) throw Error(in.file, in.error);
    if (is_video_name(in.file)) throw Error(in.file, "a video: attention is explained over images (classify or embed videos)");
    return decode_image_file(in.file, m.opt.max_pixels, m.opt.exif_transpose);
  };
  m.run(inputs.size(), [&](size_t i) { return inputs[i].file; }, decode, m.drawing(), on_batch, between);
}

std::vector<Explanation> Explainer::explain_encoded(const std::vector<std::pair<std::string, std::string>>& images,
                                                    const BetweenBatches& between) const {
  return explain_encoded(images, impl_->opt.method, impl_->opt.picture_size, between);
}

std::vector<Explanation> Explainer::explain_encoded(const std::vector<std::pair<std::string, std::string>>& images,
                                                    ExplainMethod method, int picture_size,
                                                    const BetweenBatches& between) const {
  const Impl& m = *impl_;
  check_picture_size(picture_size);
  const auto decode = [&](size_t i) {
    const std::string& bytes = images[i].second;
    return decode_image(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), images[i].first,
                        m.opt.max_pixels, m.opt.exif_transpose);
  };
  std::vector<Explanation> all;
  m.run(images.size(), [&](size_t i) { return images[i].first; }, decode, {method, picture_size, m.opt.heads}, [&](std::vector<Explanation>& batch) {
    for (Explanation& e : batch) all.push_back(std::move(e));
  }, between);
  return all;
}

int64_t Explainer::classes() const { return impl_->classes(); }
int64_t Explainer::heads() const { return impl_->network.config().heads; }
int64_t Explainer::grid_h() const { return impl_->network.config().naflex.on ? 0 : impl_->network.config().grid_h(); }
int64_t Explainer::grid_w() const { return impl_->network.config().naflex.on ? 0 : impl_->network.config().grid_w(); }
const std::vector<std::string>& Explainer::labels() const { return impl_->m.labels; }
Precision Explainer::precision() const { return impl_->network.precision(); }
ModelInfo Explainer::info() const { return impl_->m.info(); }

}  // namespace vit

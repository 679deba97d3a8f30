// vit::Explainer (vit/explain.h): an f32 ViT whose Plans keep every block's attention, run through the
// batch runner; each batch's maps (engine/explain/attention_maps.h) and pictures (picture.h) made on all
// threads, then handed over in input order.
#include "vit/explain.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <exception>

#include "engine/explain/attention_maps.h"
#include "engine/explain/picture.h"
#include "engine/image/image.h"
#include "library/labels.h"
#include "library/model_info.h"
#include "library/runner.h"
#include "models/vit.h"
#include "vit/topk.h"

namespace vit {
namespace {

// The attention a batch may keep: every block's [H, T, T] per image, at most this much in all.
constexpr int64_t kAttentionBudget = int64_t(256) << 20;
constexpr int64_t kMaxExplainBatch = 8;

ViT load_f32(const std::string& model, const ExplainOptions& o) {
  if (o.max_pixels < 1) throw ArgumentError("max_pixels must be positive, got " + std::to_string(o.max_pixels));
  if (o.threads < 0) throw ArgumentError("threads must be 0 (all cores) or more, got " + std::to_string(o.threads));
  if (o.picture_size < 64 || o.picture_size > 8192)
    throw ArgumentError("picture size " + std::to_string(o.picture_size) + " is out of range (64 to 8192)");
  if (o.img_size < 0 || o.img_size > kMaxInputSize)
    throw ArgumentError("image size " + std::to_string(o.img_size) + " is out of range (0 for the model's own, or 1 to " +
                        std::to_string(kMaxInputSize) + ")");
  set_threads(usable_threads(o.threads));
  ViT m = ViT::load(model, o.config, o.img_size, Precision::F32);
  // Its maps would be over each image's own grid, padded: not drawn yet.
  if (m.config().naflex)
    throw ArgumentError(m.source() + " is a NaFlex model (" + m.config().family + "): explaining it is not supported yet");
  return m;
}

}  // namespace

struct Explainer::Impl {
  Impl(ViT m, const ExplainOptions& o)
      : model(std::move(m)), opt(o), plans(model, ViT::PlanOptions{true}), threads(set_threads(0)) {
    const ViTConfig& c = model.config();
    const int64_t per_image = c.depth * c.heads * c.tokens() * c.tokens() * int64_t(sizeof(float));
    batch = std::clamp<int64_t>(kAttentionBudget / per_image, 1, kMaxExplainBatch);
    query = c.class_token ? Query::ClassToken : Query::MeanOfRows;
    if (classes() > 0) labels = resolve_labels(o.labels, c);
  }
  ViT model;  // declared before the pool, which points at it
  ExplainOptions opt;
  PlanPool plans;  // Plans that keep every block's attention
  int threads;
  int64_t batch = 1;
  Query query = Query::ClassToken;
  std::vector<std::string> labels;

  // A projection into a joint image-text space has no classes to explain.
  int64_t classes() const { return model.config().head_is_projection ? 0 : model.config().classes; }

  // Image k of the batch just run: its top class, maps and pictures, into *e.
  void explain_one(const ViT::Plan& plan, int64_t k, const Image& photo, Explanation* e) const {
    const ViTConfig& c = model.config();
    const int64_t H = c.heads, T = c.tokens(), N = c.patches(), C = classes();
    const int gh = int(c.grid_h()), gw = int(c.grid_w());
    const float* logits = plan.logits() + k * C;
    e->logits.assign(logits, logits + C);
    const Scored top = top_k(logits, C, 1)[0];
    e->top = {top.index, labels[size_t(top.index)], top.prob};
    std::vector<const float*> blocks;
    for (int64_t l = 0; l < c.depth; ++l) blocks.push_back(plan.attention(l) + k * H * T * T);
    e->rollout = attention_rollout(blocks, H, T, c.prefix_tokens(), query);
    e->last = query_attention(blocks.back(), H, T, c.prefix_tokens(), query);

    std::vector<float> shown = e->rollout;
    if (opt.method == ExplainMethod::Last) {  // the heads' mean
      for (int64_t j = 0; j < N; ++j) {
        float s = 0;
        for (int64_t h = 0; h < H; ++h) s += e->last[size_t(h * N + j)];
        shown[size_t(j)] = s / float(H);
      }
    }
    const Rect window = input_window(photo.width, photo.height, c.pre);
    const std::string caption = fmt::format("{}  {:.2f}", e->top.label, e->top.prob);
    e->picture = encode_png(draw_attention(photo, window, {shown.data(), gh, gw}, caption, opt.picture_size),
                            opt.picture_software);
    if (!opt.heads) return;
    std::vector<Heat> heats;
    std::vector<std::string> captions;
    for (int64_t h = 0; h < H; ++h) {
      heats.push_back({e->last.data() + h * N, gh, gw});
      captions.push_back("head " + std::to_string(h));
    }
    e->heads_picture = encode_png(draw_panels(photo, window, heats, captions, opt.picture_size), opt.picture_software);
  }

  // A batch the runner has just run: its images' explanations made on all threads, in input order.
  std::vector<Explanation> explain_batch(const ViT::Plan& plan, const std::vector<BatchItem>& items,
                                         const std::vector<ImagePath>& inputs) const {
    std::vector<Explanation> out(items.size());
    std::vector<std::exception_ptr> failures(items.size());
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t j = 0; j < items.size(); ++j) {
      const BatchItem& item = items[j];
      out[j].file = inputs[item.index].file;
      out[j].error = item.error;
      if (item.row < 0) continue;
      try {
        explain_one(plan, item.row, item.image, &out[j]);
      } catch (...) {
        failures[j] = std::current_exception();
      }
    }
    for (const std::exception_ptr& f : failures)
      if (f) std::rethrow_exception(f);
    return out;
  }
};

Explainer::Explainer(const std::string& model, const ExplainOptions& options)
    : impl_(std::make_unique<Impl>(load_f32(model, options), options)) {}

Explainer::~Explainer() = default;
Explainer::Explainer(Explainer&&) noexcept = default;
Explainer& Explainer::operator=(Explainer&&) noexcept = default;

void Explainer::explain(const std::vector<ImagePath>& inputs,
                        const std::function<void(std::vector<Explanation>&)>& on_batch,
                        const BetweenBatches& between) const {
  const Impl& m = *impl_;
  if (m.classes() == 0)
    throw Error(m.model.source(), "the model has no classifier head (embeddings only, or a projection into a joint "
                                  "image-text space): there is no class to explain");
  set_threads(m.threads);
  const auto decode = [&](size_t i) {
    const ImagePath& in = inputs[i];
    if (!in.error.empty()) throw Error(in.file, in.error);
    if (is_video_name(in.file)) throw Error(in.file, "a video: attention is explained over images (classify or embed videos)");
    return decode_image_file(in.file, m.opt.max_pixels, m.opt.exif_transpose);
  };
  run_batches(m.plans, inputs.size(), {m.batch, true}, decode, [&](const ViT::Plan& plan, std::vector<BatchItem>& items) {
    std::vector<Explanation> done = m.explain_batch(plan, items, inputs);
    on_batch(done);
  }, between);
}

int64_t Explainer::classes() const { return impl_->classes(); }
int64_t Explainer::heads() const { return impl_->model.config().heads; }
int64_t Explainer::grid_h() const { return impl_->model.config().grid_h(); }
int64_t Explainer::grid_w() const { return impl_->model.config().grid_w(); }
const std::vector<std::string>& Explainer::labels() const { return impl_->labels; }
ModelInfo Explainer::info() const {
  set_threads(impl_->threads);
  return model_info(impl_->model, impl_->plans);
}

}  // namespace vit

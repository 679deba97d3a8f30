// The served models of models.h: finding them, pricing images against the pixel budget, and
// the metrics families of the work they do, each sample labelled with its model.
#include "models.h"

#include <chrono>
#include <cstdio>

namespace vit::app {

namespace {

// The pixels decoding an image will hold, priced from its header before it is queued: its size; the most
// an image may have for a format whose header only its decoder reads (TIFF, JPEG 2000, PNM); nothing for
// bytes that are no image or an image over the limit, which are refused before decoding.
int64_t decode_pixels(const std::string& bytes, int64_t max_pixels) {
  const ImageHeader h = read_image_header(bytes);
  if (!h.image) return 0;
  if (h.width == 0) return max_pixels;
  return h.width > max_pixels / h.height ? 0 : h.width * h.height;
}

std::string megapixels(int64_t pixels) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", double(pixels) / 1e6);
  return buf;
}

std::string quoted_names(const std::vector<std::unique_ptr<ServedModel>>& models) {
  std::string names;
  for (const auto& m : models) names += (names.empty() ? "'" : ", '") + m->name + "'";
  return names;
}

}  // namespace

Service::Service(const ServiceOptions& options, Metrics& metrics)
    : opt_(options), metrics_(metrics), pixels_(options.max_queue_pixels),
      started_(double(std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count())) {
  metrics_.histogram("vit_queue_wait_seconds", "Time a request waited in its model's batch queue.",
                     {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10});
  metrics_.histogram("vit_batch_size", "Images per forward pass.", {1, 2, 4, 8, 16, 32, 64, 128, 256});
  metrics_.histogram("vit_inference_duration_seconds", "Decode, preprocessing and forward pass of one batch.",
                     {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10});
  metrics_.counter("vit_images_classified_total", "Images answered (classified or embedded).");
  metrics_.counter("vit_images_failed_total", "Images that could not be answered (undecodable, too large).");
  metrics_.counter("vit_texts_embedded_total", "Texts answered by a model's text tower.");
  metrics_.counter("vit_texts_failed_total", "Texts that could not be embedded (empty, a NUL byte, not UTF-8).");
  metrics_.read("vit_queued_pixels", Metrics::Kind::Gauge,
                "Pixels the queued images declare (waiting or being decoded), at most --max-queue-mp.", {},
                [this] { return double(pixels_.used()); });
}

void Service::add(std::unique_ptr<ServedModel> model) {
  const ServedModel* m = model.get();
  for (const char* name : {"vit_queue_wait_seconds", "vit_batch_size", "vit_inference_duration_seconds",
                           "vit_images_classified_total", "vit_images_failed_total"})
    metrics_.start(name, m->labels());
  if (m->text)
    for (const char* name : {"vit_texts_embedded_total", "vit_texts_failed_total"}) metrics_.start(name, m->labels());
  metrics_.read("vit_queue_depth", Metrics::Kind::Gauge, "Images waiting for a forward pass.", m->labels(),
                [m] { return double(m->batcher->queued()); });
  metrics_.read("vit_images_dropped_total", Metrics::Kind::Counter,
                "Images dropped unrun: their client had gone (or their deadline answered them) before their pass.",
                m->labels(), [m] { return double(m->batcher->dropped()); });
  metrics_.read("vit_model_ready", Metrics::Kind::Gauge, "1 once the model has run every batch size it runs.",
                m->labels(), [m] { return m->ready ? 1.0 : 0.0; });
  models_.push_back(std::move(model));
}

ServedModel& Service::model(const std::string& name) const {
  for (const auto& m : models_)
    if (m->name == name) return *m;
  throw HttpError(404, "no model named '" + name + "'; this server has " + quoted_names(models_), "model");
}

ServedModel& Service::only_model(const std::string& how_to_name) const {
  if (models_.size() != 1)
    throw HttpError(400, "this server has several models (" + quoted_names(models_) + "): name one with " + how_to_name,
                    "model");
  return *models_.front();
}

bool Service::ready() const {
  if (draining_) return false;
  for (const auto& m : models_)
    if (!m->ready) return false;
  return !models_.empty();
}

Budget::Lease Service::take_pixels(const EncodedImages& images) {
  int64_t pixels = 0;
  for (const auto& im : images) pixels += decode_pixels(im.second, opt_.max_pixels);
  if (pixels > pixels_.limit())
    throw HttpError(413, "the images of this request hold " + megapixels(pixels) + " megapixels; the server holds "
                         "at most " + megapixels(pixels_.limit()) + " at once (--max-queue-mp)");
  std::optional<Budget::Lease> lease = pixels_.lease(pixels);
  if (!lease)
    throw busy("the queued images hold " + megapixels(pixels_.used()) + " of at most " + megapixels(pixels_.limit()) +
               " megapixels (--max-queue-mp)");
  return std::move(*lease);
}

void Service::check_queue_room(int64_t n) const {
  if (n > opt_.max_queue)
    throw HttpError(413, std::to_string(n) + " images in one request; at most " + std::to_string(opt_.max_queue) +
                             " (--max-queue)");
}

HttpError Service::queue_full() const {
  return busy("the queue is full (" + std::to_string(opt_.max_queue) + " images, --max-queue)");
}

const Explainer& ServedModel::explainer() {
  if (!explainer_ && explainer_error_.empty()) {
    try {
      explainer_ = std::make_unique<Explainer>(classifier->model(), explain_settings);
      if (explainer_->classes() == 0) throw Error("model has no classes to explain");
    } catch (const std::exception& e) {
      explainer_.reset();
      explainer_error_ = e.what();
    }
  }
  if (!explainer_) throw HttpError(400, "model '" + name + "' cannot be explained: " + explainer_error_);
  return *explainer_;
}

bool ServedModel::queue_texts(std::vector<std::string> texts, bool normalize, std::function<bool()> wanted,
                              std::function<void(std::vector<TextEmbedding>)> done,
                              std::function<void(const HttpError&)> fail) const {
  const int64_t n = int64_t(texts.size());
  auto in = std::make_shared<std::vector<std::string>>(std::move(texts));
  const TextModel* tower = text.get();
  return batcher->take_turn([in, normalize, tower, wanted = std::move(wanted), done = std::move(done),
                             fail = std::move(fail)] {
    if (!wanted()) return fail(HttpError(400, Batcher::kDropped));
    try {
      done(tower->embed(*in, normalize));
    } catch (const std::exception& e) {
      fail(HttpError(400, e.what(), "input"));
    }
  }, n);
}

void Service::require_classes(const ServedModel& m) {
  if (m.classes > 0) return;
  throw HttpError(400, "model '" + m.name + "' has no classifier head (embeddings only): ask POST /v1/embeddings or "
                       "KServe's 'embedding' output (a CLIP or SigLIP tower served with --text-embeddings labels images" +
                       std::string(m.text ? ", and this one takes labels per request: /v1/classify?labels=tench,goldfish" : "") +
                       ")");
}

void Service::images_done(const ServedModel& m, int64_t done, int64_t failed) {
  metrics_.add("vit_images_classified_total", m.labels(), double(done));
  metrics_.add("vit_images_failed_total", m.labels(), double(failed));
}

void Service::texts_done(const ServedModel& m, int64_t done, int64_t failed) {
  metrics_.add("vit_texts_embedded_total", m.labels(), double(done));
  metrics_.add("vit_texts_failed_total", m.labels(), double(failed));
}

void Service::batch_done(const ServedModel& m, const BatchStats& s) {
  metrics_.observe("vit_batch_size", m.labels(), double(s.images));
  metrics_.observe("vit_inference_duration_seconds", m.labels(), s.run_s);
  for (double w : s.waits_s) metrics_.observe("vit_queue_wait_seconds", m.labels(), w);
}

}  // namespace vit::app

// The served models of models.h: finding them, pricing images against the pixel budget, and the metrics
// families of the work they do.
#include "models.h"

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

}  // namespace

Service::Service(const ServiceOptions& options, Metrics& metrics)
    : opt_(options), metrics_(metrics), pixels_(options.max_queue_pixels) {
  metrics_.histogram("vit_queue_wait_seconds", "Time a request waited in the batch queue.",
                     {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10});
  metrics_.histogram("vit_batch_size", "Images per forward pass.", {1, 2, 4, 8, 16, 32, 64, 128, 256});
  metrics_.histogram("vit_inference_duration_seconds", "Decode, preprocessing and forward pass of one batch.",
                     {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10});
  for (const char* name : {"vit_queue_wait_seconds", "vit_batch_size", "vit_inference_duration_seconds"})
    metrics_.start(name, {});
  metrics_.read("vit_queue_depth", Metrics::Kind::Gauge, "Images waiting for a forward pass.", {}, [this] {
    int64_t n = 0;
    for (const auto& m : models_) n += m->batcher->queued();
    return double(n);
  });
  metrics_.counter("vit_images_classified_total", "Images classified.");
  metrics_.counter("vit_images_failed_total", "Images that could not be classified (undecodable, too large).");
  metrics_.read("vit_queued_pixels", Metrics::Kind::Gauge,
                "Pixels the queued images declare (waiting or being decoded), at most --max-queue-mp.", {},
                [this] { return double(pixels_.used()); });
}

void Service::add(std::unique_ptr<ServedModel> model) { models_.push_back(std::move(model)); }

ServedModel& Service::model(const std::string& name) const {
  for (const auto& m : models_)
    if (m->name == name) return *m;
  std::string names;
  for (const auto& m : models_) names += (names.empty() ? "'" : ", '") + m->name + "'";
  throw HttpError(404, "no model named '" + name + "'; this server has " + names, "model");
}

bool Service::ready() const {
  for (const auto& m : models_)
    if (!m->ready) return false;
  return !models_.empty();
}

int64_t Service::take_pixels(const EncodedImages& images) {
  int64_t pixels = 0;
  for (const auto& im : images) pixels += decode_pixels(im.second, opt_.max_pixels);
  if (pixels > pixels_.limit())
    throw HttpError(413, "the images of this request hold " + megapixels(pixels) + " megapixels; the server holds "
                         "at most " + megapixels(pixels_.limit()) + " at once (--max-queue-mp)");
  if (!pixels_.take(pixels))
    throw busy("the queued images hold " + megapixels(pixels_.used()) + " of at most " + megapixels(pixels_.limit()) +
               " megapixels (--max-queue-mp)");
  return pixels;
}

void Service::check_queue_room(int64_t n) const {
  if (n > opt_.max_queue)
    throw HttpError(413, std::to_string(n) + " images in one request; at most " + std::to_string(opt_.max_queue) +
                             " (--max-queue)");
}

HttpError Service::queue_full() const {
  return busy("the queue is full (" + std::to_string(opt_.max_queue) + " images, --max-queue)");
}

void Service::require_classes(const ServedModel& m) {
  if (m.classes == 0) throw HttpError(400, "model '" + m.name + "' has no classifier head (embeddings only)");
}

void Service::images_done(int64_t classified, int64_t failed) {
  metrics_.add("vit_images_classified_total", {}, double(classified));
  metrics_.add("vit_images_failed_total", {}, double(failed));
}

void Service::batch_done(const BatchStats& s) {
  metrics_.observe("vit_batch_size", {}, double(s.images));
  metrics_.observe("vit_inference_duration_seconds", {}, s.run_s);
  for (double w : s.waits_s) metrics_.observe("vit_queue_wait_seconds", {}, w);
}

}  // namespace vit::app

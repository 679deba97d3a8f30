// The models `vit serve` serves and what every endpoint shares about them: each model's Classifier and
// batching queue, finding a model by name (404 naming the served ones), pricing a request's images in
// pixels from their headers against --max-queue-mp before they are queued, and the metrics of the work.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "budget.h"
#include "http.h"
#include "metrics.h"
#include "vit/batcher.h"
#include "vit/vit.h"

namespace vit::app {

using EncodedImages = std::vector<std::pair<std::string, std::string>>;  // (name, bytes)

struct ServedModel {
  std::string name;
  std::unique_ptr<Classifier> classifier;
  std::unique_ptr<Batcher> batcher;
  ModelInfo info;
  int64_t classes = 0;  // the labels it answers: 0 for a model without a classifier head
  std::atomic<bool> ready{false};
};

struct ServiceOptions {
  int max_batch = 16;
  int max_queue = 256;                     // images queued at most, per model
  int64_t max_pixels = 40'000'000;         // one image
  int64_t max_queue_pixels = 64'000'000;   // the queued images of all models
};

class Service {
 public:
  Service(const ServiceOptions& options, Metrics& metrics);
  // Takes a loaded model; its batching queue starts here.
  void add(std::unique_ptr<ServedModel> model);

  const ServiceOptions& options() const { return opt_; }
  Metrics& metrics() { return metrics_; }
  const std::vector<std::unique_ptr<ServedModel>>& models() const { return models_; }
  // The model a request names; throws 404 naming the served ones.
  ServedModel& model(const std::string& name) const;
  bool ready() const;

  // Prices encoded images in pixels from their headers and takes them from --max-queue-mp: throws 413
  // for more than the whole budget, 503 (Retry-After) when it is full now. Returns what to give back.
  int64_t take_pixels(const EncodedImages& images);
  void give_pixels(int64_t pixels) { pixels_.give(pixels); }
  // A request of n images must fit in the queue at all (413), then find room in it now (503).
  void check_queue_room(int64_t n) const;
  HttpError queue_full() const;
  // A model without a classifier head asked for classes: 400.
  static void require_classes(const ServedModel& m);

  // The work done, for /metrics.
  void images_done(int64_t classified, int64_t failed);
  void batch_done(const BatchStats& stats);

 private:
  ServiceOptions opt_;
  Metrics& metrics_;
  Budget pixels_;
  std::vector<std::unique_ptr<ServedModel>> models_;
};

}  // namespace vit::app

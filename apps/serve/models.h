// The models `vit serve` serves and what every endpoint shares about them: each model's Classifier,
// batching queue and embedding, finding a model by name (404 naming the served ones), pricing a request's
// images in pixels from their headers against --max-queue-mp before they are queued, and the per-model
// metrics of the work.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "budget.h"
#include "http.h"
#include "metrics.h"
#include "vit/batcher.h"
#include "vit/explain.h"
#include "vit/text.h"
#include "vit/vit.h"

namespace vit::app {

using EncodedImages = std::vector<std::pair<std::string, std::string>>;  // (name, bytes)

struct ServedModel {
  std::string name;
  std::unique_ptr<Classifier> classifier;
  std::unique_ptr<Batcher> batcher;
  ModelInfo info;
  int64_t classes = 0;       // the labels it answers (its head's, or text embeddings'); 0: none
  bool head_embedding = false;  // the embedding it serves is its head's output (else the pre-logits)
  int64_t embedding_size = 0;
  std::atomic<bool> ready{false};
  // /v1/explain: an Explainer over the classifier's Model (the same weights, at the served precision),
  // whose Plans keep every block's attention, made at the model's first explain request, on the thread its
  // passes run on (one at a time); throws HttpError 400 for a model it cannot explain.
  ExplainerSettings explain_settings;
  const Explainer& explainer();
  std::unique_ptr<Explainer> explainer_;
  std::string explainer_error_;  // why it could not be loaded, answered to every explain request
  // The text tower of a CLIP or SigLIP checkpoint whose served embedding is its image projection (the space
  // both towers share), loaded beside the image tower at its precision; null, with the reason said to every
  // text, for a model without one.
  std::unique_ptr<TextModel> text;
  std::string text_error;  // "model 'x' has no text tower: ..."
  // Texts for its text tower, embedded in their own turn in its queue: done gets each text's embedding (or that
  // text's error), fail the error that stopped them all (400: the client gone, Batcher::kDropped, or what the tower
  // threw). Returns false, queueing nothing, when the queue has no room. Needs `text`.
  bool queue_texts(std::vector<std::string> texts, bool normalize, std::function<bool()> wanted,
                   std::function<void(std::vector<TextEmbedding>)> done,
                   std::function<void(const HttpError&)> fail) const;
  Labels labels() const { return {{"model", name}}; }  // its metrics' labels
  // Its embedding options; normalize: unit length.
  EmbedOptions embed(bool normalize) const {
    EmbedOptions o;
    o.head = head_embedding;
    o.normalize = normalize;
    return o;
  }
};

struct ServiceOptions {
  int max_batch = 16;
  int max_queue = 256;                     // images queued at most, per model
  int max_inputs = 256;                    // inputs of one /v1/embeddings request
  int64_t max_pixels = 40'000'000;         // one image
  int64_t max_queue_pixels = 64'000'000;   // the queued images of all models
};

class Service {
 public:
  Service(const ServiceOptions& options, Metrics& metrics);
  // Takes a loaded model; its batching queue is running.
  void add(std::unique_ptr<ServedModel> model);

  const ServiceOptions& options() const { return opt_; }
  Metrics& metrics() { return metrics_; }
  const std::vector<std::unique_ptr<ServedModel>>& models() const { return models_; }
  // The model a request names; throws 404 naming the served ones.
  ServedModel& model(const std::string& name) const;
  // The one model a request that names none means; several served: 400 asking for a name.
  ServedModel& only_model(const std::string& how_to_name) const;
  bool ready() const;  // false once draining
  void drain() { draining_ = true; }
  double started() const { return started_; }  // seconds since the epoch

  // Prices encoded images in pixels from their headers and takes them from --max-queue-mp: throws 413
  // for more than the whole budget, 503 (Retry-After) when it is full now. The lease gives them back
  // (Reply::hold: when the request is answered).
  Budget::Lease take_pixels(const EncodedImages& images);
  // A request of n images must fit in a queue at all (413).
  void check_queue_room(int64_t n) const;
  HttpError queue_full() const;
  // A model without classes asked for some: 400 pointing to what it answers.
  static void require_classes(const ServedModel& m);

  // The work done, for /metrics.
  void images_done(const ServedModel& m, int64_t done, int64_t failed);
  void texts_done(const ServedModel& m, int64_t done, int64_t failed);
  void batch_done(const ServedModel& m, const BatchStats& stats);

 private:
  ServiceOptions opt_;
  Metrics& metrics_;
  Budget pixels_;
  std::vector<std::unique_ptr<ServedModel>> models_;
  double started_;
  std::atomic<bool> draining_{false};
};

}  // namespace vit::app

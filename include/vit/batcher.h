// Dynamic batching over a vit::Classifier: requests from many threads wait in one bounded queue, and one
// thread runs them together, a forward pass as soon as the previous one ends, taking every waiting image
// up to max_batch. A full queue refuses at once rather than waiting. What `vit serve` and Python's
// vit.Batcher run on: classification and embeddings of encoded or decoded images, logits and embeddings of
// tensors, and work of the caller's own (explaining an image) taking its turn.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "vit/vit.h"

namespace vit {

struct BatcherOptions {
  int max_batch = 16;    // images per forward pass at most (a larger request runs alone, in slices)
  int max_delay_ms = 0;  // after the first waiting image, wait this much longer for a fuller batch
  int max_queue = 256;   // images waiting at most; a request that would pass it is refused
  // If set, each pass (decoding included) runs as pass() inside it, on the batching thread: how the
  // batchers of several models take turns on the cores. Unset, passes run as they come.
  std::function<void(const std::function<void()>& pass)> around_pass;
};

// One forward pass's figures, for metrics.
struct BatchStats {
  int64_t images = 0;            // images in the pass (failed decodes included)
  double run_s = 0;              // decode, preprocessing and inference
  std::vector<double> waits_s;   // each request's time in the queue
};

class Batcher {
 public:
  using ResultsDone = std::function<void(std::vector<Result>)>;
  using EmbeddingsDone = std::function<void(std::vector<Embedding>)>;
  // rows [n, logits_size()] or [n, embedding_size()], or empty with the error that stopped the pass.
  using LogitsDone = std::function<void(std::vector<float> rows, std::string error)>;

  // The classifier must outlive the batcher; made with batch >= options.max_batch, each batch is one
  // forward pass (else several). on_batch, if given, is called on the batching thread after each pass.
  Batcher(const Classifier& classifier, const BatcherOptions& options,
          std::function<void(const BatchStats&)> on_batch = {});
  ~Batcher();  // close()
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues encoded images (name, bytes) for classify_encoded; done gets their Results on the batching
  // thread, in order. Returns false, queueing nothing, when they do not fit in the queue or after close().
  bool submit(std::vector<std::pair<std::string, std::string>> images, int topk, ResultsDone done);
  // Decoded images for classify_pixels; their pixels must stay valid until done is called.
  bool submit(std::vector<Pixels> images, int topk, ResultsDone done);
  // Images to embed with these options (their video sampling unused), encoded (as embed_encoded takes
  // them) or decoded (as embed_pixels does; valid until done is called): done gets their Embeddings in
  // order. Requests with the same options share forward passes.
  bool submit(std::vector<std::pair<std::string, std::string>> images, const EmbedOptions& options, EmbeddingsDone done);
  bool submit(std::vector<Pixels> images, const EmbedOptions& options, EmbeddingsDone done);
  // Queues n preprocessed images [n, 3, H, W] for logits().
  bool submit(std::vector<float> pixels, int64_t n, LogitsDone done);
  // The same for embeddings() with these options (their tokens and video aside): rows [n, embedding_size()].
  bool submit(std::vector<float> pixels, int64_t n, const EmbedOptions& options, LogitsDone done);
  // Work of the caller's own that uses the cores (explaining an image on Plans of its own), counted as
  // `images` in the queue: it runs alone on the batching thread in its turn, inside around_pass.
  bool submit(std::function<void()> work, int64_t images);

  int64_t queued() const;  // images waiting
  // Refuses new requests, answers every queued one, and stops the batching thread.
  void close();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace vit

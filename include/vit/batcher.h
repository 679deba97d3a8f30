// Dynamic batching over a vit::Classifier: requests from many threads wait in one bounded queue, and one
// thread runs them together, a forward pass as soon as the previous one ends, taking every waiting image
// up to max_batch. A full queue refuses at once rather than waiting. What `vit serve` and Python's
// vit.Batcher run on: classification and embeddings of encoded or decoded images, logits and embeddings of
// tensors, and work of the caller's own (explaining an image) taking its turn; a request no longer wanted when
// its turn comes (its client gone) is dropped unrun. A ComputeThread lets the batchers of several models run
// every pass on one thread, the one that loaded them.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "vit/request.h"
#include "vit/vit.h"

namespace vit {

// One thread that runs the work handed to it, one piece at a time, first come first served. OpenMP keeps
// a team of threads for every thread that runs a parallel region, and once a process has more of them
// than cores, libgomp's barriers stop spinning and sleep (a forward pass has hundreds of barriers, each
// then a wake-up): a program that loads models and runs their passes on one ComputeThread has one team,
// as a command-line run has, and the passes of several models take turns on the cores.
class ComputeThread {
 public:
  ComputeThread();
  ~ComputeThread();  // runs what was handed over, then ends the thread
  ComputeThread(const ComputeThread&) = delete;
  ComputeThread& operator=(const ComputeThread&) = delete;

  // Runs work on this thread after what was handed over before it, and returns when it has run,
  // rethrowing what it threw. Called on this thread (from work), runs it at once.
  void run(const std::function<void()>& work);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

struct BatcherOptions {
  int max_batch = 16;    // images per forward pass at most (a larger request runs alone, in slices)
  int max_delay_ms = 0;  // after the first waiting image, wait this much longer for a fuller batch
  int max_queue = 256;   // images waiting at most; a request that would pass it is refused
  // If set, each pass (decoding included, and on_batch and the answers) runs on this thread, which the
  // batchers of several models may share; load the classifier on it too (ComputeThread). Unset, passes
  // run on the batching thread.
  std::shared_ptr<ComputeThread> compute;
};

// One forward pass's figures, for metrics.
struct BatchStats {
  int64_t images = 0;            // images in the pass (failed decodes included)
  double run_s = 0;              // decode, preprocessing and inference
  std::vector<double> waits_s;   // each request's time in the queue
};

class Batcher {
 public:
  // A request's answer (vit/request.h), where passes run: one item per input in order, each image with its own
  // error where it failed (a failed pass: every image that error); tensors: rows, or none and the error.
  using Done = std::function<void(Answer)>;
  // Whether a request's answer is still wanted (a server: its client has not gone away), asked when its
  // turn comes, before its pass. false drops it unrun: done gets each image's error, kDropped (tensors: no
  // rows and kDropped), and dropped() counts its images. Unset: always wanted.
  using Wanted = std::function<bool()>;
  static constexpr const char* kDropped = "not run: its answer was no longer wanted when its turn came";

  // The classifier must outlive the batcher; made with batch >= options.max_batch, each batch is one
  // forward pass (else several). on_batch, if given, is called after each pass where passes run.
  Batcher(const Classifier& classifier, const BatcherOptions& options,
          std::function<void(const BatchStats&)> on_batch = {});
  ~Batcher();  // close()
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues a request, answered as Classifier::run answers it; requests of the same input kind and output (and
  // embedding options) share forward passes, each image's answer what it would be alone. Decoded pixels must stay
  // valid until done is called. Returns false, queueing nothing, when its images do not fit in the queue or
  // after close(); throws vit::ArgumentError for a request its inputs cannot answer (check_request) or tensors
  // not of the model's input size.
  bool submit(Request request, Done done, Wanted wanted = {});
  // Work of the caller's own that uses the cores (explaining an image on Plans of its own), counted as
  // `images` in the queue: it runs alone in its turn, where passes run (the batching or compute thread).
  bool take_turn(std::function<void()> work, int64_t images);

  int64_t queued() const;   // images waiting
  int64_t dropped() const;  // images dropped unrun so far, their answers no longer wanted (Wanted)
  // Refuses new requests, answers every queued one, and stops the batching thread.
  void close();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace vit

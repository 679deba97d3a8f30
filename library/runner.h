// One road from inputs to answers: each batch's images decoded on all threads and preprocessed into a
// Plan's input, the forward pass run on the ones that decoded, and the batch handed to the caller in input
// order, each failed input with its error. vit::Classifier (classify, eval), `vit explain`, embeddings
// and `vit quantize`'s calibration all run through run_batches; a PlanPool keeps the Plans they run, one kind of Plan per pool.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/image/image.h"
#include "models/network.h"
#include "vit/vit.h"

namespace vit {

// Plans of one kind (PlanOptions) for one model, by batch size: take() hands out a Plan that is the
// caller's alone until give_back(), so several threads can run the same model at once. The model must
// outlive the pool.
class PlanPool {
 public:
  explicit PlanPool(const ViT& model, ViT::PlanOptions options = {}) : model_(&model), options_(options) {}
  std::unique_ptr<ViT::Plan> take(int64_t B) const;
  void give_back(std::unique_ptr<ViT::Plan> plan) const;
  const ViT& model() const { return *model_; }

 private:
  const ViT* model_;
  ViT::PlanOptions options_;
  mutable std::mutex mu_;                                                  // guards idle_
  mutable std::map<int64_t, std::vector<std::unique_ptr<ViT::Plan>>> idle_;  // by batch size
};

// The batch size of the Plan the next `left` images run in: the batch, or for fewer images the largest
// power of two among them, so that a process meets a few sizes of Plan (each keeps its activations).
int64_t plan_batch(int64_t left, int64_t batch);

// One input of a batch, after its forward pass.
struct BatchItem {
  size_t index = 0;   // its place among the run's inputs
  std::string error;  // why it was not run (unreadable, not an image, ...); empty when it ran
  int64_t row = -1;   // its row in the Plan's outputs (logits(), attention()) when it ran
  Image image;        // the decoded image, with RunOptions::keep_images
};

struct RunOptions {
  int64_t batch = 8;         // inputs per forward pass
  bool keep_images = false;  // keep each decoded image in its BatchItem (explain draws on them)
  ViT::TapFn taps;           // if set, each forward pass reports its intermediate tensors (vit quantize calibrates so)
};

// decode(i): input i as an image, or throws vit::Error (its problem() becomes the item's error).
using DecodeFn = std::function<Image(size_t i)>;
// on_batch(plan, items): after each forward pass, that batch's items in input order; the Plan holds the
// outputs of the items that ran until on_batch returns.
using BatchFn = std::function<void(const ViT::Plan& plan, std::vector<BatchItem>& items)>;

// Runs inputs 0..n-1, o.batch at a time, on the calling thread's OpenMP threads. between (if set) is
// called after each batch but the last: false stops the run, which then throws vit::Interrupted.
void run_batches(const PlanPool& plans, size_t n, const RunOptions& o, const DecodeFn& decode,
                 const BatchFn& on_batch, const BetweenBatches& between = {});

// Throws vit::Interrupted when a BetweenBatches hook asks to stop.
void check_between(const BetweenBatches& between);

}  // namespace vit

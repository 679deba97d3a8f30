// The batch runner of runner.h: decode and preprocess in parallel, close the holes failures leave so
// the good inputs run as one forward pass, hand the batch over, give the Plans back.
#include "models/runner.h"

#include <cstring>

#include "engine/preprocess/preprocess.h"
#include "vit/error.h"

namespace vit {

std::unique_ptr<ViT::Plan> PlanPool::take(int64_t B) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& idle = idle_[B];
    if (!idle.empty()) {
      auto p = std::move(idle.back());
      idle.pop_back();
      return p;
    }
  }
  return model_->make_plan(B, options_);
}

void PlanPool::give_back(std::unique_ptr<ViT::Plan> plan) const {
  std::lock_guard<std::mutex> lock(mu_);
  idle_[plan->batch()].push_back(std::move(plan));
}

void check_between(const BetweenBatches& between) {
  if (between && !between()) throw Interrupted("stopped between batches, as the caller asked");
}

void run_batches(const PlanPool& plans, size_t n, const RunOptions& o, const DecodeFn& decode,
                 const BatchFn& on_batch, const BetweenBatches& between) {
  check_batch_size(o.batch);
  const ViTConfig& c = plans.model().config();
  const size_t per_image = size_t(c.input_floats()), batch = size_t(o.batch);
  for (size_t first = 0; first < n; first += batch) {
    const size_t count = std::min(batch, n - first);
    auto plan = plans.take(int64_t(count));
    float* pixels = plan->input();
    std::vector<BatchItem> items(count);
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t j = 0; j < count; ++j) {
      BatchItem& item = items[j];
      item.index = first + j;
      try {
        Image image = decode(first + j);
        preprocess(image, c.pre, pixels + per_image * j);
        if (o.keep_images) item.image = std::move(image);
      } catch (const Error& e) {
        item.error = e.problem();
      } catch (const std::exception& e) {  // std::bad_alloc from a huge image, say
        item.error = e.what();
      }
    }
    int64_t good = 0;  // close the holes the failures left, so the good images run as one batch
    for (size_t j = 0; j < count; ++j) {
      if (!items[j].error.empty()) continue;
      if (size_t(good) != j) std::memmove(pixels + per_image * size_t(good), pixels + per_image * j, per_image * sizeof(float));
      items[j].row = good++;
    }
    if (good > 0 && size_t(good) < count) {
      auto smaller = plans.take(good);
      std::memcpy(smaller->input(), pixels, per_image * size_t(good) * sizeof(float));
      std::swap(plan, smaller);
      plans.give_back(std::move(smaller));
    }
    if (good > 0) plan->run();
    on_batch(*plan, items);
    plans.give_back(std::move(plan));
    if (first + count < n) check_between(between);
  }
}

}  // namespace vit

// The batch runner of runner.h: decode and preprocess in parallel, run the good inputs together (in the
// Plan they were decoded into, or copied once into Plans of powers of two when failures or a short batch
// leave fewer), hand them over, give the Plans back.
#include "library/runner.h"

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

int64_t plan_batch(int64_t left, int64_t batch) {
  if (left >= batch) return batch;
  int64_t p = 1;
  while (p * 2 <= left) p *= 2;
  return p;
}

namespace {

const float* run_plan(const ViT::Plan& plan, const RunOptions& o) { return o.taps ? plan.run(o.taps) : plan.run(); }

// Runs the good (fewer than a batch) decoded images, rows[i] the place at src of the i-th (each good item's row
// set to i), in Plans of powers of two, largest first: each image copied once into its Plan. on_batch once per
// Plan with the items up to its last row (errors go with the Plan after them, trailing ones with the last), so
// that the items still reach it in input order.
void run_in_parts(const PlanPool& plans, const float* src, const std::vector<size_t>& rows,
                  const std::vector<PatchGrid>& grids, const RunOptions& o, size_t per_image,
                  std::vector<BatchItem>& items, const BatchFn& on_batch) {
  const int64_t good = int64_t(rows.size());
  size_t next = 0;  // the first item not yet handed over
  for (int64_t first = 0; first < good;) {
    const int64_t size = plan_batch(good - first, o.batch);
    auto part = plans.take(size);
    for (int64_t b = 0; b < size; ++b) {
      const size_t j = rows[size_t(first + b)];
      std::memcpy(part->input() + per_image * size_t(b), src + per_image * j, per_image * sizeof(float));
      part->set_grid(b, grids[j]);
    }
    run_plan(*part, o);
    std::vector<BatchItem> mine;
    for (; next < items.size() && items[next].row < first + size; ++next) {
      mine.push_back(std::move(items[next]));
      if (mine.back().row >= 0) mine.back().row -= first;
    }
    first += size;
    if (first == good)
      for (; next < items.size(); ++next) mine.push_back(std::move(items[next]));
    on_batch(*part, mine);
    plans.give_back(std::move(part));
  }
}

}  // namespace

void run_batches(const PlanPool& plans, size_t n, const RunOptions& o, const DecodeFn& decode,
                 const BatchFn& on_batch, const BetweenBatches& between) {
  check_batch_size(o.batch);
  const ViTConfig& c = plans.model().config();
  const size_t per_image = size_t(c.input_floats()), batch = size_t(o.batch);
  std::vector<float> staging;  // a batch smaller than o.batch, before it runs in parts
  for (size_t first = 0; first < n; first += batch) {
    const size_t count = std::min(batch, n - first);
    // A full batch runs in a Plan of its size; a smaller one (the last, a server's, one with failures)
    // in Plans of powers of two, so that a process meets a few sizes of Plan, not every size up to the
    // batch (each Plan keeps its activations: a server would keep them all).
    std::unique_ptr<ViT::Plan> plan;
    if (count == batch) {
      plan = plans.take(int64_t(batch));
    } else {
      staging.resize(per_image * count);
    }
    float* pixels = plan ? plan->input() : staging.data();
    std::vector<BatchItem> items(count);
    std::vector<PatchGrid> grids(count);  // each image's grid of patches (a NaFlex model's own per image)
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t j = 0; j < count; ++j) {
      BatchItem& item = items[j];
      item.index = first + j;
      try {
        Image image = decode(first + j);
        grids[j] = plans.model().prepare_input(image, pixels + per_image * j);
        if (o.keep_images) item.image = std::move(image);
      } catch (const Error& e) {
        item.error = e.problem();
      } catch (const std::exception& e) {  // std::bad_alloc from a huge image, say
        item.error = e.what();
      }
    }
    std::vector<size_t> rows;  // where the good images are, in order: they run together
    for (size_t j = 0; j < count; ++j)
      if (items[j].error.empty()) {
        items[j].row = int64_t(rows.size());
        rows.push_back(j);
      }
    if (plan && rows.size() == batch) {
      for (size_t b = 0; b < batch; ++b) plan->set_grid(int64_t(b), grids[b]);
      run_plan(*plan, o);
      on_batch(*plan, items);
    } else if (!rows.empty()) {
      run_in_parts(plans, pixels, rows, grids, o, per_image, items, on_batch);
    } else {  // nothing ran: the errors are handed over with a Plan they do not read
      if (!plan) plan = plans.take(1);
      on_batch(*plan, items);
    }
    if (plan) plans.give_back(std::move(plan));
    if (first + count < n) check_between(between);
  }
}

}  // namespace vit

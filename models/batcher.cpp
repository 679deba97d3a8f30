// vit::Batcher (include/vit/batcher.h): one queue of requests, one thread that runs them. The requests of
// a pass that ask the same thing (classes of encoded images, logits of tensors, embeddings of either with
// the same options) go into one Classifier call, so each image's answer is what the Classifier gives it
// alone, whatever shares its batch.
#include "vit/batcher.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <new>
#include <mutex>
#include <thread>

namespace vit {

using Clock = std::chrono::steady_clock;

namespace {

// What a request asks for: classes or embeddings, of encoded images or of preprocessed tensors.
enum class Kind { Classify, Logits, Embed, EmbedPixels };

struct Job {
  Kind kind = Kind::Classify;
  std::vector<std::pair<std::string, std::string>> images;  // encoded (Classify, Embed), or
  std::vector<float> pixels;                                // [n, 3, H, W] (Logits, EmbedPixels)
  int64_t n = 0;
  int topk = 5;
  EmbedOptions embed;  // Embed, EmbedPixels
  Batcher::ResultsDone results_done;
  Batcher::EmbeddingsDone embeddings_done;
  Batcher::LogitsDone rows_done;
  Clock::time_point queued_at;
  // The answers, filled by the pass, handed over after it.
  std::vector<Result> results;
  std::vector<Embedding> embeddings;
  std::vector<float> rows;
  std::string error;
};

// The jobs of a pass that run in one Classifier call: one kind, one set of embedding options.
struct Group {
  Kind kind;
  EmbedOptions embed;
  std::vector<Job*> jobs;
  bool takes(const Job& j) const {
    return j.kind == kind && j.embed.head == embed.head && j.embed.normalize == embed.normalize;
  }
};

std::string what(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::bad_alloc&) {
    return "out of memory";
  } catch (const std::exception& x) {
    return x.what();
  }
}

}  // namespace

struct Batcher::Impl {
  const Classifier& classifier;
  BatcherOptions opt;
  int64_t per_image;  // floats in one preprocessed image
  std::function<void(const BatchStats&)> on_batch;
  mutable std::mutex mu;
  std::condition_variable wake;
  std::deque<Job> queue;
  int64_t waiting = 0;  // images in queue
  bool closed = false;
  std::thread thread;

  bool push(Job job) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (closed || job.n <= 0 || waiting + job.n > opt.max_queue) return false;
      job.queued_at = Clock::now();
      waiting += job.n;
      queue.push_back(std::move(job));
    }
    wake.notify_one();
    return true;
  }

  // The next batch: the first waiting request, then those behind it while they fit in max_batch; with
  // max_delay_ms, first waits that long after the oldest arrived for the batch to fill. Empty when closed
  // and drained.
  std::vector<Job> take() {
    std::unique_lock<std::mutex> lock(mu);
    wake.wait(lock, [&] { return closed || !queue.empty(); });
    if (queue.empty()) return {};
    if (opt.max_delay_ms > 0 && !closed) {
      const auto until = queue.front().queued_at + std::chrono::milliseconds(opt.max_delay_ms);
      wake.wait_until(lock, until, [&] { return closed || waiting >= opt.max_batch; });
    }
    std::vector<Job> batch;
    int64_t images = 0;
    while (!queue.empty() && (batch.empty() || images + queue.front().n <= opt.max_batch)) {
      images += queue.front().n;
      batch.push_back(std::move(queue.front()));
      queue.pop_front();
    }
    waiting -= images;
    return batch;
  }

  void run(std::vector<Job>& batch) {
    BatchStats stats;
    const auto t0 = Clock::now();
    std::vector<Group> groups;
    for (Job& j : batch) {
      stats.waits_s.push_back(std::chrono::duration<double>(t0 - j.queued_at).count());
      stats.images += j.n;
      auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& x) { return x.takes(j); });
      if (g == groups.end()) g = groups.insert(groups.end(), Group{j.kind, j.embed, {}});
      g->jobs.push_back(&j);
    }
    for (Group& g : groups) (g.kind == Kind::Logits || g.kind == Kind::EmbedPixels) ? run_rows(g) : run_encoded(g);
    stats.run_s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (on_batch) on_batch(stats);  // before the answers, so that a client's next look at them includes this pass
    for (Job& j : batch) {
      if (j.results_done) j.results_done(std::move(j.results));
      else if (j.embeddings_done) j.embeddings_done(std::move(j.embeddings));
      else j.rows_done(std::move(j.rows), j.error);
    }
  }

  // Encoded images: one classify_encoded or embed_encoded call; a request's own topk is a prefix of the
  // group's largest. A call that throws gives each of its images the error.
  void run_encoded(Group& g) {
    std::vector<std::pair<std::string, std::string>> images;
    int topk = 1;
    for (Job* j : g.jobs) {
      topk = std::max(topk, j->topk);
      for (auto& im : j->images) images.push_back(std::move(im));
    }
    std::vector<Result> results;
    std::vector<Embedding> embeddings;
    std::string error;
    try {
      if (g.kind == Kind::Classify) results = classifier.classify_encoded(images, topk);
      else embeddings = classifier.embed_encoded(images, g.embed);
    } catch (...) {
      error = what(std::current_exception());
    }
    size_t next = 0;
    for (Job* j : g.jobs) {
      for (size_t i = next; i < next + size_t(j->n); ++i) {
        if (g.kind == Kind::Classify) {
          Result r = error.empty() ? std::move(results[i]) : Result{images[i].first, error, {}, {}, -1, 0};
          if (r.top.size() > size_t(j->topk)) r.top.resize(size_t(j->topk));
          j->results.push_back(std::move(r));
        } else {
          j->embeddings.push_back(error.empty() ? std::move(embeddings[i]) : Embedding{images[i].first, error, {}, {}});
        }
      }
      next += size_t(j->n);
    }
  }

  // Preprocessed tensors: one logits or embeddings call, its rows handed out in order.
  void run_rows(Group& g) {
    std::vector<float> pixels;
    int64_t n = 0;
    for (Job* j : g.jobs) {
      pixels.insert(pixels.end(), j->pixels.begin(), j->pixels.end());
      n += j->n;
      std::vector<float>().swap(j->pixels);
    }
    std::vector<float> rows;
    std::string error;
    try {
      rows = g.kind == Kind::Logits ? classifier.logits(pixels.data(), n) : classifier.embeddings(pixels.data(), n, g.embed);
    } catch (...) {
      error = what(std::current_exception());
    }
    const size_t width = n > 0 ? rows.size() / size_t(n) : 0;
    size_t next = 0;
    for (Job* j : g.jobs) {
      j->error = error;
      if (error.empty()) j->rows.assign(rows.begin() + long(next * width), rows.begin() + long((next + size_t(j->n)) * width));
      next += size_t(j->n);
    }
  }

  void loop() {
    for (std::vector<Job> batch = take(); !batch.empty(); batch = take()) {
      if (opt.around_pass) opt.around_pass([&] { run(batch); });
      else run(batch);
    }
  }
};

Batcher::Batcher(const Classifier& classifier, const BatcherOptions& options,
                 std::function<void(const BatchStats&)> on_batch) {
  if (options.max_batch < 1) throw ArgumentError("max_batch must be at least 1, got " + std::to_string(options.max_batch));
  if (options.max_delay_ms < 0) throw ArgumentError("max_delay_ms must not be negative, got " + std::to_string(options.max_delay_ms));
  if (options.max_queue < options.max_batch)
    throw ArgumentError("max_queue (" + std::to_string(options.max_queue) + ") must hold at least max_batch (" +
                std::to_string(options.max_batch) + ") images");
  const ModelInfo info = classifier.info();
  impl_ = std::unique_ptr<Impl>(new Impl{classifier, options, 3 * info.input_height * info.input_width,
                                         std::move(on_batch), {}, {}, {}, 0, false, {}});
  impl_->thread = std::thread([this] { impl_->loop(); });
}

Batcher::~Batcher() { close(); }

bool Batcher::submit(std::vector<std::pair<std::string, std::string>> images, int topk, ResultsDone done) {
  Job j;
  j.n = int64_t(images.size());
  j.images = std::move(images);
  j.topk = std::max(1, topk);
  j.results_done = std::move(done);
  return impl_->push(std::move(j));
}

bool Batcher::submit(std::vector<float> pixels, int64_t n, LogitsDone done) {
  return submit_rows(std::move(pixels), n, EmbedOptions{}, std::move(done), true);
}

bool Batcher::submit(std::vector<std::pair<std::string, std::string>> images, const EmbedOptions& options,
                     EmbeddingsDone done) {
  Job j;
  j.kind = Kind::Embed;
  j.n = int64_t(images.size());
  j.images = std::move(images);
  j.embed = options;
  j.embeddings_done = std::move(done);
  return impl_->push(std::move(j));
}

bool Batcher::submit(std::vector<float> pixels, int64_t n, const EmbedOptions& options, LogitsDone done) {
  return submit_rows(std::move(pixels), n, options, std::move(done), false);
}

bool Batcher::submit_rows(std::vector<float> pixels, int64_t n, const EmbedOptions& options, LogitsDone done, bool logits) {
  if (n < 0 || int64_t(pixels.size()) != n * impl_->per_image)
    throw Error("Batcher: " + std::to_string(pixels.size()) + " floats for " + std::to_string(n) + " images of " +
                std::to_string(impl_->per_image));
  Job j;
  j.kind = logits ? Kind::Logits : Kind::EmbedPixels;
  j.n = n;
  j.pixels = std::move(pixels);
  if (!logits) j.embed = options;
  j.rows_done = std::move(done);
  return impl_->push(std::move(j));
}

int64_t Batcher::queued() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->waiting;
}

void Batcher::close() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->closed = true;
  }
  impl_->wake.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace vit

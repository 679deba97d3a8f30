// vit::Batcher (include/vit/batcher.h): one queue of requests, one thread that runs them. The images of
// several requests that ask the same (classification, or embeddings with the same options) and come in
// the same form (encoded, decoded) go into one call of the Classifier, and preprocessed tensors into one
// logits call, so each image's answer is what the Classifier gives it alone, whatever shares its batch.
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

enum class Ask { Classify, Embed, Logits };

struct Job {
  Ask ask = Ask::Classify;
  std::vector<std::pair<std::string, std::string>> images;  // encoded, or
  std::vector<Pixels> decoded;                              // decoded, or
  std::vector<float> pixels;                                // [n, 3, H, W] for logits
  int64_t n = 0;
  int topk = 5;
  EmbedOptions embed;
  Batcher::ResultsDone results_done;
  Batcher::EmbeddingsDone embeddings_done;
  Batcher::LogitsDone logits_done;
  Clock::time_point queued_at;

  const std::string& name(size_t i) const { return decoded.empty() ? images[i].first : decoded[i].name; }
};

// The jobs of a batch that run in one call of the Classifier (one ask, one form, the same embed options),
// and what the call gave: one Result or Embedding per image in job order, or the error that stopped it.
struct Group {
  std::vector<Job*> jobs;
  std::vector<Result> results;
  std::vector<Embedding> embeddings;
  std::string error;

  bool takes(const Job& j) const {
    const Job& f = *jobs.front();
    return f.ask == j.ask && f.decoded.empty() == j.decoded.empty() &&
           (j.ask != Ask::Embed || (f.embed.head == j.embed.head && f.embed.tokens == j.embed.tokens &&
                                    f.embed.normalize == j.embed.normalize));
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

  // One call of the Classifier for a group's images: encoded ones moved out of their jobs (which keep
  // their names), decoded ones copied as views.
  void call(Group& g) const {
    const Job& first = *g.jobs.front();
    std::vector<std::pair<std::string, std::string>> images;
    std::vector<Pixels> decoded;
    int topk = 1;
    for (Job* j : g.jobs) {
      topk = std::max(topk, j->topk);
      decoded.insert(decoded.end(), j->decoded.begin(), j->decoded.end());
      for (auto& im : j->images) images.emplace_back(im.first, std::move(im.second));
    }
    try {
      if (first.ask == Ask::Classify)
        g.results = first.decoded.empty() ? classifier.classify_encoded(images, topk) : classifier.classify_pixels(decoded, topk);
      else
        g.embeddings = first.decoded.empty() ? classifier.embed_encoded(images, first.embed)
                                             : classifier.embed_pixels(decoded, first.embed);
    } catch (...) {
      g.error = what(std::current_exception());
    }
  }

  // Each job of a group gets its slice of the answers (a request's own topk is a prefix of the group's
  // largest), or the group's error for each of its images.
  static void answer(Group& g) {
    size_t next = 0;
    for (Job* j : g.jobs) {
      if (j->ask == Ask::Classify) {
        std::vector<Result> mine;
        for (size_t i = 0; i < size_t(j->n); ++i) {
          Result r;
          if (!g.error.empty()) {
            r.file = j->name(i);
            r.error = g.error;
          } else {
            r = std::move(g.results[next + i]);
            if (r.top.size() > size_t(j->topk)) r.top.resize(size_t(j->topk));
          }
          mine.push_back(std::move(r));
        }
        j->results_done(std::move(mine));
      } else {
        std::vector<Embedding> mine;
        for (size_t i = 0; i < size_t(j->n); ++i) {
          Embedding e;
          if (!g.error.empty()) {
            e.file = j->name(i);
            e.error = g.error;
          } else {
            e = std::move(g.embeddings[next + i]);
          }
          mine.push_back(std::move(e));
        }
        j->embeddings_done(std::move(mine));
      }
      next += size_t(j->n);
    }
  }

  void run(std::vector<Job>& batch) {
    BatchStats stats;
    const auto t0 = Clock::now();
    std::vector<Group> groups;
    std::vector<float> pixels;
    int64_t n_pixels = 0;
    for (Job& j : batch) {
      stats.waits_s.push_back(std::chrono::duration<double>(t0 - j.queued_at).count());
      stats.images += j.n;
      if (j.ask == Ask::Logits) {
        pixels.insert(pixels.end(), j.pixels.begin(), j.pixels.end());
        n_pixels += j.n;
        std::vector<float>().swap(j.pixels);
        continue;
      }
      auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& x) { return x.takes(j); });
      if (g == groups.end()) g = groups.insert(groups.end(), Group{});
      g->jobs.push_back(&j);
    }
    // One call each, so the engine batches across requests.
    for (Group& g : groups) call(g);
    std::vector<float> logits;
    std::string logits_error;
    if (n_pixels > 0) {
      try {
        logits = classifier.logits(pixels.data(), n_pixels);
      } catch (...) {
        logits_error = what(std::current_exception());
      }
    }
    stats.run_s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (on_batch) on_batch(stats);  // before the answers, so that a client's next look at them includes this pass
    for (Group& g : groups) answer(g);
    const size_t width = size_t(classifier.logits_size());
    size_t next_row = 0;
    for (Job& j : batch) {
      if (j.ask != Ask::Logits) continue;
      if (!logits_error.empty()) {
        j.logits_done({}, logits_error);
      } else {
        const auto first = logits.begin() + long(next_row * width);
        j.logits_done(std::vector<float>(first, first + long(size_t(j.n) * width)), "");
        next_row += size_t(j.n);
      }
    }
  }

  void loop() {
    for (std::vector<Job> batch = take(); !batch.empty(); batch = take()) run(batch);
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

bool Batcher::submit(std::vector<Pixels> images, int topk, ResultsDone done) {
  Job j;
  j.n = int64_t(images.size());
  j.decoded = std::move(images);
  j.topk = std::max(1, topk);
  j.results_done = std::move(done);
  return impl_->push(std::move(j));
}

bool Batcher::submit(std::vector<std::pair<std::string, std::string>> images, const EmbedOptions& options,
                     EmbeddingsDone done) {
  Job j;
  j.ask = Ask::Embed;
  j.n = int64_t(images.size());
  j.images = std::move(images);
  j.embed = options;
  j.embeddings_done = std::move(done);
  return impl_->push(std::move(j));
}

bool Batcher::submit(std::vector<Pixels> images, const EmbedOptions& options, EmbeddingsDone done) {
  Job j;
  j.ask = Ask::Embed;
  j.n = int64_t(images.size());
  j.decoded = std::move(images);
  j.embed = options;
  j.embeddings_done = std::move(done);
  return impl_->push(std::move(j));
}

bool Batcher::submit(std::vector<float> pixels, int64_t n, LogitsDone done) {
  if (n < 0 || int64_t(pixels.size()) != n * impl_->per_image)
    throw Error("Batcher: " + std::to_string(pixels.size()) + " floats for " + std::to_string(n) + " images of " +
                std::to_string(impl_->per_image));
  Job j;
  j.ask = Ask::Logits;
  j.n = n;
  j.pixels = std::move(pixels);
  j.logits_done = std::move(done);
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

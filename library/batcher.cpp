// vit::Batcher (include/vit/batcher.h): one queue of requests, one thread that runs them. The images of
// several requests that ask the same (classification, or embeddings with the same options) and come in
// the same form (encoded, decoded, preprocessed tensors) go into one call of the Classifier, so each
// image's answer is what the Classifier gives it alone, whatever shares its batch. Work of the caller's
// own runs alone, in its turn. A ComputeThread runs the passes of the batchers that share it, in the order
// they were handed over. A request whose answer is no longer wanted when its turn comes is dropped unrun.
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

// What a request asks: classes, embeddings or logits (tensors only), or to run work of its own.
enum class Ask { Classify, Embed, Logits, Work };

struct Job {
  Ask ask = Ask::Classify;
  std::vector<std::pair<std::string, std::string>> images;  // encoded, or
  std::vector<Pixels> decoded;                              // decoded, or
  std::vector<float> pixels;                                // [n, 3, H, W] (tensors: rows_done)
  int64_t n = 0;
  int topk = 5;
  EmbedOptions embed;
  Batcher::ResultsDone results_done;
  Batcher::EmbeddingsDone embeddings_done;
  Batcher::LogitsDone rows_done;
  std::function<void()> work;
  Batcher::Wanted wanted;
  Clock::time_point queued_at;

  bool tensors() const { return bool(rows_done); }
  const std::string& name(size_t i) const { return decoded.empty() ? images[i].first : decoded[i].name; }

  // The images of a job: encoded (name, bytes) or decoded.
  void set_images(std::vector<std::pair<std::string, std::string>> encoded) {
    n = int64_t(encoded.size());
    images = std::move(encoded);
  }
  void set_images(std::vector<Pixels> pixels) {
    n = int64_t(pixels.size());
    decoded = std::move(pixels);
  }
  template <class Images>
  static Job classify(Images images, int topk, Batcher::ResultsDone done, Batcher::Wanted wanted) {
    Job j;
    j.set_images(std::move(images));
    j.topk = std::max(1, topk);
    j.results_done = std::move(done);
    j.wanted = std::move(wanted);
    return j;
  }
  template <class Images>
  static Job embed_images(Images images, const EmbedOptions& options, Batcher::EmbeddingsDone done,
                          Batcher::Wanted wanted) {
    Job j;
    j.ask = Ask::Embed;
    j.set_images(std::move(images));
    j.embed = options;
    j.embeddings_done = std::move(done);
    j.wanted = std::move(wanted);
    return j;
  }
};

// The jobs of a batch that run in one call of the Classifier (one ask, one form, the same embed options),
// and what the call gave: one Result or Embedding per image, or the rows of tensors, in job order; or the
// error that stopped it.
struct Group {
  std::vector<Job*> jobs;
  std::vector<Result> results;
  std::vector<Embedding> embeddings;
  std::vector<float> rows;
  std::string error;

  bool takes(const Job& j) const {
    const Job& f = *jobs.front();
    return f.ask == j.ask && f.decoded.empty() == j.decoded.empty() && f.tensors() == j.tensors() &&
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

struct ComputeThread::Impl {
  // A piece of work handed over, waited for by the thread that handed it over.
  struct Task {
    const std::function<void()>* work;
    std::exception_ptr error;
    bool done = false;
  };
  std::mutex mu;
  std::condition_variable wake, finished;
  std::deque<Task*> tasks;
  bool closing = false;
  std::thread thread;

  void loop() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      wake.wait(lock, [&] { return closing || !tasks.empty(); });
      if (tasks.empty()) return;  // closing, and everything ran
      Task* t = tasks.front();
      tasks.pop_front();
      lock.unlock();
      try {
        (*t->work)();
      } catch (...) {
        t->error = std::current_exception();
      }
      lock.lock();
      t->done = true;
      finished.notify_all();
    }
  }
};

ComputeThread::ComputeThread() : impl_(std::make_unique<Impl>()) {
  impl_->thread = std::thread([this] { impl_->loop(); });
}

ComputeThread::~ComputeThread() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->closing = true;
  }
  impl_->wake.notify_one();
  impl_->thread.join();
}

void ComputeThread::run(const std::function<void()>& work) {
  if (std::this_thread::get_id() == impl_->thread.get_id()) return work();
  Impl::Task task{&work, nullptr, false};
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->tasks.push_back(&task);
  impl_->wake.notify_one();
  impl_->finished.wait(lock, [&] { return task.done; });
  if (task.error) std::rethrow_exception(task.error);
}

struct Batcher::Impl {
  const Classifier& classifier;
  BatcherOptions opt;
  int64_t per_image;  // floats in one preprocessed image
  std::function<void(const BatchStats&)> on_batch;
  mutable std::mutex mu;
  std::condition_variable wake;
  std::deque<Job> queue;
  int64_t waiting = 0;  // images in queue
  int64_t dropped = 0;  // images dropped unrun
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

  bool push_rows(std::vector<float> pixels, int64_t n, Ask ask, const EmbedOptions& options, LogitsDone done,
                 Wanted wanted) {
    if (n < 0 || int64_t(pixels.size()) != n * per_image)
      throw Error("Batcher: " + std::to_string(pixels.size()) + " floats for " + std::to_string(n) + " images of " +
                  std::to_string(per_image));
    Job j;
    j.ask = ask;
    j.n = n;
    j.pixels = std::move(pixels);
    j.embed = options;
    j.rows_done = std::move(done);
    j.wanted = std::move(wanted);
    return push(std::move(j));
  }

  // The next batch: the first waiting request, then those behind it while they fit in max_batch; with
  // max_delay_ms, first waits that long after the oldest arrived for the batch to fill. The requests met on
  // the way whose answers are no longer wanted go to *unwanted instead. Both empty when closed and drained.
  std::vector<Job> take(std::vector<Job>* unwanted) {
    std::unique_lock<std::mutex> lock(mu);
    wake.wait(lock, [&] { return closed || !queue.empty(); });
    if (queue.empty()) return {};
    if (opt.max_delay_ms > 0 && !closed) {
      const auto until = queue.front().queued_at + std::chrono::milliseconds(opt.max_delay_ms);
      wake.wait_until(lock, until, [&] { return closed || waiting >= opt.max_batch; });
    }
    std::vector<Job> batch;
    int64_t images = 0;
    while (!queue.empty()) {
      Job& next = queue.front();
      if (next.wanted && !next.wanted()) {
        waiting -= next.n;
        dropped += next.n;
        unwanted->push_back(std::move(next));
      } else if (batch.empty() || (images + next.n <= opt.max_batch && batch.front().ask != Ask::Work &&
                                   next.ask != Ask::Work)) {  // work of a caller's own runs alone
        images += next.n;
        batch.push_back(std::move(next));
      } else {
        break;
      }
      queue.pop_front();
    }
    waiting -= images;
    return batch;
  }

  // One call of the Classifier for a group's tensors, rows [n, width]: one job's own, or the jobs' joined. Memory
  // that cannot be had (for joining them, or for the pass) is the group's error, as any other failure.
  void call_rows(Group& g) const {
    const Job& first = *g.jobs.front();
    try {
      std::vector<float> joined;
      if (g.jobs.size() > 1)
        for (Job* j : g.jobs) {
          joined.insert(joined.end(), j->pixels.begin(), j->pixels.end());
          std::vector<float>().swap(j->pixels);
        }
      const std::vector<float>& pixels = g.jobs.size() > 1 ? joined : first.pixels;
      const int64_t n = total(g);
      g.rows = first.ask == Ask::Logits ? classifier.logits(pixels.data(), n) : classifier.embeddings(pixels.data(), n, first.embed);
    } catch (...) {
      g.error = what(std::current_exception());
    }
    for (Job* j : g.jobs) std::vector<float>().swap(j->pixels);
  }

  // One call of the Classifier for a group's images: encoded ones moved out of their jobs (which keep
  // their names), decoded ones copied as views.
  void call(Group& g) const {
    const Job& first = *g.jobs.front();
    if (first.tensors()) return call_rows(g);
    try {
      std::vector<std::pair<std::string, std::string>> images;
      std::vector<Pixels> decoded;
      int topk = 1;
      for (Job* j : g.jobs) {
        topk = std::max(topk, j->topk);
        decoded.insert(decoded.end(), j->decoded.begin(), j->decoded.end());
        for (auto& im : j->images) images.emplace_back(im.first, std::move(im.second));
      }
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
    // A job's answers, taken from the group's from `next` on, or the group's error for each of its images.
    auto slice = [&g](auto& all, Job& j, size_t next) {
      std::vector<std::decay_t<decltype(all[0])>> mine(size_t(j.n));
      for (size_t i = 0; i < mine.size(); ++i) {
        if (!g.error.empty()) {
          mine[i].file = j.name(i);
          mine[i].error = g.error;
        } else {
          mine[i] = std::move(all[next + i]);
        }
      }
      return mine;
    };
    size_t next = 0;
    const size_t width = g.jobs.front()->tensors() && g.error.empty() ? g.rows.size() / size_t(total(g)) : 0;
    for (Job* j : g.jobs) {
      if (j->tensors()) {
        if (!g.error.empty()) j->rows_done({}, g.error);
        else j->rows_done(std::vector<float>(g.rows.begin() + long(next * width), g.rows.begin() + long((next + size_t(j->n)) * width)), "");
      } else if (j->ask == Ask::Classify) {
        std::vector<Result> mine = slice(g.results, *j, next);
        for (Result& r : mine)
          if (r.top.size() > size_t(j->topk)) r.top.resize(size_t(j->topk));
        j->results_done(std::move(mine));
      } else {
        j->embeddings_done(slice(g.embeddings, *j, next));
      }
      next += size_t(j->n);
    }
  }

  static int64_t total(const Group& g) {
    int64_t n = 0;
    for (const Job* j : g.jobs) n += j->n;
    return n;
  }

  void run(std::vector<Job>& batch) {
    BatchStats stats;
    const auto t0 = Clock::now();
    std::vector<Group> groups;
    for (Job& j : batch) {
      stats.waits_s.push_back(std::chrono::duration<double>(t0 - j.queued_at).count());
      stats.images += j.n;
      if (j.ask == Ask::Work) {  // alone in its batch (take)
        j.work();
        continue;
      }
      auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& x) { return x.takes(j); });
      if (g == groups.end()) g = groups.insert(groups.end(), Group{});
      g->jobs.push_back(&j);
    }
    // One call each, so the engine batches across requests.
    for (Group& g : groups) call(g);
    stats.run_s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (on_batch) on_batch(stats);  // before the answers, so that a client's next look at them includes this pass
    for (Group& g : groups) answer(g);
  }

  // Answers requests dropped unrun: each image's error is kDropped.
  static void drop(std::vector<Job>& unwanted) {
    for (Job& j : unwanted) {
      Group g;
      g.jobs = {&j};
      g.error = kDropped;
      answer(g);
    }
  }

  void loop() {
    for (;;) {
      std::vector<Job> unwanted;
      std::vector<Job> batch = take(&unwanted);
      if (batch.empty() && unwanted.empty()) return;
      const auto pass = [&] {
        drop(unwanted);
        if (!batch.empty()) run(batch);
      };
      if (opt.compute) opt.compute->run(pass);
      else pass();
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
                                         std::move(on_batch), {}, {}, {}, 0, 0, false, {}});
  impl_->thread = std::thread([this] { impl_->loop(); });
}

Batcher::~Batcher() { close(); }

bool Batcher::submit(std::vector<std::pair<std::string, std::string>> images, int topk, ResultsDone done,
                     Wanted wanted) {
  return impl_->push(Job::classify(std::move(images), topk, std::move(done), std::move(wanted)));
}

bool Batcher::submit(std::vector<Pixels> images, int topk, ResultsDone done, Wanted wanted) {
  return impl_->push(Job::classify(std::move(images), topk, std::move(done), std::move(wanted)));
}

bool Batcher::submit(std::vector<std::pair<std::string, std::string>> images, const EmbedOptions& options,
                     EmbeddingsDone done, Wanted wanted) {
  return impl_->push(Job::embed_images(std::move(images), options, std::move(done), std::move(wanted)));
}

bool Batcher::submit(std::vector<Pixels> images, const EmbedOptions& options, EmbeddingsDone done, Wanted wanted) {
  return impl_->push(Job::embed_images(std::move(images), options, std::move(done), std::move(wanted)));
}

bool Batcher::submit(std::vector<float> pixels, int64_t n, LogitsDone done, Wanted wanted) {
  return impl_->push_rows(std::move(pixels), n, Ask::Logits, EmbedOptions{}, std::move(done), std::move(wanted));
}

bool Batcher::submit(std::vector<float> pixels, int64_t n, const EmbedOptions& options, LogitsDone done,
                     Wanted wanted) {
  return impl_->push_rows(std::move(pixels), n, Ask::Embed, options, std::move(done), std::move(wanted));
}

bool Batcher::submit(std::function<void()> work, int64_t images) {
  Job j;
  j.ask = Ask::Work;
  j.n = std::max<int64_t>(1, images);
  j.work = std::move(work);
  return impl_->push(std::move(j));
}

int64_t Batcher::queued() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->waiting;
}

int64_t Batcher::dropped() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->dropped;
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

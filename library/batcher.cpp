// vit::Batcher (include/vit/batcher.h): one queue of requests, one thread that runs them. The images of
// several requests that ask the same output (with the same embedding options) of the same input kind
// (encoded, decoded, preprocessed tensors) go into one Classifier::run, so each
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

// A queued request, or work of the caller's own (which runs alone).
struct Job {
  Request request;
  Batcher::Done done;
  std::function<void()> work;
  int64_t n = 0;  // images, as the queue counts them
  Batcher::Wanted wanted;
  Clock::time_point queued_at;

  bool is_work() const { return bool(work); }
};

// The jobs of a batch that run in one Classifier::run (one input kind, one output, the same embed options),
// and what it gave for them all, in job order; or the error that stopped it.
struct Group {
  std::vector<Job*> jobs;
  Answer answer;
  std::string error;

  bool takes(const Job& j) const {
    const Request& f = jobs.front()->request;
    const Request& r = j.request;
    return f.input == r.input && f.output == r.output &&
           (r.output != Output::Embedding || (f.embed.head == r.embed.head && f.embed.tokens == r.embed.tokens &&
                                              f.embed.normalize == r.embed.normalize));
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
      } else if (batch.empty() || (images + next.n <= opt.max_batch && !batch.front().is_work() &&
                                   !next.is_work())) {  // work of a caller's own runs alone
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

  // The requests of a group of several as one: encoded images moved out of their jobs (which keep their names),
  // decoded ones copied as views, tensors joined; the largest topk.
  static Request joined(Group& g) {
    const Request& first = g.jobs.front()->request;
    Request all;
    all.input = first.input;
    all.output = first.output;
    all.embed = first.embed;
    all.topk = 1;
    for (Job* j : g.jobs) {
      Request& r = j->request;
      all.topk = std::max(all.topk, r.topk);
      all.paths.insert(all.paths.end(), r.paths.begin(), r.paths.end());
      all.pixels.insert(all.pixels.end(), r.pixels.begin(), r.pixels.end());
      for (auto& im : r.encoded) all.encoded.emplace_back(im.first, std::move(im.second));
      all.tensors.insert(all.tensors.end(), r.tensors.begin(), r.tensors.end());
      std::vector<float>().swap(r.tensors);
      all.n += r.n;
    }
    return all;
  }

  // One Classifier::run for a group. Memory that cannot be had (for joining them, or for the pass) is the
  // group's error, as any other failure.
  void call(Group& g) const {
    try {
      g.answer = g.jobs.size() == 1 ? classifier.run(g.jobs.front()->request) : classifier.run(joined(g));
    } catch (...) {
      g.error = what(std::current_exception());
    }
    for (Job* j : g.jobs) std::vector<float>().swap(j->request.tensors);
  }

  // Each job of a group gets its slice of the answers (a request's own topk is a prefix of the group's
  // largest), or the group's error for each of its images.
  static void answer(Group& g) {
    // A job's items, taken from the group's from `next` on, or the group's error for each of its images.
    auto slice = [&g](auto& all, Job& j, size_t next) {
      std::vector<std::decay_t<decltype(all[0])>> mine(size_t(j.n));
      for (size_t i = 0; i < mine.size(); ++i) {
        if (!g.error.empty()) {
          mine[i].file = j.request.name(i);
          mine[i].error = g.error;
        } else {
          mine[i] = std::move(all[next + i]);
        }
      }
      return mine;
    };
    size_t next = 0;
    const Request& first = g.jobs.front()->request;
    const bool tensors = first.input == InputKind::Tensors;
    const size_t width = tensors && g.error.empty() ? g.answer.rows.size() / size_t(std::max<int64_t>(total(g), 1)) : 0;
    for (Job* j : g.jobs) {
      Answer mine;
      if (tensors) {
        mine.error = g.error;
        if (g.error.empty())
          mine.rows.assign(g.answer.rows.begin() + long(next * width), g.answer.rows.begin() + long((next + size_t(j->n)) * width));
      } else if (first.output == Output::Top) {
        mine.results = slice(g.answer.results, *j, next);
        for (Result& r : mine.results)
          if (r.top.size() > size_t(j->request.topk)) r.top.resize(size_t(j->request.topk));
      } else {
        mine.embeddings = slice(g.answer.embeddings, *j, next);
      }
      j->done(std::move(mine));
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
      if (j.is_work()) {  // alone in its batch (take)
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

bool Batcher::submit(Request request, Done done, Wanted wanted) {
  check_request(request, impl_->per_image);
  if (request.input == InputKind::Video || request.input == InputKind::Texts || request.output == Output::Attention)
    throw ArgumentError("a Batcher batches images and tensors for their top classes, embeddings or logits; ask videos, "
                        "texts and attention of Classifier::run or TextModel::run");
  if (request.output == Output::Top) request.topk = std::max(1, request.topk);
  Job j;
  j.n = request.size();
  j.request = std::move(request);
  j.done = std::move(done);
  j.wanted = std::move(wanted);
  return impl_->push(std::move(j));
}

bool Batcher::take_turn(std::function<void()> work, int64_t images) {
  Job j;
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

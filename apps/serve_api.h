// What `vit serve` answers, apart from the socket: /v1/classify, the KServe v2 REST protocol and /metrics
// over plain request and response structs (apps/serve.cpp owns the connections). Images go through one
// vit::Batcher; every problem with a request is a 4xx whose JSON body names it.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "vit/batcher.h"
#include "vit/vit.h"

namespace vit::app {

struct HttpRequest {
  std::string method, target;  // target: path and query
  std::string content_type;
  std::string inference_header_length;  // KServe's Inference-Header-Content-Length, "" if absent
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  bool close = false;  // end the connection after this answer
};

HttpResponse json_error(int status, const std::string& message);

// How much of something the server holds at once (bytes of request bodies, pixels of queued images) may
// not pass a limit: take() refuses what would pass it, so the caller answers 503 instead of holding more.
class Budget {
 public:
  explicit Budget(int64_t limit) : limit_(limit) {}
  bool take(int64_t n);  // false, taking nothing, when n more would pass the limit
  void give(int64_t n);
  int64_t used() const { return used_.load(); }
  int64_t limit() const { return limit_; }

 private:
  std::atomic<int64_t> used_{0};
  const int64_t limit_;
};

// Prometheus text-format metrics: counters, gauges and histograms kept under one lock.
class Metrics {
 public:
  void request(const std::string& endpoint, int status, double seconds);
  void batch(const BatchStats& stats);
  void images(int64_t classified, int64_t failed);
  void connection_refused();
  std::atomic<int64_t> connections{0};
  const Budget* bodies = nullptr;  // shown as gauges when set
  const Budget* pixels = nullptr;
  std::string text(int64_t queue_depth) const;

  struct Histogram {
    std::vector<double> bounds;
    std::vector<uint64_t> counts;  // per bound, not cumulative; one more for +Inf
    double sum = 0;
    uint64_t count = 0;
    void observe(double v);
  };

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::map<std::string, Histogram> latency_;
  Histogram queue_wait_{{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}, {}, 0, 0};
  Histogram batch_size_{{1, 2, 4, 8, 16, 32, 64, 128, 256}, {}, 0, 0};
  Histogram inference_{{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}, {}, 0, 0};
  uint64_t classified_ = 0, failed_ = 0, refused_ = 0, batches_ = 0;
};

struct ApiOptions {
  std::string name;  // the model's name in /v2/models/{name}
  int max_batch = 16;
  int max_queue = 256;
  int64_t max_pixels = kDefaultMaxPixels;  // one image's, as the classifier refuses them
};

class Api {
 public:
  // pixels: the budget of pixels the queued images declare (--max-queue-mp).
  Api(const Classifier& classifier, Batcher& batcher, Metrics& metrics, Budget& pixels, ApiOptions options);
  // Answers now or later: done is called once, maybe from the batching thread.
  void handle(const HttpRequest& req, std::function<void(HttpResponse)> done);
  void set_ready() { ready_ = true; }
  // The endpoint a path is counted under in the metrics.
  static std::string endpoint(const std::string& method, const std::string& path);

 private:
  void classify_v1(const HttpRequest& req, const std::string& query, std::function<void(HttpResponse)> done);
  void infer_v2(const HttpRequest& req, std::function<void(HttpResponse)> done);
  HttpResponse model_metadata() const;
  HttpResponse queue_full() const;
  // Takes the pixels these images will hold when decoded from the budget; else answers 503 (413 for more
  // than the whole budget) and returns 0 with *refused set.
  int64_t take_pixels(const std::vector<std::pair<std::string, std::string>>& images, HttpResponse* refused);
  bool no_head(const std::function<void(HttpResponse)>& done) const;

  const Classifier& classifier_;
  Batcher& batcher_;
  Metrics& metrics_;
  Budget& pixels_;
  ApiOptions opt_;
  int64_t classes_, height_, width_;
  std::atomic<bool> ready_{false};
};

}  // namespace vit::app

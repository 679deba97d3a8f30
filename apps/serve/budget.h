// How much of something `vit serve` holds at once (bytes of request bodies, pixels of queued images) may
// not pass a limit: take() refuses what would pass it, so that the caller answers 503 instead of holding it.
#pragma once
#include <atomic>
#include <cstdint>

namespace vit::app {

class Budget {
 public:
  explicit Budget(int64_t limit) : limit_(limit) {}
  // false, taking nothing, when n more would pass the limit
  bool take(int64_t n) {
    int64_t used = used_.load();
    do {
      if (n > limit_ - used) return false;
    } while (!used_.compare_exchange_weak(used, used + n));
    return true;
  }
  void give(int64_t n) { used_ -= n; }
  int64_t used() const { return used_.load(); }
  int64_t limit() const { return limit_; }

 private:
  std::atomic<int64_t> used_{0};
  const int64_t limit_;
};

}  // namespace vit::app

// How much of something `vit serve` holds at once (bytes of request bodies, pixels of queued images) may
// not pass a limit: take() refuses what would pass it, so that the caller answers 503 instead of holding it.
// A Lease is what was taken, given back by itself: once, when its holder says so or its last copy goes.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

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

  class Lease;
  // n taken as a Lease, or nothing (taking nothing) when n more would pass the limit.
  std::optional<Lease> lease(int64_t n);

 private:
  std::atomic<int64_t> used_{0};
  const int64_t limit_;
};

// What was taken from a Budget, held until given back: by give_back(), or when the last copy of the lease is
// gone (an error thrown, a request refused or dropped unrun), whichever comes first, and only once. Copies
// share the one holding, so a lease rides in the copyable callbacks a queue keeps. The budget must outlive it.
class Budget::Lease {
 public:
  Lease() = default;  // holds nothing
  void give_back() const {
    if (held_) held_->give_back();
  }
  int64_t amount() const { return held_ ? held_->n : 0; }

 private:
  friend class Budget;
  struct Held {
    Held(Budget& b, int64_t amount) : budget(b), n(amount) {}
    ~Held() { give_back(); }
    void give_back() {
      if (!given.exchange(true)) budget.give(n);
    }
    Budget& budget;
    const int64_t n;
    std::atomic<bool> given{false};
  };
  explicit Lease(std::shared_ptr<Held> held) : held_(std::move(held)) {}
  std::shared_ptr<Held> held_;
};

inline std::optional<Budget::Lease> Budget::lease(int64_t n) {
  if (!take(n)) return std::nullopt;
  return Lease(std::make_shared<Lease::Held>(*this, n));
}

}  // namespace vit::app

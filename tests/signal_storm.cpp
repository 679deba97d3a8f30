// A host program that signals itself while it classifies: every few milliseconds each of its threads
// (the OpenMP workers included) gets SIGUSR1, whose handler uses several KB of stack. Its answers must
// be bit for bit those of the same calls made before the storm began. Run by the signal tests.
//
//   signal_storm MODEL f32|int8 THREADS ROUNDS IMAGE...   exit 0: identical; 1: an answer changed; 2: usage
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "vit/vit.h"

namespace {

std::atomic<long> handled{0};

// A handler the size of a real one (a logger formatting a message, Python's trampoline): its frame
// reaches several KB below the interrupted stack pointer.
void on_usr1(int) {
  volatile char frame[6 * 1024];
  for (size_t i = 0; i < sizeof(frame); ++i) frame[i] = char(i);
  handled.fetch_add(1, std::memory_order_relaxed);
}

// Sends SIGUSR1 to every other thread of the process every `period`, until stopped: thread-directed,
// so a worker in the middle of a matmul is hit, not only whichever thread the kernel would pick.
class Storm {
 public:
  explicit Storm(std::chrono::microseconds period) : thread_([this, period] { loop(period); }) {}
  ~Storm() {
    stop_ = true;
    thread_.join();
  }
  long sent() const { return sent_; }

 private:
  void loop(std::chrono::microseconds period) {
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, nullptr);
    const pid_t pid = getpid(), self = pid_t(syscall(SYS_gettid));
    while (!stop_) {
      if (DIR* d = opendir("/proc/self/task")) {
        while (const dirent* e = readdir(d)) {
          const pid_t tid = pid_t(std::atoi(e->d_name));
          if (tid > 0 && tid != self && syscall(SYS_tgkill, pid, tid, SIGUSR1) == 0) ++sent_;
        }
        closedir(d);
      }
      std::this_thread::sleep_for(period);
    }
  }
  std::atomic<bool> stop_{false};
  std::atomic<long> sent_{0};
  std::thread thread_;
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b, const char* what, int round) {
  if (a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0) return true;
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) worst = std::max(worst, std::fabs(double(a[i]) - b[i]));
  std::printf("round %d: %s differ from the run without signals (largest difference %g)\n", round, what, worst);
  return false;
}

std::vector<float> all_logits(const std::vector<vit::Result>& rs) {
  std::vector<float> out;
  for (const vit::Result& r : rs) {
    if (!r.error.empty()) std::printf("%s: %s\n", r.file.c_str(), r.error.c_str());
    out.insert(out.end(), r.logits.begin(), r.logits.end());
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: signal_storm MODEL f32|int8 THREADS ROUNDS IMAGE...\n");
    return 2;
  }
  vit::ClassifierOptions o;
  o.precision = vit::precision_from_name(argv[2]);
  o.threads = std::atoi(argv[3]);
  o.keep_logits = true;
  const int rounds = std::atoi(argv[4]);
  const std::vector<std::string> paths(argv + 5, argv + argc);

  struct sigaction sa {};
  sa.sa_handler = on_usr1;  // no SA_RESTART, as Python installs its handlers: reads see EINTR
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, nullptr);

  try {
    const vit::Classifier c(argv[1], o);
    std::vector<float> images;
    for (const std::string& p : paths) {
      const std::vector<float> x = c.preprocess(p);
      images.insert(images.end(), x.begin(), x.end());
    }
    const int64_t n = int64_t(paths.size());
    const std::vector<float> want_logits = c.logits(images.data(), n);
    const std::vector<float> want_classify = all_logits(c.classify(paths));

    bool same = true;
    long sent = 0;
    {
      Storm storm(std::chrono::microseconds(2000));
      for (int r = 0; r < rounds; ++r) {
        same &= same_bits(c.logits(images.data(), n), want_logits, "logits", r);
        same &= same_bits(all_logits(c.classify(paths)), want_classify, "classify's logits", r);
      }
      sent = storm.sent();
    }
    std::printf("%s, %d threads: %d rounds of %zu images, %ld signals sent, %ld handled, answers %s\n", argv[2],
                o.threads, rounds, paths.size(), sent, handled.load(), same ? "identical" : "CHANGED");
    return same ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}

// Signals while the engine runs: every thread of the OpenMP team that runs a forward pass has the
// asynchronous signals blocked (the synchronous ones never), a signal sent meanwhile is delivered when
// the pass ends, and each thread gets back exactly the mask it had, a signal the host blocked included.
#include <gtest/gtest.h>
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <set>
#include <thread>

#include "engine/nn/ops.h"
#include "engine/nn/signals.h"
#include "test_util.h"

namespace vit::test {
namespace {

const int kSynchronous[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS};

struct Seen {
  pid_t tid = 0;
  sigset_t mask;
};

// What each member of the calling thread's team of n sees as its mask: a parallel region like those a
// forward pass runs.
std::vector<Seen> team_masks(int n) {
  std::vector<Seen> seen(size_t(n), Seen{});
#pragma omp parallel num_threads(n)
  {
    Seen& s = seen[size_t(omp_get_thread_num())];
    s.tid = pid_t(syscall(SYS_gettid));
    pthread_sigmask(SIG_BLOCK, nullptr, &s.mask);
  }
  return seen;
}

sigset_t own_mask() {
  sigset_t m;
  pthread_sigmask(SIG_BLOCK, nullptr, &m);
  return m;
}

// The signals the kernel lets a thread block: glibc's two internal ones (between 31 and SIGRTMIN) and
// SIGKILL, SIGSTOP are left out.
std::vector<int> blockable_signals() {
  std::vector<int> out;
  for (int sig = 1; sig <= SIGRTMAX; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP && (sig < 32 || sig >= SIGRTMIN)) out.push_back(sig);
  return out;
}

// Inside a forward: every asynchronous signal blocked, every synchronous one not.
void expect_held(const Seen& s) {
  for (int sig : blockable_signals()) {
    const bool sync = std::find(std::begin(kSynchronous), std::end(kSynchronous), sig) != std::end(kSynchronous);
    EXPECT_EQ(sigismember(&s.mask, sig), sync ? 0 : 1) << "thread " << s.tid << ", signal " << sig << " (" << strsignal(sig) << ")";
  }
}

void expect_same(const sigset_t& got, const sigset_t& want, const std::string& who) {
  for (int sig : blockable_signals())
    EXPECT_EQ(sigismember(&got, sig), sigismember(&want, sig)) << who << ", signal " << sig << " (" << strsignal(sig) << ")";
}

// A Program with a real oneDNN step and a host step that records the team's masks while it runs.
Program masks_program(Arena& arena, std::vector<Seen>* inside) {
  Program p;
  const int64_t M = 64, D = 48;
  float* x = arena.alloc_array<float>(size_t(M * D));
  float* y = arena.alloc_array<float>(size_t(M * D));
  std::vector<float> g(size_t(D), 1.f), b(size_t(D), 0.f);
  for (int64_t i = 0; i < M * D; ++i) x[i] = float(i % 7);
  p.add(layer_norm_step("ln", make_layer_norm(arena, g.data(), b.data(), D, 1e-6f), M, x, y));
  p.add(host_step("masks", [inside] { *inside = team_masks(max_threads()); }));
  return p;
}

// A fresh application thread (so a fresh libgomp pool, its workers created lazily, a team that grows
// and shrinks) that blocks SIGUSR2 itself, as a host waiting for it in sigwait() would.
TEST(Signals, EveryTeamThreadHeldDuringForwardAndRestoredAfter) {
  std::thread([] {
    sigset_t usr2;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &usr2, nullptr);
    const sigset_t caller = own_mask();
    Arena arena;
    for (int n : {1, 2, 3, 2}) {
      set_threads(n);
      std::vector<Seen> inside;
      const Program p = masks_program(arena, &inside);
      // run(), profile(), and one step at a time as ViT::forward_with_taps runs them.
      for (const std::string how : {"run", "profile", "execute"}) {
        inside.clear();
        if (how == "run") p.run();
        if (how == "profile") p.profile();
        if (how == "execute")
          for (size_t i = 0; i < p.steps().size(); ++i) p.execute(i);
        SCOPED_TRACE(how + " on " + std::to_string(n) + " threads");
        ASSERT_EQ(inside.size(), size_t(n));
        std::set<pid_t> tids;
        for (const Seen& s : inside) {
          expect_held(s);
          tids.insert(s.tid);
        }
        EXPECT_EQ(tids.size(), size_t(n)) << "the team is not n distinct threads";
        expect_same(own_mask(), caller, "the calling thread after the forward");
        EXPECT_TRUE(sigismember(&caller, SIGUSR2));
        for (const Seen& s : team_masks(n)) {
          EXPECT_TRUE(tids.count(s.tid)) << "a thread that did not run the forward joined the team";
          expect_same(s.mask, caller, "team thread " + std::to_string(s.tid) + " after the forward");
        }
      }
    }
  }).join();
}

std::atomic<int> delivered{0};
std::atomic<int> during{0};
void count_signal(int) { delivered.fetch_add(1); }

// A signal sent to each team thread in the middle of a forward waits, and arrives when the forward ends.
TEST(Signals, SignalSentDuringForwardIsDeliveredAfterIt) {
  struct sigaction sa {}, old {};
  sa.sa_handler = count_signal;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
  std::thread([] {
    set_threads(2);
    Arena arena;
    std::vector<Seen> inside;
    Program p = masks_program(arena, &inside);
    p.add(host_step("signal", [&inside] {
      for (const Seen& s : inside) syscall(SYS_tgkill, getpid(), s.tid, SIGUSR1);
      usleep(20000);  // time enough for delivery, were the signals not blocked
      during = delivered.load();
    }));
    delivered = 0;
    p.run();
    EXPECT_EQ(during.load(), 0) << "a signal was delivered inside the forward";
    EXPECT_EQ(delivered.load(), 2) << "a signal sent during the forward was lost";
  }).join();
  sigaction(SIGUSR1, &old, nullptr);
}

// Shields nest: the inner one's end leaves the thread held until the outer one ends.
TEST(Signals, ShieldsNest) {
  const sigset_t before = own_mask();
  {
    SignalShield outer;
    {
      SignalShield inner;
    }
    expect_held(Seen{0, own_mask()});
  }
  expect_same(own_mask(), before, "after both shields");
}

}  // namespace
}  // namespace vit::test

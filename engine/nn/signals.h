// Holding asynchronous signals back while oneDNN primitives run. oneDNN 2.6's JIT GEMM kernels point the
// stack pointer into a heap workspace while they run (oneDNN issue 4845): a signal handler entered there
// writes its frame over the heap. So every thread that runs a primitive blocks the asynchronous signals
// first and restores its own mask afterwards; a signal that arrives meanwhile waits and is delivered then.
#pragma once
#include <signal.h>

namespace vit {

// The signals a SignalShield blocks: all but the synchronous ones a fault raises in the faulting thread
// (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS), which must reach their handlers at once. SIGKILL
// and SIGSTOP cannot be blocked, and glibc silently keeps its own two (thread cancellation, set*id())
// deliverable: those are what a forward pass remains exposed to.
const sigset_t& held_signals();

// While it lives, the asynchronous signals are blocked in the calling thread and in every member of the
// OpenMP team that thread's parallel regions will use (omp_get_max_threads() of them, as oneDNN and
// parallel_for ask for); its destructor gives each thread back the mask it had, with SIG_SETMASK, so a
// signal the host had blocked stays blocked. libgomp keeps one pool of workers per calling thread and
// hands a team of n the same n - 1 workers each time, so the team shielded here is the team that runs.
// Shields nest (counted per thread). Costs two parallel regions and a pthread_sigmask per thread.
class SignalShield {
 public:
  SignalShield();
  ~SignalShield();
  SignalShield(const SignalShield&) = delete;
  SignalShield& operator=(const SignalShield&) = delete;

 private:
  int threads_;
};

}  // namespace vit

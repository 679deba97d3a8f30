// See signals.h. Each thread keeps the mask it had before its outermost shield in thread-local storage:
// the workers of a team cannot be reached from the calling thread, so each blocks and restores itself
// inside a parallel region of the same size as the ones oneDNN will run.
#include "engine/nn/signals.h"

#include <omp.h>
#include <pthread.h>

#include <initializer_list>

namespace vit {
namespace {

sigset_t make_held() {
  sigset_t s;
  sigfillset(&s);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS}) sigdelset(&s, sig);
  return s;
}

thread_local int t_depth = 0;   // shields this thread is inside
thread_local sigset_t t_saved;  // its mask before the outermost one

void hold() {
  if (t_depth++ == 0) pthread_sigmask(SIG_BLOCK, &held_signals(), &t_saved);
}

// A worker that joined a team only after the shield began (created by a larger region than the shield's)
// was born with the blocked mask and has nothing to restore: it stays blocked, the safe side.
void release() {
  if (t_depth > 0 && --t_depth == 0) pthread_sigmask(SIG_SETMASK, &t_saved, nullptr);
}

}  // namespace

const sigset_t& held_signals() {
  static const sigset_t s = make_held();
  return s;
}

// The team oneDNN's regions get: omp_get_max_threads(), or the caller alone inside a parallel region
// (oneDNN runs nested calls on one thread; were nesting enabled, libgomp makes a nested team's workers
// afresh, and they inherit the blocked mask of their master). One thread: no parallel region, which
// libgomp would give a team (an allocation) of its own.
SignalShield::SignalShield() : threads_(omp_in_parallel() ? 1 : omp_get_max_threads()) {
  if (threads_ == 1) {
    hold();
    return;
  }
#pragma omp parallel num_threads(threads_)
  hold();
}

SignalShield::~SignalShield() {
  if (threads_ == 1) {
    release();
    return;
  }
#pragma omp parallel num_threads(threads_)
  release();
}

}  // namespace vit

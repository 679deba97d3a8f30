// A forward pass allocates nothing in the engine's own code. Every heap allocation in the process is
// counted by interposing malloc and friends (in a test binary of its own) and attributed by its call
// stack: oneDNN 2.6's dnnl_primitive_execute builds a std::unordered_map of its arguments on every
// call, which no public API avoids; those are reported, not failed (docs/PERFORMANCE.md).
#include <dlfcn.h>
#include <execinfo.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "models/network.h"

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);
}

namespace {
std::atomic<bool> counting{false};
std::atomic<long> ours{0}, in_onednn{0};
thread_local bool inside = false;  // backtrace and dladdr must not count themselves

// Counts an allocation as oneDNN's when a frame of its stack lies in libdnnl, else as ours.
inline void count() {
  if (!counting.load(std::memory_order_relaxed) || inside) return;
  inside = true;
  void* frames[48];
  const int n = backtrace(frames, 48);
  bool onednn = false;
  for (int i = 1; i < n && !onednn; ++i) {
    Dl_info info;
    onednn = dladdr(frames[i], &info) && info.dli_fname && std::strstr(info.dli_fname, "libdnnl");
  }
  (onednn ? in_onednn : ours).fetch_add(1, std::memory_order_relaxed);
  inside = false;
}
}  // namespace

extern "C" {
void* malloc(size_t n) {
  count();
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t m) {
  count();
  return __libc_calloc(n, m);
}
void* realloc(void* p, size_t n) {
  count();
  return __libc_realloc(p, n);
}
void* memalign(size_t a, size_t n) {
  count();
  return __libc_memalign(a, n);
}
void* aligned_alloc(size_t a, size_t n) {
  count();
  return __libc_memalign(a, n);
}
int posix_memalign(void** p, size_t a, size_t n) {
  count();
  *p = __libc_memalign(a, n);
  return *p ? 0 : 12;  // ENOMEM
}
void free(void* p) { __libc_free(p); }
}

namespace vit {
namespace {

TEST(NoAllocation, ForwardPassAllocatesNothingOfItsOwn) {
  void* warm[4];
  backtrace(warm, 4);  // loads the unwinder before counting starts
  for (const char* road : {"fused", "matmuls"}) {  // attention on the host kernel and on oneDNN's matmuls
    for (int threads : {1, 2}) {
      ::setenv("VIT_ATTENTION", road, 1);
      set_threads(threads);
      ViT model = ViT::random(config_for_arch("deit_tiny_patch16_224"), 3);
      ::unsetenv("VIT_ATTENTION");
      EXPECT_EQ(std::string(road_name(model.attention_road())), std::string(road) == "fused" ? "fused kernel" : "oneDNN matmuls");
      for (int64_t B : {1, 3}) {
        const ViT::Plan& plan = model.plan(B);
        std::fill_n(plan.input(), B * 3 * 224 * 224, 0.5f);
        plan.run();  // the first run may set up thread pools and scratch space
        ours = 0;
        in_onednn = 0;
        counting = true;
        for (int i = 0; i < 3; ++i) plan.run();
        counting = false;
        EXPECT_EQ(ours.load(), 0) << "batch " << B << ", " << threads << " threads, attention road " << road;
        std::printf("batch %ld, %d threads, attention road %s: %ld allocations per forward inside dnnl_primitive_execute, "
                    "%zu primitives\n",
                    long(B), threads, road, in_onednn.load() / 3, plan.program().steps().size());
      }
    }
  }
  ours = 0;
  counting = true;
  void* p = std::malloc(16);  // the counter itself works
  counting = false;
  std::free(p);
  EXPECT_EQ(ours.load(), 1);
}

}  // namespace
}  // namespace vit

// Picks the AttentionKernels of attention.h for the ISA oneDNN runs with.
#include "engine/nn/attention.h"

#include "engine/nn/ops.h"

namespace vit {
namespace sse2 {
extern const AttentionKernels attention;
}
namespace avx2 {
extern const AttentionKernels attention;
}
namespace avx512 {
extern const AttentionKernels attention;
}

const AttentionKernels* const* all_attention_kernels(int* count) {
  static const AttentionKernels* const all[] = {&avx512::attention, &avx2::attention, &sse2::attention};
  static const int n = [] {
    const std::string isa = cpu_isa().name;
    return isa.rfind("avx512", 0) == 0 ? 3 : isa.rfind("avx2", 0) == 0 ? 2 : 1;
  }();
  *count = n;
  return all + (3 - n);
}

const AttentionKernels& attention_kernels() {
  int n = 0;
  return *all_attention_kernels(&n)[0];
}

}  // namespace vit

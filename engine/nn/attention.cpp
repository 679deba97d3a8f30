// Picks the AttentionKernels of attention.h for the ISA oneDNN runs with, the bf16 ones where it has
// avx512_bf16 and the int8 ones where it has avx512_vnni.
#include "engine/nn/attention.h"

#include "engine/nn/ops.h"
#include "engine/nn/rows.h"

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
namespace avx512bf16 {
extern const AttentionKernels attention;
}
namespace avx512vnni {
extern const AttentionKernels attention;
}

const AttentionKernels* const kBuilds[] = {&avx512::attention, &avx2::attention, &sse2::attention};

const AttentionKernels* const* all_attention_kernels(int* count) { return host_builds(kBuilds, count); }
const AttentionKernels& attention_kernels() { return host_widest(kBuilds); }

const AttentionKernels* attention_kernels_bf16() {
  static const bool have = cpu_isa().bf16;
  return have ? &avx512bf16::attention : nullptr;
}

const AttentionKernels* attention_kernels_int8() {
  static const bool have = cpu_isa().vnni && host_isa_builds() == 3;  // VNNI on AVX-512, not AVX2's
  return have ? &avx512vnni::attention : nullptr;
}

const AttentionKernels& attention_kernels(Precision products) {
  const AttentionKernels* k = products == Precision::BF16   ? attention_kernels_bf16()
                              : products == Precision::Int8 ? attention_kernels_int8()
                                                            : nullptr;
  return k ? *k : attention_kernels();
}

}  // namespace vit

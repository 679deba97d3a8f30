// Picks the RowKernels of rows.h for the ISA oneDNN runs with.
#include "engine/nn/rows.h"

#include "engine/nn/ops.h"

namespace vit {
namespace sse2 {
extern const RowKernels kernels;
}
namespace avx2 {
extern const RowKernels kernels;
}
namespace avx512 {
extern const RowKernels kernels;
}

int host_isa_builds() {
  const std::string isa = cpu_isa().name;
  if (isa.rfind("avx512", 0) == 0) return 3;
  if (isa.rfind("avx2", 0) == 0) return 2;
  return 1;
}

const RowKernels* const kBuilds[] = {&avx512::kernels, &avx2::kernels, &sse2::kernels};

const RowKernels* const* all_row_kernels(int* count) { return host_builds(kBuilds, count); }
const RowKernels& row_kernels() { return host_widest(kBuilds); }

}  // namespace vit

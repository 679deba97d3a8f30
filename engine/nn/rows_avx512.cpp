// The RowKernels of rows.h in 16-float vectors (avx512), compiled with this file's own target flags (CMakeLists.txt).
#define ROWS_NS avx512
#define ROWS_W 16
#define ROWS_NAME "avx512"
#include "engine/nn/rows_impl.h"

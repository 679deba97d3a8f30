// The RowKernels of rows.h in 8-float vectors (avx2), compiled with this file's own target flags (CMakeLists.txt).
#define ROWS_NS avx2
#define ROWS_W 8
#define ROWS_NAME "avx2"
#include "engine/nn/rows_impl.h"

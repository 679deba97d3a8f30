// The RowKernels of rows.h in 4-float vectors (sse2), compiled with this file's own target flags (CMakeLists.txt).
#define ROWS_NS sse2
#define ROWS_W 4
#define ROWS_NAME "sse2"
#include "engine/nn/rows_impl.h"

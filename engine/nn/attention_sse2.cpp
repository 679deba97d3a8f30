// The AttentionKernels of attention.h in 4-float vectors (sse2), compiled with this file's own target flags
// (CMakeLists.txt); tiles of 4 query rows, 2 vectors of keys and 2 of head width per register block.
#define ROWS_NS sse2
#define ROWS_W 4
#define ROWS_NAME "sse2"
#define ATTN_R 4
#define ATTN_CS 2
#define ATTN_CV 2
#include "engine/nn/attention_impl.h"

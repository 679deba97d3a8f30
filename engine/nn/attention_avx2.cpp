// The AttentionKernels of attention.h in 8-float vectors (avx2), compiled with this file's own target flags
// (CMakeLists.txt); tiles of 6 query rows, 2 vectors of keys and 2 of head width per register block.
#define ROWS_NS avx2
#define ROWS_W 8
#define ROWS_NAME "avx2"
#define ATTN_R 6
#define ATTN_CS 2
#define ATTN_CV 2
#include "engine/nn/attention_impl.h"

// The AttentionKernels of attention.h in 16-float vectors (avx512), compiled with this file's own target flags
// (CMakeLists.txt); tiles of 6 query rows, 4 vectors of keys and 4 of head width per register block.
#define ROWS_NS avx512
#define ROWS_W 16
#define ROWS_NAME "avx512"
#define ATTN_R 6
#define ATTN_CS 4
#define ATTN_CV 4
#include "engine/nn/attention_impl.h"

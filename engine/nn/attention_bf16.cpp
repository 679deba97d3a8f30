// The AttentionKernels of attention.h with bf16 products (avx512_bf16: vdpbf16ps), for the int8 and bf16
// precisions on CPUs that have them; tiles as attention_avx512.cpp's, compiled with this file's own target
// flags (CMakeLists.txt). The softmax stays f32.
#include <immintrin.h>

#define ROWS_NS avx512bf16
#define ROWS_W 16
#define ROWS_NAME "avx512_bf16"
#define ATTN_R 6
#define ATTN_CS 4
#define ATTN_CV 4
#define ATTN_BF16
#include "engine/nn/attention_impl.h"

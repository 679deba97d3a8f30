// The AttentionKernels of attention.h with int8 products (avx512_vnni: vpdpbusd), for the int8 precision on
// CPUs that have them; tiles as attention_avx512.cpp's, compiled with this file's own target flags
// (CMakeLists.txt). The softmax stays f32.
// GCC 12's AVX-512 headers fill the unused source of a conversion or reduction with an "undefined"
// vector that -Wmaybe-uninitialized then reports (GCC bug 105593): silenced for the header's own lines.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#define ROWS_NS avx512vnni
#define ROWS_W 16
#define ROWS_NAME "avx512_vnni"
#define ATTN_R 6
#define ATTN_CS 4
#define ATTN_CV 4
#define ATTN_INT8
#include "engine/nn/attention_impl.h"

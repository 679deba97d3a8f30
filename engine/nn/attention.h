// The fused attention kernel behind attention_steps (ops.h): for one (image, head), its queries' rows of
// softmax(q k^T / sqrt(Dh) + bias) v in one sweep per tile of query rows, the scores of a tile staying in
// L1, read straight from the qkv rows. Compiled for SSE2, AVX2 and AVX-512 (attention_impl.h), picked once
// by the ISA oneDNN runs with, as rows.h is.
#pragma once
#include <cstdint>

#include "vit/precision.h"

namespace vit {

struct AttendArgs {
  const float* q;      // the first query row; row r at q + r * ld
  int64_t ld;          // row stride of q (3 * H * Dh in a qkv row)
  int64_t rows;        // query rows to compute
  int64_t T, Dh;       // keys, head width
  int64_t Tp, Dhp;     // T and Dh rounded up to 16: the packed layouts' widths
  float scale;         // 1 / sqrt(Dh), applied to q first, as timm does
  const float* kt;     // k transposed, [Dh, Tp] in column blocks, zero past T (pack)
  const float* vp;     // v [T, Dhp], zero past Dh (pack)
  const float* bias;   // added to the scores before softmax, [rows, T] (row stride ldp), or null
  float* probs;        // the softmax rows written out [rows, T] (row stride ldp), or null
  int64_t ldp;         // row stride of bias and probs: T, or more where T is an image's valid length
  float* out;          // row r's result at out + r * ldo, Dh floats
  int64_t ldo;
  float* work;         // kAttendWorkRows * (Tp + Dh) floats
  // A causal mask (CLIP's text tower): query row r, the image's token first + r, attends to keys 0 .. first + r
  // only (open_clip's attn_mask, -inf above the diagonal); the softmax past them is zero.
  bool causal = false;
  int64_t first = 0;
};

// The most query rows a kernel computes at once, for sizing AttendArgs::work.
constexpr int64_t kAttendWorkRows = 8;

// Floats of the packed k (kt) and v (vp) of one (image, head), for every kernel: kt [Dh, Tp]; vp [T, Dhp],
// and after it what the int8 kernel keeps per key and per channel (its grids).
inline int64_t attention_kt_floats(int64_t Dh, int64_t Tp) { return Dh * Tp; }
inline int64_t attention_vp_floats(int64_t T, int64_t Tp, int64_t Dhp) { return T * Dhp + 2 * Tp + Dhp; }

struct AttentionKernels {
  const char* isa;     // "avx512_vnni", "avx512_bf16", "avx512", "avx2", "sse2": for profiles
  int64_t tile_rows;   // query rows per register tile
  // kt = k transposed ([Dh, Tp] in column blocks of the kernel's own) and vp [T, Dhp] = v, from T rows of
  // stride ld, zero padded.
  void (*pack)(const float* k, const float* v, int64_t ld, int64_t T, int64_t Dh, int64_t Tp, int64_t Dhp, float* kt,
               float* vp);
  void (*attend)(const AttendArgs& a);
};

// The kernels for the ISA oneDNN runs with (chosen on the first call).
const AttentionKernels& attention_kernels();
// The kernels with bf16 products (q, k, v and the softmax rounded to bf16, sums in f32) where the ISA
// oneDNN runs with has avx512_bf16, else null.
const AttentionKernels* attention_kernels_bf16();
// The kernels with int8 products where the ISA oneDNN runs with has avx512_vnni, else null: q per row and k
// per key symmetric on their own grids, v per channel, the f32 softmax per row on 0 .. its maximum (u8), sums
// in s32 (docs/PERFORMANCE.md measures what that costs in agreement).
const AttentionKernels* attention_kernels_int8();
// What attention_steps runs for products of a precision: those kernels where the CPU has them, else f32's.
const AttentionKernels& attention_kernels(Precision products);
// Every variant this CPU can run, widest first (for tests).
const AttentionKernels* const* all_attention_kernels(int* count);

}  // namespace vit

// The AttentionKernels of attention.h, written once over GCC vectors of ROWS_W floats; attention_sse2.cpp,
// attention_avx2.cpp and attention_avx512.cpp each include it with their own ROWS_NS, ROWS_W, tile sizes
// and target flags (multiply-adds fused: these are matmuls, tested against a double reference).
// A tile of R query rows: S [R, Tp] = (q scale) kt in registers R x CS vectors at a time, a softmax per
// row in place, then out = S vp in registers R x CV vectors at a time. With ATTN_BF16 (attention_bf16.cpp,
// avx512_bf16) the two products take bf16 operands: q, k, v and the softmax rows rounded to nearest even,
// two products per 32-bit lane summed in f32 (vdpbf16ps).
#include <cstdint>

#include "engine/nn/attention.h"

namespace vit::ROWS_NS {
namespace {

#include "engine/nn/vec_impl.h"

constexpr int R = ATTN_R;    // query rows per tile
constexpr int CS = ATTN_CS;  // vectors of keys per register block of the scores
constexpr int CV = ATTN_CV;  // vectors of head width per register block of the output
static_assert(R <= kAttendWorkRows, "work is sized for kAttendWorkRows rows");

// kt in column blocks of the width the scores are made in (CS vectors, then single vectors for the
// rest): block j0 holds kt[d, j0 .. j0 + width) for every d, one after another, at kt + j0 Dh, so that a
// score block reads it as one stream.
inline int64_t block_width(int64_t j0, int64_t Tp) { return j0 + CS * W <= Tp ? CS * W : W; }
// How many of the block's bw columns at j0 hold keys (the rest are zero padding past T).
inline int64_t keys_in_block(int64_t j0, int64_t bw, int64_t T) { return j0 + bw <= T ? bw : (T > j0 ? T - j0 : 0); }

#ifndef ATTN_BF16
void pack(const float* k, const float* v, int64_t ld, int64_t T, int64_t Dh, int64_t Tp, int64_t Dhp, float* kt,
          float* vp) {
  for (int64_t j0 = 0; j0 < Tp; j0 += block_width(j0, Tp)) {
    const int64_t bw = block_width(j0, Tp);
    float* block = kt + j0 * Dh;
    const int64_t keys = keys_in_block(j0, bw, T);
    // Row d of the block written in one sweep from the block's keys (their rows stay in L1 across the
    // d loop); writing key by key down the block's columns, 256 bytes apart, ran at a quarter the speed.
    for (int64_t d = 0; d < Dh; ++d) {
      float* out = block + d * bw;
      const float* in = k + j0 * ld + d;
      for (int64_t jj = 0; jj < keys; ++jj) out[jj] = in[jj * ld];
      for (int64_t jj = keys; jj < bw; ++jj) out[jj] = 0.f;
    }
  }
  for (int64_t j = 0; j < T; ++j) {
    __builtin_memcpy(vp + j * Dhp, v + j * ld, Dh * sizeof(float));
    for (int64_t d = Dh; d < Dhp; ++d) vp[j * Dhp + d] = 0.f;
  }
}
#endif

// S[r, j0 + c W + lane] = sum_d qs[r, d] kt[d, j0 + c W + lane] for NR rows and C vectors of keys, from
// kt's block at j0 (pack).
template <int NR, int C>
inline void score_block(const float* qs, int64_t Dh, const float* kt, int64_t Tp, int64_t j0, float* S) {
  vf acc[NR][C] = {};
  const float* block = kt + j0 * Dh;
  for (int64_t d = 0; d < Dh; ++d) {
    vf kv[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) kv[c] = ld(block + d * C * W + c * W);
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
      const vf qb = bc(qs[r * Dh + d]);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) acc[r][c] += qb * kv[c];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) st(S + r * Tp + j0 + c * W, acc[r][c]);
}

// out[r, d0 + c W + lane] = sum_j S[r, j] vp[j, d0 + c W + lane], the lanes past Dh not written.
template <int NR, int C>
inline void value_block(const float* S, int64_t Tp, int64_t T, const float* vp, int64_t Dhp, int64_t d0, int64_t Dh,
                        float* out, int64_t ldo) {
  vf acc[NR][C] = {};
  for (int64_t j = 0; j < T; ++j) {
    vf vv[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) vv[c] = ld(vp + j * Dhp + d0 + c * W);
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
      const vf pb = bc(S[r * Tp + j]);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) acc[r][c] += pb * vv[c];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const int64_t col = d0 + c * W;
      if (col + W <= Dh) {
        st(out + r * ldo + col, acc[r][c]);
      } else {
        for (int64_t l = 0; col + l < Dh; ++l) out[r * ldo + col + l] = acc[r][c][l];
      }
    }
}

// Row s [Tp] in place: + bias, softmax over its first T entries, zeros after them.
void softmax_row(float* s, int64_t T, const float* bias) {
  vi lane;
  for (int l = 0; l < W; ++l) lane[l] = l;
  vf top = bc(-3.4e38f);
  for (int64_t j = 0; j < T; j += W) {
    vf v = ld(s + j);
    if (bias) {
      vf b = {};
      for (int l = 0; l < W && j + l < T; ++l) b[l] = bias[j + l];
      v += b;
    }
    v = (lane + int32_t(j)) < int32_t(T) ? v : bc(-3.4e38f);
    st(s + j, v);
    top = vmax(top, v);
  }
  float m = top[0];
  for (int l = 1; l < W; ++l) m = smax(m, top[l]);
  vf sum = {};
  for (int64_t j = 0; j < T; j += W) {
    const vf e = vexp(ld(s + j) - bc(m));
    const vf z = (lane + int32_t(j)) < int32_t(T) ? e : bc(0.f);
    st(s + j, z);
    sum += z;
  }
  float total = 0.f;
  for (int l = 0; l < W; ++l) total += sum[l];
  const vf inv = bc(1.f / total);
  for (int64_t j = 0; j < T; j += W) st(s + j, ld(s + j) * inv);
}

#ifdef ATTN_BF16
// bf16 operands in pairs, one 32-bit word holding (x[2p], x[2p + 1]) as the low and high halves: the layout
// vdpbf16ps multiplies lane by lane. Rounded to nearest even, as vcvtneps2bf16 does.
inline uint32_t bf16_bits(float x) {
  uint32_t u;
  __builtin_memcpy(&u, &x, sizeof u);
  return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}
inline uint32_t bf16_pair(float lo, float hi) { return bf16_bits(lo) | (bf16_bits(hi) << 16); }

inline __m512bh as_bh(__m512i v) { return (__m512bh)v; }
inline __m512 as_ps(vf v) {
  __m512 r;
  __builtin_memcpy(&r, &v, sizeof r);
  return r;
}

// kt in the blocks of the f32 kernel (block_width), each holding (Dh + 1) / 2 rows of bf16 pairs of
// dimensions, one word per key; vp as (T + 1) / 2 rows of Dhp words, pairs of keys for each dimension.
// Both fit in the f32 layouts' space; zeros past T and Dh.
void pack(const float* k, const float* v, int64_t ld, int64_t T, int64_t Dh, int64_t Tp, int64_t Dhp, float* kt,
          float* vp) {
  const int64_t Dh2 = (Dh + 1) / 2, T2 = (T + 1) / 2;
  uint32_t* kt2 = reinterpret_cast<uint32_t*>(kt);
  uint32_t* vp2 = reinterpret_cast<uint32_t*>(vp);
  for (int64_t j0 = 0; j0 < Tp; j0 += block_width(j0, Tp)) {
    const int64_t bw = block_width(j0, Tp);
    const int64_t keys = keys_in_block(j0, bw, T);
    uint32_t* block = kt2 + j0 * Dh2;
    for (int64_t p = 0; p < Dh2; ++p) {
      uint32_t* out = block + p * bw;
      const float* in = k + j0 * ld + 2 * p;
      const bool odd = 2 * p + 1 == Dh;
      for (int64_t jj = 0; jj < keys; ++jj) out[jj] = bf16_pair(in[jj * ld], odd ? 0.f : in[jj * ld + 1]);
      for (int64_t jj = keys; jj < bw; ++jj) out[jj] = 0;
    }
  }
  for (int64_t jp = 0; jp < T2; ++jp) {
    const float* a = v + 2 * jp * ld;
    const float* b = 2 * jp + 1 < T ? a + ld : nullptr;
    for (int64_t d = 0; d < Dhp; ++d) vp2[jp * Dhp + d] = d < Dh ? bf16_pair(a[d], b ? b[d] : 0.f) : 0;
  }
}

// acc[r][c] += sum over `steps` of a[r * lda + i] (a bf16 pair, in every lane) times b's vector c at
// b + i * ldb + c W (a pair per lane): both bf16 products, q kᵀ and the softmax times v.
template <int NR, int C>
inline void dot_pairs(const uint32_t* a, int64_t lda, const uint32_t* b, int64_t ldb, int64_t steps, __m512 (&acc)[NR][C]) {
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  for (int64_t i = 0; i < steps; ++i) {
    __m512bh bv[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) bv[c] = as_bh(_mm512_loadu_si512(b + i * ldb + c * W));
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
      const __m512bh ab = as_bh(_mm512_set1_epi32(int(a[r * lda + i])));
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], ab, bv[c]);
    }
  }
}

template <int NR, int C>
inline void score_block(const uint32_t* q2, int64_t Dh2, const uint32_t* kt2, int64_t Tp, int64_t j0, float* S) {
  __m512 acc[NR][C];
  dot_pairs<NR, C>(q2, Dh2, kt2 + j0 * Dh2, C * W, Dh2, acc);
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) _mm512_storeu_ps(S + r * Tp + j0 + c * W, acc[r][c]);
}

template <int NR, int C>
inline void value_block(const uint32_t* P2, int64_t Tp, int64_t T2, const uint32_t* vp2, int64_t Dhp, int64_t d0,
                        int64_t Dh, float* out, int64_t ldo) {
  __m512 acc[NR][C];
  dot_pairs<NR, C>(P2, Tp, vp2 + d0, Dhp, T2, acc);
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const int64_t col = d0 + c * W;
      if (col + W <= Dh) {
        _mm512_storeu_ps(out + r * ldo + col, acc[r][c]);
      } else {
        float lanes[W];
        _mm512_storeu_ps(lanes, acc[r][c]);
        for (int64_t l = 0; col + l < Dh; ++l) out[r * ldo + col + l] = lanes[l];
      }
    }
}

// A softmax row of Tp floats (zeros past T) rewritten in place as Tp / 2 words of bf16 pairs: each pair of
// vectors is read before the 16 words it becomes are written over their first half.
inline void row_to_bf16_pairs(float* s, int64_t Tp) {
  uint32_t* w = reinterpret_cast<uint32_t*>(s);
  int64_t j = 0;
  for (; j + 2 * W <= Tp; j += 2 * W) {
    const __m512bh b = _mm512_cvtne2ps_pbh(as_ps(ld(s + j + W)), as_ps(ld(s + j)));
    _mm512_storeu_si512(w + j / 2, (__m512i)b);
  }
  for (; j < Tp; j += 2) w[j / 2] = bf16_pair(s[j], s[j + 1]);
}

template <int NR>
void tile(const AttendArgs& a, int64_t r0) {
  float* S = a.work;
  uint32_t* q2 = reinterpret_cast<uint32_t*>(a.work + kAttendWorkRows * a.Tp);
  const int64_t Dh2 = (a.Dh + 1) / 2, T2 = (a.T + 1) / 2;
  for (int r = 0; r < NR; ++r) {
    const float* q = a.q + (r0 + r) * a.ld;
    uint32_t* row = q2 + r * Dh2;
    int64_t p = 0;
    for (; 2 * p + 2 * W <= a.Dh; p += W) {
      const __m512bh b = _mm512_cvtne2ps_pbh(as_ps(ld(q + 2 * p + W) * bc(a.scale)), as_ps(ld(q + 2 * p) * bc(a.scale)));
      _mm512_storeu_si512(row + p, (__m512i)b);
    }
    for (; p < Dh2; ++p) row[p] = bf16_pair(q[2 * p] * a.scale, 2 * p + 1 < a.Dh ? q[2 * p + 1] * a.scale : 0.f);
  }
  const uint32_t* kt2 = reinterpret_cast<const uint32_t*>(a.kt);
  int64_t j = 0;
  for (; j + CS * W <= a.Tp; j += CS * W) score_block<NR, CS>(q2, Dh2, kt2, a.Tp, j, S);
  for (; j < a.Tp; j += W) score_block<NR, 1>(q2, Dh2, kt2, a.Tp, j, S);
  for (int r = 0; r < NR; ++r) {
    softmax_row(S + r * a.Tp, a.T, a.bias ? a.bias + (r0 + r) * a.ldp : nullptr);
    if (a.probs) __builtin_memcpy(a.probs + (r0 + r) * a.ldp, S + r * a.Tp, a.T * sizeof(float));
    row_to_bf16_pairs(S + r * a.Tp, a.Tp);
  }
  const uint32_t* P2 = reinterpret_cast<const uint32_t*>(S);
  const uint32_t* vp2 = reinterpret_cast<const uint32_t*>(a.vp);
  float* out = a.out + r0 * a.ldo;
  int64_t d = 0;
  for (; d + CV * W <= a.Dhp; d += CV * W) value_block<NR, CV>(P2, a.Tp, T2, vp2, a.Dhp, d, a.Dh, out, a.ldo);
  for (; d < a.Dhp; d += W) value_block<NR, 1>(P2, a.Tp, T2, vp2, a.Dhp, d, a.Dh, out, a.ldo);
}
#else
template <int NR>
void tile(const AttendArgs& a, int64_t r0) {
  float* S = a.work;
  float* qs = a.work + kAttendWorkRows * a.Tp;
  for (int r = 0; r < NR; ++r)
    for (int64_t d = 0; d < a.Dh; ++d) qs[r * a.Dh + d] = a.q[(r0 + r) * a.ld + d] * a.scale;
  int64_t j = 0;
  for (; j + CS * W <= a.Tp; j += CS * W) score_block<NR, CS>(qs, a.Dh, a.kt, a.Tp, j, S);
  for (; j < a.Tp; j += W) score_block<NR, 1>(qs, a.Dh, a.kt, a.Tp, j, S);
  for (int r = 0; r < NR; ++r) {
    softmax_row(S + r * a.Tp, a.T, a.bias ? a.bias + (r0 + r) * a.ldp : nullptr);
    if (a.probs) __builtin_memcpy(a.probs + (r0 + r) * a.ldp, S + r * a.Tp, a.T * sizeof(float));
  }
  float* out = a.out + r0 * a.ldo;
  int64_t d = 0;
  for (; d + CV * W <= a.Dhp; d += CV * W) value_block<NR, CV>(S, a.Tp, a.T, a.vp, a.Dhp, d, a.Dh, out, a.ldo);
  for (; d < a.Dhp; d += W) value_block<NR, 1>(S, a.Tp, a.T, a.vp, a.Dhp, d, a.Dh, out, a.ldo);
}

#endif

template <int NR>
void tail(const AttendArgs& a, int64_t r0, int64_t n) {
  if constexpr (NR > 0) {
    if (n == NR) return tile<NR>(a, r0);
    tail<NR - 1>(a, r0, n);
  }
}

void attend(const AttendArgs& a) {
  int64_t r0 = 0;
  for (; r0 + R <= a.rows; r0 += R) tile<R>(a, r0);
  if (r0 < a.rows) tail<R - 1>(a, r0, a.rows - r0);
}

}  // namespace

extern const AttentionKernels attention;
const AttentionKernels attention = {ROWS_NAME, R, pack, attend};

}  // namespace vit::ROWS_NS

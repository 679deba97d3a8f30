// The AttentionKernels of attention.h, written once over GCC vectors of ROWS_W floats; attention_sse2.cpp,
// attention_avx2.cpp and attention_avx512.cpp each include it with their own ROWS_NS, ROWS_W, tile sizes
// and target flags (multiply-adds fused: these are matmuls, tested against a double reference);
// attention_bf16.cpp and attention_vnni.cpp with their lower-precision products.
// A tile of R query rows: S [R, Tp] = (q scale) kt in registers R x CS vectors at a time, a softmax per
// row in place, then out = S vp in registers R x CV vectors at a time. With ATTN_BF16 (attention_bf16.cpp,
// avx512_bf16) the two products take bf16 operands: q, k, v and the softmax rows rounded to nearest even,
// two products per 32-bit lane summed in f32 (vdpbf16ps). With ATTN_INT8 (attention_vnni.cpp, avx512_vnni)
// they take u8 x s8 operands, four products per lane summed in s32 (vpdpbusd); the softmax stays f32.
#include <algorithm>
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

// acc[r][c] = sum over `steps` of a[r * lda + i] (in every lane) times b's vector c at b + i * ldb + c W, for
// the product P: F32Product (multiply-adds), and below Bf16Product (bf16 pairs, vdpbf16ps) and Int8Product
// (u8 x s8 fours, vpdpbusd). Both products of every kernel, q kᵀ and the softmax times v, are this loop.
template <class P, int NR, int C>
inline void dot(const typename P::In* a, int64_t lda, const typename P::In* b, int64_t ldb, int64_t steps,
                typename P::Acc (&acc)[NR][C]) {
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = P::zero();
  for (int64_t i = 0; i < steps; ++i) {
    typename P::B bv[C];
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) bv[c] = P::load(b + i * ldb + c * W);
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
      const typename P::B ab = P::broadcast(a[r * lda + i]);
#pragma GCC unroll 8
      for (int c = 0; c < C; ++c) acc[r][c] = P::madd(acc[r][c], ab, bv[c]);
    }
  }
}

#if !defined(ATTN_BF16) && !defined(ATTN_INT8)
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

// dot's f32 product: one float per lane, multiplied and added (fused: -ffp-contract=fast).
struct F32Product {
  using In = float;
  using Acc = vf;
  using B = vf;
  static vf zero() { return vf{}; }
  static vf load(const float* p) { return ld(p); }
  static vf broadcast(float x) { return bc(x); }
  static vf madd(vf acc, vf a, vf b) { return acc + a * b; }
  static void store(float* p, vf v) { st(p, v); }
};

// S[r, j0 + c W + lane] = sum_i q[r, i] kt[i, j0 + c W + lane] for NR rows and C vectors of keys, from kt's
// block at j0 (pack), in the product P (F32Product, Bf16Product); i over Dq steps of q's operands.
template <class P, int NR, int C>
inline void score_block(const typename P::In* q, int64_t Dq, const typename P::In* kt, int64_t Tp, int64_t j0,
                        float* S) {
  typename P::Acc acc[NR][C];
  dot<P, NR, C>(q, Dq, kt + j0 * Dq, C * W, Dq, acc);
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) P::store(S + r * Tp + j0 + c * W, acc[r][c]);
}

// out[r, d0 + c W + lane] = sum_j S[r, j] vp[j, d0 + c W + lane], the lanes past Dh not written; j over Ts
// steps of the softmax rows' operands in the product P.
template <class P, int NR, int C>
inline void value_block(const typename P::In* S, int64_t Tp, int64_t Ts, const typename P::In* vp, int64_t Dhp,
                        int64_t d0, int64_t Dh, float* out, int64_t ldo) {
  typename P::Acc acc[NR][C];
  dot<P, NR, C>(S, Tp, vp + d0, Dhp, Ts, acc);
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const int64_t col = d0 + c * W;
      if (col + W <= Dh) {
        P::store(out + r * ldo + col, acc[r][c]);
      } else {
        float lanes[W];
        P::store(lanes, acc[r][c]);
        for (int64_t l = 0; col + l < Dh; ++l) out[r * ldo + col + l] = lanes[l];
      }
    }
}

// The keys query row r of a call attends to: all T, or under a causal mask those up to its own token.
inline int64_t row_keys(const AttendArgs& a, int64_t r) { return a.causal ? std::min(a.T, a.first + r + 1) : a.T; }

// Row s [Tp] in place: + bias, then e^(s - max) over its first T entries, zeros after them up to Tp; returns
// their sum.
float exp_row(float* s, int64_t T, int64_t Tp, const float* bias) {
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
  const float m = hmax(top);
  vf sum = {};
  for (int64_t j = 0; j < T; j += W) {
    const vf e = vexp(ld(s + j) - bc(m));
    const vf z = (lane + int32_t(j)) < int32_t(T) ? e : bc(0.f);
    st(s + j, z);
    sum += z;
  }
  for (int64_t j = (T + W - 1) / W * W; j < Tp; ++j) s[j] = 0.f;  // scores a causal mask left out
  float total = 0.f;
  for (int l = 0; l < W; ++l) total += sum[l];
  return total;
}

// Row s [Tp] in place: + bias, softmax over its first T entries, zeros after them up to Tp.
inline void softmax_row(float* s, int64_t T, int64_t Tp, const float* bias) {
  const vf inv = bc(1.f / exp_row(s, T, Tp, bias));
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

// dot's bf16 product: a bf16 pair per 32-bit lane, two products summed into each f32 lane (vdpbf16ps).
struct Bf16Product {
  using In = uint32_t;
  using Acc = __m512;
  using B = __m512bh;
  static __m512 zero() { return _mm512_setzero_ps(); }
  static __m512bh load(const uint32_t* p) { return as_bh(_mm512_loadu_si512(p)); }
  static __m512bh broadcast(uint32_t x) { return as_bh(_mm512_set1_epi32(int(x))); }
  static __m512 madd(__m512 acc, __m512bh a, __m512bh b) { return _mm512_dpbf16_ps(acc, a, b); }
  static void store(float* p, __m512 v) { _mm512_storeu_ps(p, v); }
};

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
  for (; j + CS * W <= a.Tp; j += CS * W) score_block<Bf16Product, NR, CS>(q2, Dh2, kt2, a.Tp, j, S);
  for (; j < a.Tp; j += W) score_block<Bf16Product, NR, 1>(q2, Dh2, kt2, a.Tp, j, S);
  for (int r = 0; r < NR; ++r) {
    softmax_row(S + r * a.Tp, row_keys(a, r0 + r), a.Tp, a.bias ? a.bias + (r0 + r) * a.ldp : nullptr);
    if (a.probs) __builtin_memcpy(a.probs + (r0 + r) * a.ldp, S + r * a.Tp, a.T * sizeof(float));
    row_to_bf16_pairs(S + r * a.Tp, a.Tp);
  }
  const uint32_t* P2 = reinterpret_cast<const uint32_t*>(S);
  const uint32_t* vp2 = reinterpret_cast<const uint32_t*>(a.vp);
  float* out = a.out + r0 * a.ldo;
  int64_t d = 0;
  for (; d + CV * W <= a.Dhp; d += CV * W) value_block<Bf16Product, NR, CV>(P2, a.Tp, T2, vp2, a.Dhp, d, a.Dh, out, a.ldo);
  for (; d < a.Dhp; d += W) value_block<Bf16Product, NR, 1>(P2, a.Tp, T2, vp2, a.Dhp, d, a.Dh, out, a.ldo);
}
#elif defined(ATTN_INT8)
// u8 x s8 operands, four products per 32-bit lane summed in s32 (vpdpbusd), laid out as the bf16 kernel's
// pairs but in fours. q: each row symmetric on its own grid, max |q| / 127, stored u8 with 128 added (the
// unsigned operand); k: each key's row symmetric s8 on its own grid; v: each channel (column) symmetric s8
// on its grid over the keys; the softmax rows u8 on 0 .. their maximum. Every rounding is to nearest even
// of the float product (vcvtps2dq), so a naive loop can reproduce the operands exactly.
inline __m512i ldm(const void* p) { return _mm512_loadu_si512(p); }
// x [n] (n <= W) times inv, rounded to nearest even to s32 lanes, zeros past n.
inline __m512i round_lanes(const float* x, int64_t n, float inv) {
  const __mmask16 m = n >= W ? __mmask16(0xFFFF) : n > 0 ? __mmask16((1u << n) - 1) : __mmask16(0);
  return _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x), _mm512_set1_ps(inv)));
}
// max |x[i]| over n floats.
inline float abs_max(const float* x, int64_t n) {
  __m512 m = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += W) {
    const __mmask16 mask = n - i >= W ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_maskz_loadu_ps(mask, x + i)));
  }
  return _mm512_reduce_max_ps(m);
}

// Where the packed operands sit in kt and vp (attention_vp_floats): k's blocks in kt as the f32 kernel's
// (block_width), each holding (Dh + 3) / 4 rows of one word per key, the word four dimensions' bytes; in vp,
// (T + 3) / 4 rows of Dhp words (four keys' bytes for each dimension), then per key kz = 128 * sum of its
// bytes (q's offset taken out) and its scale, per channel v's scale.
struct Int8Layout {
  int32_t* kz;
  float* sk;
  float* sv;
  Int8Layout(float* vp, int64_t T, int64_t Tp, int64_t Dhp)
      : kz(reinterpret_cast<int32_t*>(vp + (T + 3) / 4 * Dhp)), sk(vp + (T + 3) / 4 * Dhp + Tp), sv(sk + Tp) {}
};

void pack(const float* k, const float* v, int64_t ld, int64_t T, int64_t Dh, int64_t Tp, int64_t Dhp, float* kt,
          float* vp) {
  const int64_t Dh4 = (Dh + 3) / 4, T4 = (T + 3) / 4;
  const Int8Layout l(vp, T, Tp, Dhp);
  uint32_t* kw = reinterpret_cast<uint32_t*>(kt);
  for (int64_t j0 = 0; j0 < Tp; j0 += block_width(j0, Tp)) {
    const int64_t bw = block_width(j0, Tp);
    uint32_t* block = kw + j0 * Dh4;
    for (int64_t jj = 0; jj < bw; ++jj) {
      const int64_t j = j0 + jj;
      if (j >= T) {  // padding: zero words, no offset, no scale
        for (int64_t g = 0; g < Dh4; ++g) block[g * bw + jj] = 0;
        l.kz[j] = 0;
        l.sk[j] = 0.f;
        continue;
      }
      const float* x = k + j * ld;
      const float m = abs_max(x, Dh);
      const float inv = m > 0.f ? 127.f / m : 0.f;
      __m512i sum = _mm512_setzero_si512();
      for (int64_t d = 0; d < 4 * Dh4; d += W) {  // W dimensions, four words, zeros past Dh
        const __m512i q = round_lanes(x + d, Dh - d, inv);
        sum = _mm512_add_epi32(sum, q);
        alignas(16) uint32_t words[W / 4];
        _mm_store_si128(reinterpret_cast<__m128i*>(words), _mm512_cvtepi32_epi8(q));
        for (int64_t g = d / 4; g < Dh4 && g < d / 4 + W / 4; ++g) block[g * bw + jj] = words[g - d / 4];
      }
      l.kz[j] = 128 * _mm512_reduce_add_epi32(sum);
      l.sk[j] = m > 0.f ? m / 127.f : 1.f;
    }
  }
  // v: each channel's grid over the keys, then four keys' bytes per word.
  uint32_t* vw = reinterpret_cast<uint32_t*>(vp);
  for (int64_t d0 = 0; d0 < Dhp; d0 += W) {
    const int64_t n = Dh - d0;  // channels of this vector that hold v (none past Dh)
    const __mmask16 mask = n >= W ? __mmask16(0xFFFF) : n > 0 ? __mmask16((1u << n) - 1) : __mmask16(0);
    __m512 m = _mm512_setzero_ps();
    for (int64_t j = 0; j < T; ++j) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_maskz_loadu_ps(mask, v + j * ld + d0)));
    const __mmask16 nz = _mm512_cmp_ps_mask(m, _mm512_setzero_ps(), _CMP_GT_OQ);
    const __m512 scale = _mm512_mask_blend_ps(nz, _mm512_set1_ps(1.f), _mm512_div_ps(m, _mm512_set1_ps(127.f)));
    const __m512 inv = _mm512_maskz_div_ps(nz, _mm512_set1_ps(127.f), m);
    _mm512_storeu_ps(l.sv + d0, scale);
    for (int64_t jg = 0; jg < T4; ++jg) {
      __m512i word = _mm512_setzero_si512();
      for (int i = 0; i < 4 && 4 * jg + i < T; ++i) {
        const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(mask, v + (4 * jg + i) * ld + d0), inv));
        word = _mm512_or_si512(word, _mm512_slli_epi32(_mm512_and_si512(q, _mm512_set1_epi32(0xFF)), 8 * i));
      }
      _mm512_storeu_si512(vw + jg * Dhp + d0, word);
    }
  }
}

// dot's int8 product: four u8 (a) and four s8 (b) per 32-bit lane, their products summed into each s32
// lane (vpdpbusd).
struct Int8Product {
  using In = uint32_t;
  using Acc = __m512i;
  using B = __m512i;
  static __m512i zero() { return _mm512_setzero_si512(); }
  static __m512i load(const uint32_t* p) { return ldm(p); }
  static __m512i broadcast(uint32_t x) { return _mm512_set1_epi32(int(x)); }
  static __m512i madd(__m512i acc, __m512i a, __m512i b) { return _mm512_dpbusd_epi32(acc, a, b); }
};

// S[r, j] = sq[r] sk[j] (sum_d qu[r, d] k[j, d] - 128 sum_d k[j, d]) for the C vectors of keys at j0.
template <int NR, int C>
inline void score_block(const uint32_t* q4, int64_t Dh4, const uint32_t* kt4, const Int8Layout& l, const float* sq,
                        int64_t Tp, int64_t j0, float* S) {
  __m512i acc[NR][C];
  dot<Int8Product, NR, C>(q4, Dh4, kt4 + j0 * Dh4, C * W, Dh4, acc);
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) {
    const __m512i kz = ldm(l.kz + j0 + c * W);
    const __m512 sk = _mm512_loadu_ps(l.sk + j0 + c * W);
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
      const __m512 s = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[r][c], kz));
      _mm512_storeu_ps(S + r * Tp + j0 + c * W, _mm512_mul_ps(_mm512_mul_ps(s, sk), _mm512_set1_ps(sq[r])));
    }
  }
}

// out[r, d] = sp[r] sv[d] sum_j pu[r, j] v[j, d] for the C vectors of channels at d0, none past Dh written.
template <int NR, int C>
inline void value_block(const uint32_t* P4, int64_t Tp, int64_t T4, const uint32_t* vp4, const Int8Layout& l,
                        const float* sp, int64_t Dhp, int64_t d0, int64_t Dh, float* out, int64_t ldo) {
  __m512i acc[NR][C];
  dot<Int8Product, NR, C>(P4, Tp, vp4 + d0, Dhp, T4, acc);
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) {
    const int64_t col = d0 + c * W;
    const __m512 sv = _mm512_loadu_ps(l.sv + col);
    const __mmask16 m = col + W <= Dh ? __mmask16(0xFFFF) : __mmask16((1u << (Dh - col)) - 1);
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r)
      _mm512_mask_storeu_ps(out + r * ldo + col, m,
                            _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(acc[r][c]), sv), _mm512_set1_ps(sp[r])));
  }
}

// A row of scores [Tp] through its softmax (softmax_row's: + bias, e^(s - max) over the first T entries, each
// divided by their sum), written out into probs [T] when asked, then rewritten in place as Tp bytes: u8 on
// 0 .. the row's largest probability (1 / sum, as e^0 = 1) in 255 steps, in the same sweep. Returns the
// grid's step. Each vector is read before its 16 bytes are written over the row's first quarter.
inline float softmax_to_u8(float* s, int64_t T, int64_t keys, int64_t Tp, const float* bias, float* probs) {
  const float inv = 1.f / exp_row(s, keys, Tp, bias), to_u8 = 255.f / inv;
  uint8_t* b = reinterpret_cast<uint8_t*>(s);
  for (int64_t j = 0; j < Tp; j += W) {
    const __m512 p = _mm512_mul_ps(_mm512_loadu_ps(s + j), _mm512_set1_ps(inv));
    if (probs && j < T) _mm512_mask_storeu_ps(probs + j, T - j >= W ? __mmask16(0xFFFF) : __mmask16((1u << (T - j)) - 1), p);
    const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(p, _mm512_set1_ps(to_u8)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(b + j), _mm512_cvtusepi32_epi8(q));
  }
  return inv / 255.f;
}

template <int NR>
void tile(const AttendArgs& a, int64_t r0) {
  float* S = a.work;
  uint32_t* q4 = reinterpret_cast<uint32_t*>(a.work + kAttendWorkRows * a.Tp);
  const int64_t Dh4 = (a.Dh + 3) / 4, T4 = (a.T + 3) / 4;
  float sq[NR], sp[NR];
  for (int r = 0; r < NR; ++r) {
    const float* q = a.q + (r0 + r) * a.ld;
    const float m = abs_max(q, a.Dh);
    sq[r] = (m > 0.f ? m / 127.f : 1.f) * a.scale;
    const float inv = m > 0.f ? 127.f / m : 0.f;
    uint8_t* row = reinterpret_cast<uint8_t*>(q4 + r * Dh4);
    for (int64_t d = 0; d < 4 * Dh4; d += W) {
      const __m512i u = _mm512_add_epi32(round_lanes(q + d, a.Dh - d, inv), _mm512_set1_epi32(128));
      alignas(16) uint8_t bytes[W];
      _mm_store_si128(reinterpret_cast<__m128i*>(bytes), _mm512_cvtepi32_epi8(u));
      __builtin_memcpy(row + d, bytes, size_t(4 * Dh4 - d < W ? 4 * Dh4 - d : W));
    }
  }
  const Int8Layout l(const_cast<float*>(a.vp), a.T, a.Tp, a.Dhp);
  const uint32_t* kt4 = reinterpret_cast<const uint32_t*>(a.kt);
  int64_t j = 0;
  for (; j + CS * W <= a.Tp; j += CS * W) score_block<NR, CS>(q4, Dh4, kt4, l, sq, a.Tp, j, S);
  for (; j < a.Tp; j += W) score_block<NR, 1>(q4, Dh4, kt4, l, sq, a.Tp, j, S);
  for (int r = 0; r < NR; ++r)
    sp[r] = softmax_to_u8(S + r * a.Tp, a.T, row_keys(a, r0 + r), a.Tp, a.bias ? a.bias + (r0 + r) * a.ldp : nullptr,
                          a.probs ? a.probs + (r0 + r) * a.ldp : nullptr);
  const uint32_t* P4 = reinterpret_cast<const uint32_t*>(S);
  const uint32_t* vp4 = reinterpret_cast<const uint32_t*>(a.vp);
  float* out = a.out + r0 * a.ldo;
  int64_t d = 0;
  for (; d + CV * W <= a.Dhp; d += CV * W) value_block<NR, CV>(P4, a.Tp, T4, vp4, l, sp, a.Dhp, d, a.Dh, out, a.ldo);
  for (; d < a.Dhp; d += W) value_block<NR, 1>(P4, a.Tp, T4, vp4, l, sp, a.Dhp, d, a.Dh, out, a.ldo);
}
#else
template <int NR>
void tile(const AttendArgs& a, int64_t r0) {
  float* S = a.work;
  float* qs = a.work + kAttendWorkRows * a.Tp;
  for (int r = 0; r < NR; ++r)
    for (int64_t d = 0; d < a.Dh; ++d) qs[r * a.Dh + d] = a.q[(r0 + r) * a.ld + d] * a.scale;
  // Under a causal mask, only the blocks of keys the tile's last row attends to (the softmax zeroes the rest).
  const int64_t keys = row_keys(a, r0 + NR - 1);
  int64_t j = 0;
  for (; j + CS * W <= a.Tp && j < keys; j += CS * W) score_block<F32Product, NR, CS>(qs, a.Dh, a.kt, a.Tp, j, S);
  for (; j < a.Tp && j < keys; j += W) score_block<F32Product, NR, 1>(qs, a.Dh, a.kt, a.Tp, j, S);
  for (int r = 0; r < NR; ++r) {
    softmax_row(S + r * a.Tp, row_keys(a, r0 + r), a.Tp, a.bias ? a.bias + (r0 + r) * a.ldp : nullptr);
    if (a.probs) __builtin_memcpy(a.probs + (r0 + r) * a.ldp, S + r * a.Tp, a.T * sizeof(float));
  }
  float* out = a.out + r0 * a.ldo;
  int64_t d = 0;
  for (; d + CV * W <= a.Dhp; d += CV * W) value_block<F32Product, NR, CV>(S, a.Tp, keys, a.vp, a.Dhp, d, a.Dh, out, a.ldo);
  for (; d < a.Dhp; d += W) value_block<F32Product, NR, 1>(S, a.Tp, keys, a.vp, a.Dhp, d, a.Dh, out, a.ldo);
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

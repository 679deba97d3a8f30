// GCC vectors of ROWS_W floats and the few operations on them that the host kernels share (rows_impl.h,
// attention_impl.h): loads, stores, broadcasts, min/max as the scalar code takes them, and e^x. Included
// inside each kernel file's own namespace (vit::ROWS_NS, anonymous), compiled with that file's target flags.
// Nothing from the standard library is used: an inline function compiled for AVX-512 must never become
// the copy the rest of the program calls. Included once per kernel file.

constexpr int W = ROWS_W;
typedef float vf __attribute__((vector_size(W * 4)));
typedef int32_t vi __attribute__((vector_size(W * 4)));
typedef uint8_t vb __attribute__((vector_size(W)));

inline vf ld(const float* p) {
  vf v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline vi ldi(const int32_t* p) {
  vi v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline void st(float* p, vf v) { __builtin_memcpy(p, &v, sizeof v); }
// x in every lane; as x * 1 (exact), which the compiler folds into a broadcast, from memory when x is there.
inline vf bc(float x) { return (vf{} + 1.f) * x; }
// As std::min(a, b) and std::max(a, b) lane by lane (b when a is NaN for max: what the scalar code does).
inline vf vmin(vf a, vf b) { return b < a ? b : a; }
inline vf vmax(vf a, vf b) { return a < b ? b : a; }
inline float smin(float a, float b) { return b < a ? b : a; }
inline float smax(float a, float b) { return a < b ? b : a; }

// One float from a vector's lanes by halving it (log2 W steps, the lanes' upper half onto their lower half),
// not lane after lane: a row of 192 floats is 12 vectors, and a 16-step chain of dependent scalar operations
// cost more than the row's own loop. op takes two vectors of any width, or two floats. Exact for min and
// max; a sum is added in this fixed order.
typedef float vf4 __attribute__((vector_size(16)));
typedef float vf8 __attribute__((vector_size(32)));
template <typename Op>
inline float reduce(vf v, Op op) {
#if ROWS_W == 16
  const vf8 v8 = op(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7),
                    __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15));
#elif ROWS_W == 8
  const vf8 v8 = v;
#endif
#if ROWS_W >= 8
  const vf4 v4 = op(__builtin_shufflevector(v8, v8, 0, 1, 2, 3), __builtin_shufflevector(v8, v8, 4, 5, 6, 7));
#else
  const vf4 v4 = v;
#endif
  return op(op(v4[0], v4[2]), op(v4[1], v4[3]));
}
// As vmin, vmax and + for reduce: any vector width, or floats.
struct MinOp {
  template <typename V> V operator()(V a, V b) const { return b < a ? b : a; }
};
struct MaxOp {
  template <typename V> V operator()(V a, V b) const { return a < b ? b : a; }
};
struct AddOp {
  template <typename V> V operator()(V a, V b) const { return a + b; }
};
inline float hmin(vf v) { return reduce(v, MinOp{}); }
inline float hmax(vf v) { return reduce(v, MaxOp{}); }

// a * b + c rounded once where the ISA has the instruction (AVX2, AVX-512), else twice: for polynomials
// that need not match the scalar code bit for bit (the files are compiled without contraction).
inline vf fma(vf a, vf b, vf c) {
#if ROWS_W == 16
  return __builtin_ia32_vfmaddps512_mask(a, b, c, -1, 4);
#elif ROWS_W == 8
  return __builtin_ia32_vfmaddps256(a, b, c);
#else
  return a * b + c;
#endif
}

// Lanes holding 0..255, narrowed to bytes at p: vpmovdb with AVX-512; two saturating packs with AVX2 and
// SSE2, where GCC's generic narrowing (__builtin_convertvector to bytes) becomes scalar code, one lane at a time.
inline void store_u8(uint8_t* p, vi v) {
#if ROWS_W == 16
  const vb b = __builtin_convertvector(v, vb);
  __builtin_memcpy(p, &b, sizeof b);
#else
  typedef int v4si __attribute__((vector_size(16)));
  typedef short v8hi __attribute__((vector_size(16)));
  typedef char v16qi __attribute__((vector_size(16)));
  v4si lo, hi;
  __builtin_memcpy(&lo, &v, sizeof lo);
#if ROWS_W == 8
  __builtin_memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof lo, sizeof hi);
#else
  hi = lo;
#endif
  const v8hi h = __builtin_ia32_packssdw128(lo, hi);
  const v16qi b = __builtin_ia32_packuswb128(h, h);
  __builtin_memcpy(p, &b, W);
#endif
}

// Round to nearest, ties to even, for |v| < 2^22: as quantize.cpp's round_even.
constexpr float kRound = 12582912.f;

// e^x for x in [-88, 0]: 2^k e^r with |r| <= ln2 / 2, e^r by its Taylor polynomial to r^7
// (relative error below 2e-8 before rounding).
inline vf vexp(vf x) {
  x = vmax(x, bc(-87.f));
  const vf k = (x * bc(1.44269504f) + bc(kRound)) - bc(kRound);
  const vf r = (x - k * bc(0.693359375f)) - k * bc(-2.12194440e-4f);  // ln 2 in two parts, the first exact in k
  vf p = bc(1.f / 5040);
  p = fma(p, r, bc(1.f / 720));
  p = fma(p, r, bc(1.f / 120));
  p = fma(p, r, bc(1.f / 24));
  p = fma(p, r, bc(1.f / 6));
  p = fma(p, r, bc(0.5f));
  p = fma(p, r, bc(1.f));
  p = fma(p, r, bc(1.f));
  const vi bits = (__builtin_convertvector(k, vi) + 127) << 23;
  vf scale;
  __builtin_memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}


// The linear layers of linear.h: weights prepared at load, and the steps of each precision. How the
// int8 layers run is decided per CPU by what oneDNN 2.6 runs fast there (docs/PERFORMANCE.md).
#include "engine/nn/linear.h"

#include <cmath>
#include <cstring>

#include "engine/nn/quantize.h"
#include "engine/nn/signals.h"
#include "vit/error.h"

namespace vit {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

namespace {

memory view(const memory::desc& md, const void* p) { return memory(md, cpu_engine(), const_cast<void*>(p)); }

memory stored_copy(Arena& store, const memory::desc& md, const void* src) {
  memory m(md, cpu_engine(), store.alloc(md.get_size()));
  std::memcpy(m.get_data_handle(), src, md.get_size());
  return m;
}

bool is_ref(const char* impl) { return std::string(impl).rfind("ref", 0) == 0; }

// Copies `from` into a new memory of `to_md` in the store, converting type and layout.
memory stored_reorder(Arena& store, const memory& from, const memory::desc& to_md) {
  memory to(to_md, cpu_engine(), store.alloc(to_md.get_size()));
  const SignalShield shield;
  dnnl::reorder(from, to).execute(cpu_stream(), const_cast<memory&>(from), to);
  cpu_stream().wait();
  return to;
}

memory::desc bias_desc(const LinearWeights& lw) { return lw.b ? lw.b.get_desc() : memory::desc(); }

// The activation epilogues as oneDNN post-ops: GELU (erf), QuickGELU as swish(alpha 1.702).
constexpr float kQuickGeluAlpha = 1.702f;
void append_activation(dnnl::post_ops& po, Epilogue ep) {
  if (ep == Epilogue::Gelu) po.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
  if (ep == Epilogue::QuickGelu) po.append_eltwise(1.f, dnnl::algorithm::eltwise_swish, kQuickGeluAlpha, 0.f);
}

// The int8 matmul of one image's T rows with its weight scales, image scale and zero point, bias and
// epilogue fused (Full), or all but the residual sum (NoSum). Used where it is brgemm (VNNI).
enum class Fusion { Full, NoSum };

dnnl::matmul::primitive_desc fused_int8_pd(const LinearWeights& lw, const memory::desc& w_md, int64_t T,
                                           Epilogue ep, Fusion f) {
  dnnl::primitive_attr attr;
  attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  attr.set_output_scales(1 << 1, lw.w_scale);
  dnnl::post_ops po;
  po.append_binary(dnnl::algorithm::binary_mul, memory::desc({1, 1}, dt::f32, tag::ab));  // the image's scale
  if (lw.b) po.append_binary(dnnl::algorithm::binary_add, memory::desc({1, lw.N}, dt::f32, tag::ab));
  append_activation(po, ep);
  if (ep == Epilogue::AddToDst && f == Fusion::Full) po.append_sum(1.f);
  attr.set_post_ops(po);
  const memory::desc src({T, lw.K}, dt::u8, tag::ab), dst({T, lw.N}, dt::f32, tag::ab);
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, w_md, dst), attr, cpu_engine());
}

// The plain integer product of M rows, s32 out: what the batched path runs.
dnnl::matmul::primitive_desc plain_int8_pd(const LinearWeights& lw, const memory::desc& w_md, int64_t M) {
  const memory::desc src({M, lw.K}, dt::u8, tag::ab), dst({M, lw.N}, dt::s32, tag::ab);
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, w_md, dst), cpu_engine());
}

bool is_brgemm(const char* impl) { return std::string(impl).rfind("brg", 0) == 0; }

float gelu(float x) { return 0.5f * x * (1.f + std::erf(x * float(M_SQRT1_2))); }
float quick_gelu(float x) { return x / (1.f + std::exp(-kQuickGeluAlpha * x)); }

LinearWeights f32_weights(Arena& store, const float* weight, int64_t typical_rows, WeightLayout layout,
                          LinearWeights lw) {
  const memory::desc plain({lw.K, lw.N}, dt::f32, tag::ba);
  if (layout != WeightLayout::NK) {
    // Ask the matmul which weight layout it wants for the rows it will mostly see.
    const memory::desc src({typical_rows, lw.K}, dt::f32, tag::ab), dst({typical_rows, lw.N}, dt::f32, tag::ab);
    const memory::desc any({lw.K, lw.N}, dt::f32, tag::any);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, any, bias_desc(lw), dst), cpu_engine());
    const bool brgemm = std::string(pd.impl_info_str()).rfind("brg", 0) == 0;
    if (layout == WeightLayout::Blocked || brgemm) {
      lw.w = stored_reorder(store, view(plain, weight), pd.weights_desc());
      return lw;
    }
  }
  lw.w = stored_copy(store, plain, weight);
  return lw;
}

LinearWeights bf16_weights(Arena& store, const float* weight, int64_t typical_rows, LinearWeights lw) {
  const memory::desc src({typical_rows, lw.K}, dt::bf16, tag::ab), dst({typical_rows, lw.N}, dt::f32, tag::ab);
  const memory::desc any({lw.K, lw.N}, dt::bf16, tag::any);
  dnnl::matmul::primitive_desc pd;
  try {
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, any, bias_desc(lw), dst), cpu_engine());
  } catch (const dnnl::error&) {
  }
  if (!pd || is_ref(pd.impl_info_str()))
    throw Error("precision bf16 needs a CPU with avx512_bf16 or AMX; oneDNN runs this one as " + cpu_isa().name +
                ", without a bf16 matmul kernel: use --precision int8 or f32");
  lw.w = stored_reorder(store, view(memory::desc({lw.K, lw.N}, dt::f32, tag::ba), weight), pd.weights_desc());
  return lw;
}

LinearWeights int8_weights(Arena& store, const float* weight, int64_t typical_rows, LinearWeights lw) {
  std::vector<int8_t> q(size_t(lw.N * lw.K));
  lw.w_scale.resize(size_t(lw.N));
  quantize_weights(weight, lw.N, lw.K, int8_weight_max(), q.data(), lw.w_scale.data());
  lw.w_colsum.assign(size_t(lw.N), 0);
  for (int64_t n = 0; n < lw.N; ++n)
    for (int64_t k = 0; k < lw.K; ++k) lw.w_colsum[size_t(n)] += q[size_t(n * lw.K + k)];
  const memory::desc plain({lw.K, lw.N}, dt::s8, tag::ba);
  const memory::desc any({lw.K, lw.N}, dt::s8, tag::any);
  const auto pd = fused_int8_pd(lw, any, typical_rows, Epilogue::None, Fusion::Full);
  lw.w = is_brgemm(pd.impl_info_str()) ? stored_reorder(store, view(plain, q.data()), pd.weights_desc())
                                       : stored_copy(store, plain, q.data());
  return lw;
}

// src's rows in groups of G (an image's T rows, or each row alone): each group's range, then its rows
// quantized to u8 on that group's grid, scale[r / G] and zero[r / G].
Step quantize_step(const std::string& name, int64_t rows, int64_t G, int64_t K, const float* src,
                   const LinearScratch& s) {
  return host_step(name, [=] {
    parallel_for(rows, [&](int64_t r) {
      const float* x = src + r * K;
      float lo = x[0], hi = x[0];
      for (int64_t k = 1; k < K; ++k) {
        lo = std::min(lo, x[k]);
        hi = std::max(hi, x[k]);
      }
      s.ranges[2 * r] = lo;
      s.ranges[2 * r + 1] = hi;
    });
    for (int64_t g = 0; g < rows / G; ++g) {
      float lo = s.ranges[2 * g * G], hi = s.ranges[2 * g * G + 1];
      for (int64_t t = 1; t < G; ++t) {
        lo = std::min(lo, s.ranges[2 * (g * G + t)]);
        hi = std::max(hi, s.ranges[2 * (g * G + t) + 1]);
      }
      const Affine a = activation_affine(lo, hi);
      s.scale[g] = a.scale;
      s.zero[g] = a.zero;
    }
    parallel_for(rows, [&](int64_t r) {
      quantize_u8(src + r * K, K, {s.scale[r / G], s.zero[r / G]}, s.input + r * K);
    });
  });
}

// NoSum: dst += the fused result the matmul wrote to `out`.
Step add_step(const std::string& name, int64_t rows, int64_t N, const float* out, float* dst) {
  return host_step(name, [=] {
    parallel_for(rows, [&](int64_t r) {
      for (int64_t n = 0; n < N; ++n) dst[r * N + n] += out[r * N + n];
    });
  });
}

// The batched path's second half: each row's s32 products sum(q w) made real with its own grid,
// (acc - zero * colsum[n]) * w_scale[n] * scale + bias[n], then GELU, then written or added into dst.
// The products may sit in dst itself (an s32 is the size of an f32): they are read as bytes.
Step dequantize_step(const std::string& name, const LinearWeights& lw, int64_t rows, Epilogue ep,
                     const void* products, float* dst, const LinearScratch& s) {
  const int64_t N = lw.N;
  const float* w_scale = lw.w_scale.data();
  const int32_t* colsum = lw.w_colsum.data();
  const float* bias = lw.b ? static_cast<const float*>(lw.b.get_data_handle()) : nullptr;
  return host_step(name, [=] {
    parallel_for(rows, [&](int64_t r) {
      const uint8_t* acc = static_cast<const uint8_t*>(products) + size_t(r * N) * sizeof(int32_t);
      const float sa = s.scale[r];
      const int32_t zero = s.zero[r];
      float* y = dst + r * N;
      for (int64_t n = 0; n < N; ++n) {
        int32_t a;
        std::memcpy(&a, acc + size_t(n) * sizeof(int32_t), sizeof(a));
        float v = float(a - zero * colsum[n]) * w_scale[n] * sa + (bias ? bias[n] : 0.f);
        if (ep == Epilogue::Gelu) v = gelu(v);
        if (ep == Epilogue::QuickGelu) v = quick_gelu(v);
        y[n] = ep == Epilogue::AddToDst ? y[n] + v : v;
      }
    });
  });
}

// Where the fused per-image matmul is brgemm (VNNI): inputs quantized per image, one matmul per image,
// scales in the kernel. Else (AVX2's gemm:jit, whose int8 speed falls by half at one image's rows):
// inputs quantized per row (finer, and free here), one matmul over the whole batch giving exact s32
// sums, then dequantize_step. Either way an image's logits do not depend on its batch: integer sums
// are exact, and every grid is the image's own.
std::vector<Step> int8_steps(const std::string& name, const LinearWeights& lw, int64_t B, int64_t T,
                             const float* src, float* dst, Epilogue ep, const LinearScratch& s) {
  std::vector<Step> steps;
  steps.push_back(quantize_step(name + ".quantize", B * T, T, lw.K, src, s));
  for (Fusion f : {Fusion::Full, Fusion::NoSum}) {
    if (f == Fusion::NoSum && ep != Epilogue::AddToDst) break;
    dnnl::matmul::primitive_desc pd;
    try {
      pd = fused_int8_pd(lw, lw.w.get_desc(), T, ep, f);
    } catch (const dnnl::error&) {  // not implemented with this fusion here
      continue;
    }
    if (!is_brgemm(pd.impl_info_str())) continue;
    float* out = f == Fusion::Full ? dst : s.out;
    const dnnl::matmul prim(pd);
    for (int64_t b = 0; b < B; ++b) {
      Step st;
      st.name = name;
      st.prim = prim;
      st.args = {{DNNL_ARG_SRC, view(pd.src_desc(), s.input + b * T * lw.K)},
                 {DNNL_ARG_WEIGHTS, lw.w},
                 {DNNL_ARG_DST, view(pd.dst_desc(), out + b * T * lw.N)},
                 {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, view(memory::desc({1}, dt::s32, tag::a), s.zero + b)},
                 {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                  view(memory::desc({1, 1}, dt::f32, tag::ab), s.scale + b)}};
      if (lw.b) st.args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1] = lw.b;
      st.flops = 2.0 * double(T) * double(lw.K) * double(lw.N);
      steps.push_back(std::move(st));
    }
    if (f == Fusion::NoSum) steps.push_back(add_step(name + ".residual", B * T, lw.N, s.out, dst));
    return steps;
  }
  steps[0] = quantize_step(name + ".quantize", B * T, 1, lw.K, src, s);
  const auto pd = plain_int8_pd(lw, lw.w.get_desc(), B * T);
  if (is_ref(pd.impl_info_str()))
    throw Error(name, "this CPU's oneDNN has no int8 matmul kernel but its reference one; use --precision f32");
  // The products go to dst when the epilogue overwrites it, else to the scratch rows.
  void* products = ep == Epilogue::AddToDst ? static_cast<void*>(s.out) : static_cast<void*>(dst);
  Step st;
  st.name = name;
  st.prim = dnnl::matmul(pd);
  st.args = {{DNNL_ARG_SRC, view(pd.src_desc(), s.input)}, {DNNL_ARG_WEIGHTS, lw.w},
             {DNNL_ARG_DST, view(pd.dst_desc(), products)}};
  st.flops = 2.0 * double(B * T) * double(lw.K) * double(lw.N);
  steps.push_back(std::move(st));
  steps.push_back(dequantize_step(name + ".dequantize", lw, B * T, ep, products, dst, s));
  return steps;
}

dnnl::post_ops epilogue_post_ops(Epilogue ep) {
  dnnl::post_ops po;
  append_activation(po, ep);
  if (ep == Epilogue::AddToDst) po.append_sum(1.f);
  return po;
}

Step matmul_step(const std::string& name, const LinearWeights& lw, int64_t M, const memory& src, float* dst,
                 Epilogue ep) {
  const memory::desc dst_md({M, lw.N}, dt::f32, tag::ab);
  dnnl::primitive_attr attr;
  attr.set_post_ops(epilogue_post_ops(ep));
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src.get_desc(), lw.w.get_desc(), bias_desc(lw), dst_md), attr,
                                  cpu_engine());
  if (lw.precision == Precision::BF16 && is_ref(pd.impl_info_str()))
    throw Error(name, "no bf16 matmul kernel but oneDNN's reference one on this CPU (" + cpu_isa().name + ")");
  Step s;
  s.name = name;
  s.prim = dnnl::matmul(pd);
  s.args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, lw.w}, {DNNL_ARG_DST, view(dst_md, dst)}};
  if (lw.b) s.args[DNNL_ARG_BIAS] = lw.b;
  s.flops = 2.0 * double(M) * double(lw.K) * double(lw.N);
  return s;
}

}  // namespace

size_t LinearWeights::bytes() const {
  return (w ? w.get_desc().get_size() : 0) + (b ? b.get_desc().get_size() : 0) + w_scale.size() * sizeof(float);
}

int int8_weight_max() { return cpu_isa().vnni ? 127 : 64; }

LinearWeights make_linear(Arena& store, const float* weight, const float* bias, int64_t K, int64_t N,
                          int64_t typical_rows, Precision precision, WeightLayout layout) {
  LinearWeights lw;
  lw.precision = precision;
  lw.K = K;
  lw.N = N;
  if (bias) lw.b = stored_copy(store, memory::desc({1, N}, dt::f32, tag::ab), bias);
  switch (precision) {
    case Precision::F32: return f32_weights(store, weight, typical_rows, layout, std::move(lw));
    case Precision::BF16: return bf16_weights(store, weight, typical_rows, std::move(lw));
    case Precision::Int8: return int8_weights(store, weight, typical_rows, std::move(lw));
  }
  throw Error("internal: unknown precision");
}

void add_linear_scratch(BufferTable& table, LinearScratch* s, Precision p, int64_t B, int64_t T, int64_t max_K,
                        int64_t max_add_N) {
  if (p == Precision::F32) return;
  table.add("linear.input", &s->input, B * T * max_K * (p == Precision::BF16 ? 2 : 1));
  if (p != Precision::Int8) return;
  table.add("linear.ranges", &s->ranges, 2 * B * T);
  table.add("linear.scale", &s->scale, B * T);
  table.add("linear.zero", &s->zero, B * T);
  table.add("linear.out", &s->out, B * T * max_add_N);
}

std::vector<Step> linear_steps(const std::string& name, const LinearWeights& lw, int64_t B, int64_t T,
                               const float* src, float* dst, Epilogue ep, const LinearScratch& scratch) {
  const int64_t M = B * T;
  switch (lw.precision) {
    case Precision::F32:
      return {matmul_step(name, lw, M, view(memory::desc({M, lw.K}, dt::f32, tag::ab), src), dst, ep)};
    case Precision::BF16: {
      const memory from = view(memory::desc({M, lw.K}, dt::f32, tag::ab), src);
      const memory to = view(memory::desc({M, lw.K}, dt::bf16, tag::ab), scratch.input);
      Step convert;
      convert.name = name + ".to_bf16";
      convert.prim = dnnl::reorder(from, to);
      convert.args = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
      return {std::move(convert), matmul_step(name, lw, M, to, dst, ep)};
    }
    case Precision::Int8: return int8_steps(name, lw, B, T, src, dst, ep, scratch);
  }
  throw Error("internal: unknown precision");
}

}  // namespace vit

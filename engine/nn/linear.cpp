// The linear layers of linear.h: weights prepared at load, and the steps of each precision. How the
// int8 layers run is decided per CPU by what oneDNN 2.6 runs fast there (docs/PERFORMANCE.md).
#include "engine/nn/linear.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "engine/nn/quantize.h"
#include "engine/nn/rows.h"
#include "engine/nn/signals.h"
#include "vit/error.h"

namespace vit {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

namespace {

memory stored_copy(Arena& store, const memory::desc& md, const void* src) {
  memory m(md, cpu_engine(), store.alloc(md.get_size()));
  std::memcpy(m.get_data_handle(), src, md.get_size());
  return m;
}

// Copies `from` into a new memory of `to_md` in the store, converting type and layout.
memory stored_reorder(Arena& store, const memory& from, const memory::desc& to_md) {
  memory to(to_md, cpu_engine(), store.alloc(to_md.get_size()));
  const SignalShield shield;
  dnnl::reorder(from, to).execute(cpu_stream(), const_cast<memory&>(from), to);
  cpu_stream().wait();
  return to;
}

memory::desc bias_desc(const LinearWeights& lw) { return lw.b ? lw.b.get_desc() : memory::desc(); }

// The activation epilogues as oneDNN post-ops: GELU (erf), QuickGELU as swish(alpha 1.702), GELU's tanh form.
constexpr float kQuickGeluAlpha = 1.702f;
void append_activation(dnnl::post_ops& po, Epilogue ep) {
  if (ep == Epilogue::Gelu) po.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
  if (ep == Epilogue::QuickGelu) po.append_eltwise(1.f, dnnl::algorithm::eltwise_swish, kQuickGeluAlpha, 0.f);
  if (ep == Epilogue::GeluTanh) po.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_tanh, 0.f, 0.f);
}

RowActivation row_activation(Epilogue ep) {
  if (ep == Epilogue::Gelu) return RowActivation::Gelu;
  if (ep == Epilogue::QuickGelu) return RowActivation::QuickGelu;
  if (ep == Epilogue::GeluTanh) return RowActivation::GeluTanh;
  return RowActivation::None;
}

// A layer's weights as a checkpoint stores them ([N, K] row-major), described for its form, and the
// layout left to the primitive.
memory::desc plain_weights(LinearForm f, const LinearWeights& lw, dt t) {
  return f == LinearForm::Conv1x1 ? memory::desc({lw.N, lw.K, 1, 1}, t, tag::oihw) : memory::desc({lw.K, lw.N}, t, tag::ba);
}
memory::desc any_weights(LinearForm f, const LinearWeights& lw, dt t) {
  return f == LinearForm::Conv1x1 ? memory::desc({lw.N, lw.K, 1, 1}, t, tag::any) : memory::desc({lw.K, lw.N}, t, tag::any);
}

// The product of M rows in form f: src [M, K] of src_t, dst [M, N] of dst_t, bias and post-ops fused.
// As a convolution, src is nhwc {1, K, 1, M} and dst nhwc {1, N, 1, M}: the same bytes.
dnnl::primitive_desc rows_pd(LinearForm f, const LinearWeights& lw, const memory::desc& w_md, int64_t M, dt src_t,
                             dt dst_t, bool with_bias, const dnnl::primitive_attr& attr = {}) {
  if (f == LinearForm::Conv1x1) {
    const memory::desc src({1, lw.K, 1, M}, src_t, tag::nhwc), dst({1, lw.N, 1, M}, dst_t, tag::nhwc);
    const memory::desc bias = with_bias ? memory::desc({lw.N}, dt::f32, tag::a) : memory::desc();
    return dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
                                        w_md, bias, dst, {1, 1}, {0, 0}, {0, 0}),
        attr, cpu_engine());
  }
  const memory::desc src({M, lw.K}, src_t, tag::ab), dst({M, lw.N}, dst_t, tag::ab);
  const memory::desc bias = with_bias ? memory::desc({1, lw.N}, dt::f32, tag::ab) : memory::desc();
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, w_md, bias, dst), attr, cpu_engine());
}

dnnl::post_ops epilogue_post_ops(Epilogue ep) {
  dnnl::post_ops po;
  append_activation(po, ep);
  if (ep == Epilogue::AddToDst) po.append_sum(1.f);
  return po;
}

// What a layer of this precision runs in form f at M rows, its weights in layout w_md: f32 or bf16 with
// bias and epilogue fused, or int8's plain s32 product.
dnnl::primitive_desc layer_pd(LinearForm f, const LinearWeights& lw, const memory::desc& w_md, int64_t M) {
  if (lw.precision == Precision::Int8) return rows_pd(f, lw, w_md, M, dt::u8, dt::s32, false);
  dnnl::primitive_attr attr;
  attr.set_post_ops(epilogue_post_ops(lw.epilogue));
  const dt in = lw.precision == Precision::BF16 ? dt::bf16 : dt::f32;
  return rows_pd(f, lw, w_md, M, in, dt::f32, bool(lw.b), attr);
}

// Seconds one run of the layer takes in form f at M rows (on zeros: the kernels' speed does not depend
// on the values), the best of a few.
double seconds_per_run(LinearForm f, const LinearWeights& lw, int64_t M) {
  const dt wt = lw.precision == Precision::Int8 ? dt::s8 : dt::f32;
  const auto pd = layer_pd(f, lw, any_weights(f, lw, wt), M);
  std::unordered_map<int, memory> args;
  for (const auto& [arg, md] : {std::pair{DNNL_ARG_SRC, pd.src_desc()}, std::pair{DNNL_ARG_WEIGHTS, pd.weights_desc()},
                                std::pair{DNNL_ARG_BIAS, pd.weights_desc(1)}, std::pair{DNNL_ARG_DST, pd.dst_desc()}}) {
    if (md.get_size() == 0) continue;
    memory m(md, cpu_engine());
    std::memset(m.get_data_handle(), 0, md.get_size());
    args[arg] = m;
  }
  const dnnl::primitive prim(pd);
  const SignalShield shield;
  double best = 1e30;
  for (int i = 0; i < 8; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    prim.execute(cpu_stream(), args);
    cpu_stream().wait();
    if (i >= 2) best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// The one place a layer's form is chosen, at T rows (one image's), so every batch size runs the same form.
// Rules measured per kernel family (docs/PERFORMANCE.md): where oneDNN's matmul is brgemm (AVX-512 and
// newer) it stays a matmul; where it is gemm:jit (AVX2), the 1x1 convolution (jit_uni_int8_1x1,
// jit_1x1) runs faster at every ViT shape measured, int8 and f32 (ViT-B's f32 layers by 15-23% at one
// image's rows, 4-7% at eight images' on a Zen 3). bf16 stays a matmul.
LinearForm choose_form(const LinearWeights& lw, int64_t T, LinearForm asked) {
  if (lw.precision == Precision::BF16) return LinearForm::Matmul;
  const char* env = std::getenv("VIT_LINEAR_FORM");
  const std::string how = env ? env : "";
  if (asked == LinearForm::Auto && how == "matmul") asked = LinearForm::Matmul;
  if (asked == LinearForm::Auto && how == "conv") asked = LinearForm::Conv1x1;
  if (asked == LinearForm::Matmul) return asked;
  const dt wt = lw.precision == Precision::Int8 ? dt::s8 : dt::f32;
  try {
    const auto conv = layer_pd(LinearForm::Conv1x1, lw, any_weights(LinearForm::Conv1x1, lw, wt), T);
    if (kernel_kind(impl_name(conv)) == KernelKind::Reference) return LinearForm::Matmul;
  } catch (const dnnl::error&) {  // no convolution of this kind here
    return LinearForm::Matmul;
  }
  if (asked == LinearForm::Conv1x1) return asked;
  if (how == "timed")
    return seconds_per_run(LinearForm::Conv1x1, lw, T) < seconds_per_run(LinearForm::Matmul, lw, T) ? LinearForm::Conv1x1
                                                                                                  : LinearForm::Matmul;
  const auto matmul = layer_pd(LinearForm::Matmul, lw, any_weights(LinearForm::Matmul, lw, wt), T);
  return kernel_kind(impl_name(matmul)) == KernelKind::Brgemm ? LinearForm::Matmul : LinearForm::Conv1x1;
}

LinearWeights f32_weights(Arena& store, const float* weight, int64_t typical_rows, WeightLayout layout,
                          LinearWeights lw) {
  if (lw.form == LinearForm::Conv1x1) {
    const auto pd = layer_pd(lw.form, lw, any_weights(lw.form, lw, dt::f32), typical_rows);
    lw.w = stored_reorder(store, memory_view(plain_weights(lw.form, lw, dt::f32), weight), pd.weights_desc());
    return lw;
  }
  const memory::desc plain({lw.K, lw.N}, dt::f32, tag::ba);
  if (layout != WeightLayout::NK) {
    // Ask the matmul which weight layout it wants for the rows it will mostly see.
    const memory::desc src({typical_rows, lw.K}, dt::f32, tag::ab), dst({typical_rows, lw.N}, dt::f32, tag::ab);
    const memory::desc any({lw.K, lw.N}, dt::f32, tag::any);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, any, bias_desc(lw), dst), cpu_engine());
    if (layout == WeightLayout::Blocked || kernel_kind(impl_name(pd)) == KernelKind::Brgemm) {
      lw.w = stored_reorder(store, memory_view(plain, weight), pd.weights_desc());
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
  // avx512_core without bf16 instructions gets a bf16 kernel that emulates them, four times slower than
  // f32 (DeiT-Tiny at batch 8: 23 against 96 img/s): refused like the reference kernel, not run slowly.
  if (!cpu_isa().bf16 || !pd || kernel_kind(impl_name(pd)) == KernelKind::Reference)
    throw Error("precision bf16 needs a CPU with avx512_bf16 or AMX; oneDNN runs this one as " + cpu_isa().name +
                ", without bf16 instructions: use --precision int8 or f32");
  lw.w = stored_reorder(store, memory_view(memory::desc({lw.K, lw.N}, dt::f32, tag::ba), weight), pd.weights_desc());
  return lw;
}

// The column sums of int8 weights q [N, K] into lw (in the store), to take an input's zero point out of the products.
void add_colsums(Arena& store, const int8_t* q, LinearWeights& lw) {
  std::vector<int32_t> colsum(size_t(lw.N), 0);
  for (int64_t n = 0; n < lw.N; ++n)
    for (int64_t k = 0; k < lw.K; ++k) colsum[size_t(n)] += q[n * lw.K + k];
  lw.w_colsum = Stored<int32_t>(store, colsum);
}

// The host passes, named for profiles by the vectors they run in.
Step host_pass(const std::string& name, std::function<void()> loop) {
  return host_step(name, std::move(loop), std::string("host:") + row_kernels().isa);
}

// Row r of K floats at x, whose range is [lo, hi], quantized to u8 on that range's grid into the scratch's
// row r, its grid in scale[r] and zero[r].
void quantize_row(const RowKernels& k, const float* x, int64_t K, float lo, float hi, int top, int64_t r,
                  const LinearScratch& s) {
  const Affine a = activation_affine(lo, hi, top);
  s.scale[r] = a.scale;
  s.zero[r] = a.zero;
  k.quantize(x, K, 1.f / a.scale, float(a.zero), float(top), s.input + r * K);
}

// Each row quantized to u8 on the grid of its own range, while it sits in L1: scale[r] and zero[r].
Step quantize_step(const std::string& name, int64_t rows, int64_t K, int top, const float* src,
                   const LinearScratch& s) {
  return host_pass(name, [=] {
    const RowKernels& k = row_kernels();
    parallel_for(rows, [&](int64_t r) {
      float lo, hi;
      k.range(src + r * K, K, &lo, &hi);
      quantize_row(k, src + r * K, K, lo, hi, top, r, s);
    });
  });
}

// The int8 product's second half: each row's s32 products sum(q w) made real with its own grid,
// (acc - zero * colsum[n]) * w_scale[n] * scale + bias[n], then GELU, then written or added into dst.
// The products may sit in dst itself (an s32 is the size of an f32): each vector is read before it
// is written.
// LinearOutput::Quantized: each row, once written, is also quantized on its own grid into the scratch
// for the next int8 layer, while it is in L1 (its grid replaces this layer's in scale and zero).
Step dequantize_step(const std::string& name, const LinearWeights& lw, int64_t rows, const void* products,
                     float* dst, const LinearScratch& s, LinearOutput out) {
  const int64_t N = lw.N;
  const Epilogue ep = lw.epilogue;
  const float* w_scale = lw.w_scale.data();
  const int32_t* colsum = lw.w_colsum.data();
  const float* bias = lw.b ? static_cast<const float*>(lw.b.get_data_handle()) : nullptr;
  const int top = lw.input_max;  // the next layer's too: can_quantize_for
  return host_pass(name, [=] {
    const RowKernels& k = row_kernels();
    parallel_for(rows, [&](int64_t r) {
      k.dequantize(static_cast<const int32_t*>(products) + r * N, N, s.zero[r], colsum, w_scale, s.scale[r], bias,
                   row_activation(ep), ep == Epilogue::AddToDst, dst + r * N);
      if (out == LinearOutput::Quantized) {
        float lo, hi;
        k.range(dst + r * N, N, &lo, &hi);
        quantize_row(k, dst + r * N, N, lo, hi, top, r, s);
      }
    });
  });
}

// int8: inputs quantized per row, one matmul over the whole batch giving exact s32 sums, then
// dequantize_step. An image's logits do not depend on its batch: integer sums are exact, and every grid
// is the row's own.
std::vector<Step> int8_steps(const std::string& name, const LinearWeights& lw, int64_t B, int64_t T,
                                     const float* src, float* dst, const LinearScratch& s, LinearInput in,
                                     LinearOutput out) {
  const auto pd = layer_pd(lw.form, lw, lw.w.get_desc(), B * T);
  // The products go to dst when the epilogue overwrites it, else to the scratch rows.
  void* products = lw.epilogue == Epilogue::AddToDst ? static_cast<void*>(s.out) : static_cast<void*>(dst);
  std::vector<Step> steps;
  if (in == LinearInput::F32) steps.push_back(quantize_step(name + ".quantize", B * T, lw.K, lw.input_max, src, s));
  Step st;
  st.name = name;
  st.prim = dnnl::primitive(pd);
  st.args = {{DNNL_ARG_SRC, memory_view(pd.src_desc(), s.input)}, {DNNL_ARG_WEIGHTS, lw.w},
             {DNNL_ARG_DST, memory_view(pd.dst_desc(), products)}};
  st.flops = 2.0 * double(B * T) * double(lw.K) * double(lw.N);
  steps.push_back(std::move(st));
  steps.push_back(dequantize_step(name + ".dequantize", lw, B * T, products, dst, s, out));
  return steps;
}

// Refuses int8 where oneDNN has only its reference kernel for the product.
void check_int8_kernel(const LinearWeights& lw, int64_t T) {
  const auto pd = layer_pd(LinearForm::Matmul, lw, plain_weights(LinearForm::Matmul, lw, dt::s8), T);
  if (kernel_kind(impl_name(pd)) == KernelKind::Reference)
    throw Error("this CPU's oneDNN has no int8 matmul kernel but its reference one; use --precision f32");
}

// The quantized weights in the layout the layer's form runs from: the convolution's, brgemm's (VNNI),
// or as stored (AVX2's gemm:jit matmul takes them plain).
memory store_int8(Arena& store, const int8_t* q, const LinearWeights& lw, int64_t T) {
  const memory::desc plain = plain_weights(lw.form, lw, dt::s8);
  const auto pd = layer_pd(lw.form, lw, any_weights(lw.form, lw, dt::s8), T);
  if (lw.form == LinearForm::Conv1x1 || kernel_kind(impl_name(pd)) == KernelKind::Brgemm)
    return stored_reorder(store, memory_view(plain, q), pd.weights_desc());
  return stored_copy(store, plain, q);
}

// f32 or bf16 src [M, K] (bf16 in the scratch) -> dst [M, N] in the layer's form, bias and epilogue fused.
Step float_step(const std::string& name, const LinearWeights& lw, int64_t M, const void* src, float* dst) {
  const auto pd = layer_pd(lw.form, lw, lw.w.get_desc(), M);
  if (lw.precision == Precision::BF16 && kernel_kind(impl_name(pd)) == KernelKind::Reference)
    throw Error(name, "no bf16 matmul kernel but oneDNN's reference one on this CPU (" + cpu_isa().name + ")");
  Step s;
  s.name = name;
  s.prim = dnnl::primitive(pd);
  s.args = {{DNNL_ARG_SRC, memory_view(pd.src_desc(), src)}, {DNNL_ARG_WEIGHTS, lw.w}, {DNNL_ARG_DST, memory_view(pd.dst_desc(), dst)}};
  if (lw.b) s.args[DNNL_ARG_BIAS] = memory_view(pd.weights_desc(1), lw.b.get_data_handle());
  s.flops = 2.0 * double(M) * double(lw.K) * double(lw.N);
  return s;
}

}  // namespace

const char* form_name(LinearForm f) {
  switch (f) {
    case LinearForm::Auto: return "auto";
    case LinearForm::Matmul: return "matmul";
    case LinearForm::Conv1x1: return "1x1 convolution";
  }
  return "?";
}

std::string linear_summary(const LinearWeights& lw) {
  std::string s = form_name(lw.form);
  if (lw.precision == Precision::Int8) s += ", s32 product, then dequantized per row";
  return s;
}

size_t LinearWeights::bytes() const {
  return (w ? w.get_desc().get_size() : 0) + (b ? b.get_desc().get_size() : 0) + w_scale.size() * sizeof(float);
}

std::vector<float> f32_weights(const LinearWeights& lw) {
  if (lw.precision != Precision::F32) throw Error("internal: f32_weights of a layer that is not f32");
  std::vector<float> w(size_t(lw.N * lw.K));
  memory from = lw.w, to = memory_view(plain_weights(lw.form, lw, dt::f32), w.data());
  dnnl::reorder(from, to).execute(cpu_stream(), from, to);
  cpu_stream().wait();
  return w;
}

int int8_weight_max() { return int8_grid(Int8Split::SevenBitWeights).weight_max; }

LinearWeights make_linear(Arena& store, const float* weight, const float* bias, int64_t K, int64_t N,
                          int64_t typical_rows, Epilogue ep, Precision precision, WeightLayout layout,
                          LinearForm form, Int8Split split) {
  if (precision == Precision::Int8) {  // rounded to nearest here, then as weights rounded ahead of time
    const Int8Grid grid = int8_grid(split);
    std::vector<int8_t> q(size_t(N * K));
    std::vector<float> scale(static_cast<size_t>(N));
    quantize_weights(weight, N, K, grid.weight_max, q.data(), scale.data());
    LinearWeights lw = make_int8_linear(store, {q.data(), scale.data()}, bias, K, N, typical_rows, ep, form);
    lw.input_max = grid.input_max;
    return lw;
  }
  LinearWeights lw;
  lw.precision = precision;
  lw.epilogue = ep;
  lw.K = K;
  lw.N = N;
  if (bias) lw.b = stored_copy(store, memory::desc({1, N}, dt::f32, tag::ab), bias);
  if (precision == Precision::F32) {
    lw.form = choose_form(lw, typical_rows, form);
    return f32_weights(store, weight, typical_rows, layout, std::move(lw));
  }
  lw.form = LinearForm::Matmul;
  return bf16_weights(store, weight, typical_rows, std::move(lw));
}

LinearWeights make_int8_linear(Arena& store, const Int8Weights& weight, const float* bias, int64_t K, int64_t N,
                               int64_t typical_rows, Epilogue ep, LinearForm form) {
  LinearWeights lw;
  lw.precision = Precision::Int8;
  lw.epilogue = ep;
  lw.K = K;
  lw.N = N;
  if (bias) lw.b = stored_copy(store, memory::desc({1, N}, dt::f32, tag::ab), bias);
  lw.w_scale = Stored<float>(store, std::vector<float>(weight.scale, weight.scale + N));
  add_colsums(store, weight.q, lw);
  check_int8_kernel(lw, typical_rows);
  lw.form = choose_form(lw, typical_rows, form);
  lw.w = store_int8(store, weight.q, lw, typical_rows);
  return lw;
}

bool can_quantize_for(const LinearWeights& lw, const LinearWeights& next) {
  return lw.precision == Precision::Int8 && lw.epilogue != Epilogue::AddToDst && next.precision == Precision::Int8 &&
         next.K == lw.N && next.input_max == lw.input_max;
}

Step norm_quantize_step(const std::string& name, const LayerNormWeights& ln, const LinearWeights& lw, int64_t B,
                        int64_t T, const float* src, float* h, const LinearScratch& s) {
  if (lw.precision != Precision::Int8 || ln.D != lw.K || ln.kind != NormKind::Layer)
    throw Error(name, "internal: LayerNorm of width " + std::to_string(ln.D) + " quantized for a layer that is not int8 of that width");
  const int64_t K = lw.K, rows = B * T;
  const float* gamma = static_cast<const float*>(ln.gamma.get_data_handle());
  const float* beta = static_cast<const float*>(ln.beta.get_data_handle());
  const float eps = ln.eps;
  const int top = lw.input_max;
  // Each row normalized and quantized on its own grid while it sits in L1.
  return host_pass(name, [=] {
    const RowKernels& k = row_kernels();
    parallel_for(rows, [&](int64_t r) {
      float lo, hi;
      k.layer_norm(src + r * K, K, gamma, beta, eps, h + r * K, &lo, &hi);
      quantize_row(k, h + r * K, K, lo, hi, top, r, s);
    });
  });
}

void add_linear_scratch(BufferTable& table, LinearScratch* s, Precision p, int64_t B, int64_t T, int64_t max_K,
                        int64_t max_add_N) {
  if (p == Precision::F32) return;
  table.add("linear.input", &s->input, B * T * max_K * (p == Precision::BF16 ? 2 : 1));
  if (p != Precision::Int8) return;
  table.add("linear.scale", &s->scale, B * T);
  table.add("linear.zero", &s->zero, B * T);
  table.add("linear.out", &s->out, B * T * max_add_N);
}

std::vector<Step> linear_steps(const std::string& name, const LinearWeights& lw, int64_t B, int64_t T,
                               const float* src, float* dst, const LinearScratch& scratch, LinearInput in,
                               LinearOutput out) {
  const int64_t M = B * T;
  if (in == LinearInput::Quantized && lw.precision != Precision::Int8)
    throw Error(name, "internal: a quantized input given to a layer that is not int8");
  if (out == LinearOutput::Quantized && (lw.precision != Precision::Int8 || lw.epilogue == Epilogue::AddToDst))
    throw Error(name, "internal: only an int8 layer that writes its output can quantize it");
  switch (lw.precision) {
    case Precision::F32:
      return {float_step(name, lw, M, src, dst)};
    case Precision::BF16: {
      const memory from = memory_view(memory::desc({M, lw.K}, dt::f32, tag::ab), src);
      const memory to = memory_view(memory::desc({M, lw.K}, dt::bf16, tag::ab), scratch.input);
      Step convert;
      convert.name = name + ".to_bf16";
      convert.prim = dnnl::reorder(from, to);
      convert.args = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
      return {std::move(convert), float_step(name, lw, M, scratch.input, dst)};
    }
    case Precision::Int8:
      return int8_steps(name, lw, B, T, src, dst, scratch, in, out);
  }
  throw Error("internal: unknown precision");
}

}  // namespace vit

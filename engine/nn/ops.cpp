// oneDNN primitives for the ops declared in ops.h. Every primitive is created here, when a Program is
// built, never while one runs; every one runs with the asynchronous signals held back (signals.h).
#include "engine/nn/ops.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "engine/nn/attention.h"
#include "engine/nn/signals.h"
#include "vit/error.h"

namespace vit {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

dnnl::engine& cpu_engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

dnnl::stream& cpu_stream() {
  static thread_local dnnl::stream s(cpu_engine());  // one per thread: Plans may run on several
  return s;
}

int max_threads() { return omp_get_max_threads(); }

memory memory_view(const memory::desc& md, const void* p) { return memory(md, cpu_engine(), const_cast<void*>(p)); }

int set_threads(int n) {
  if (n > 0) omp_set_num_threads(n);
  return omp_get_max_threads();
}

Step host_step(const std::string& name, std::function<void()> loop, const std::string& impl) {
  Step s;
  s.name = name;
  s.host = std::move(loop);
  s.impl = impl;
  return s;
}

std::string impl_name(const dnnl::primitive_desc_base& pd) { return pd.impl_info_str(); }

KernelKind kernel_kind(const std::string& impl) {
  if (impl.rfind("brg", 0) == 0) return KernelKind::Brgemm;
  if (impl.rfind("ref", 0) == 0) return KernelKind::Reference;
  return KernelKind::Jit;
}

void Program::add(Step s) {
  if (s.prim && s.impl.empty()) {
    const char* impl = nullptr;
    dnnl_primitive_desc_query(s.prim.get_primitive_desc(), dnnl_query_impl_info_str, 0, &impl);
    s.impl = impl ? impl : "?";
  }
  std::vector<dnnl_exec_arg_t> args;
  for (const auto& [k, m] : s.args) args.push_back({k, m.get()});
  c_args_.push_back(std::move(args));
  steps_.push_back(std::move(s));
}

void Program::execute(size_t i) const {
  const SignalShield shield;
  execute_step(i);
}

void Program::execute_step(size_t i) const {
  const Step& st = steps_[i];
  if (st.host) {
    st.host();
    return;
  }
  const auto& a = c_args_[i];
  const dnnl_status_t status = dnnl_primitive_execute(st.prim.get(), cpu_stream().get(), int(a.size()), a.data());
  if (status != dnnl_success) throw Error("oneDNN failed to execute " + st.name + " (status " + std::to_string(status) + ")");
}

void Program::run() const {
  const SignalShield shield;
  for (size_t i = 0; i < steps_.size(); ++i) execute_step(i);
  cpu_stream().wait();
}

std::vector<std::pair<std::string, double>> Program::profile() const {
  std::vector<std::pair<std::string, double>> out;
  const SignalShield shield;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    execute_step(i);
    cpu_stream().wait();
    out.emplace_back(steps_[i].name, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return out;
}

double Program::flops() const {
  double f = 0;
  for (const Step& st : steps_) f += st.flops;
  return f;
}

namespace {


memory stored_copy(Arena& store, const memory::desc& md, const float* src) {
  memory m(md, cpu_engine(), store.alloc(md.get_size()));
  std::memcpy(m.get_data_handle(), src, md.get_size());
  return m;
}

}  // namespace

LayerNormWeights make_layer_norm(Arena& store, const float* gamma, const float* beta, int64_t D, float eps) {
  LayerNormWeights ln;
  ln.D = D;
  ln.eps = eps;
  const memory::desc md({D}, dt::f32, tag::a);
  ln.gamma = stored_copy(store, md, gamma);
  ln.beta = stored_copy(store, md, beta);
  return ln;
}

Step layer_norm_step(const std::string& name, const LayerNormWeights& ln, int64_t M, const float* src, float* dst) {
  if (ln.kind == NormKind::Rms) return rms_norm_step(name, ln, M, src, dst);
  const memory::desc md({M, ln.D}, dt::f32, tag::ab);
  const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
  dnnl::layer_normalization_forward::primitive_desc pd(
      dnnl::layer_normalization_forward::desc(dnnl::prop_kind::forward_inference, md, ln.eps, flags), cpu_engine());
  Step s;
  s.name = name;
  s.prim = dnnl::layer_normalization_forward(pd);
  s.args = {{DNNL_ARG_SRC, memory_view(md, src)},
            {DNNL_ARG_DST, memory_view(md, dst)},
            {DNNL_ARG_SCALE, ln.gamma},
            {DNNL_ARG_SHIFT, ln.beta}};
  return s;
}

namespace {
int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// Floats of one (image, head)'s packed k and v.
int64_t packed_head_floats(int64_t T, int64_t Dh) {
  const int64_t Tp = round_up(T, 16);
  return attention_kt_floats(Dh, Tp) + attention_vp_floats(T, Tp, round_up(Dh, 16));
}
}  // namespace

int64_t attention_scratch_floats(int64_t B, int64_t T, int64_t H, int64_t Dh) {
  return B * H * packed_head_floats(T, Dh);
}

namespace {

// The lengths of a batch's images, read when a step runs: each must be in [lo, T], else an Error naming the step.
void check_lengths(const std::string& name, int64_t B, int64_t lo, int64_t T, const int32_t* lengths) {
  for (int64_t b = 0; b < B; ++b)
    if (lengths[b] < lo || lengths[b] > T)
      throw Error(name + ": image " + std::to_string(b) + " of the batch has length " + std::to_string(lengths[b]) +
                  ", outside [" + std::to_string(lo) + ", " + std::to_string(T) + "] tokens");
}

}  // namespace

std::vector<Step> attention_steps(const std::string& name, int64_t B, int64_t T, int64_t H, int64_t Dh,
                                  const float* qkv, float* heads, float* scores, float* out, const float* bias,
                                  Precision products, const int32_t* lengths, bool causal) {
  const int64_t D = H * Dh, Tp = round_up(T, 16), Dhp = round_up(Dh, 16), per_head = packed_head_floats(T, Dh);
  const AttentionKernels& k = attention_kernels(products);
  // Query rows per task: enough tasks for every thread even at one image, few enough to keep the tiles full.
  const int64_t chunk = 6 * k.tile_rows, chunks = (T + chunk - 1) / chunk;
  const std::string impl = std::string("host:") + k.isa;
  // Image b's own length: its keys packed as an image of that length alone would pack them.
  const auto length = [=](int64_t b) { return lengths ? int64_t(lengths[b]) : T; };
  std::vector<Step> steps;
  steps.push_back(host_step(name + ".pack", [=, &k] {
    if (lengths) check_lengths(name, B, 1, T, lengths);
    parallel_for(B * H, [&](int64_t bh) {
      const int64_t n = length(bh / H), np = round_up(n, 16);
      const float* row = qkv + (bh / H) * T * 3 * D + (bh % H) * Dh;
      k.pack(row + D, row + 2 * D, 3 * D, n, Dh, np, Dhp, heads + bh * per_head, heads + bh * per_head + Dh * np);
    });
  }, impl));
  Step fused = host_step(name + ".attend", [=, &k] {
    parallel_for(B * H * chunks, [&](int64_t task) {
      // Each thread's score tile, made on its first forward pass and kept.
      thread_local std::vector<float> work;
      work.resize(std::max(work.size(), size_t(kAttendWorkRows * (Tp + Dh))));
      const int64_t bh = task / chunks, b = bh / H, h = bh % H, r0 = (task % chunks) * chunk;
      const int64_t n = length(b), rows = std::min(chunk, T - r0), valid = std::clamp(n - r0, int64_t(0), rows);
      float* probs = scores ? scores + (bh * T + r0) * T : nullptr;
      float* o = out + (b * T + r0) * D + h * Dh;
      if (valid > 0) {
        AttendArgs a;
        a.q = qkv + (b * T + r0) * 3 * D + h * Dh;
        a.ld = 3 * D;
        a.rows = valid;
        a.T = n;
        a.Dh = Dh;
        a.Tp = round_up(n, 16);
        a.Dhp = Dhp;
        a.scale = 1.f / std::sqrt(float(Dh));
        a.kt = heads + bh * per_head;
        a.vp = a.kt + Dh * a.Tp;
        a.bias = bias ? bias + (h * T + r0) * T : nullptr;
        a.probs = probs;
        a.ldp = T;
        a.out = o;
        a.ldo = D;
        a.work = work.data();
        a.causal = causal;
        a.first = r0;
        k.attend(a);
      }
      // Padding (none without lengths): zero weight on padded keys, zeros for padded queries.
      if (probs)
        for (int64_t r = 0; r < rows; ++r) std::fill(probs + r * T + (r < valid ? n : 0), probs + (r + 1) * T, 0.f);
      for (int64_t r = valid; r < rows; ++r) std::fill_n(o + r * D, Dh, 0.f);
    });
  }, impl);
  fused.flops = 4.0 * double(B * H) * double(T) * double(T) * double(Dh);
  steps.push_back(std::move(fused));
  return steps;
}

Step lookup_bias_step(const std::string& name, int64_t H, int64_t T, const float* table, const int32_t* index,
                      float* bias) {
  return host_step(name, [=] {
    parallel_for(H, [&](int64_t h) {
      float* dst = bias + h * T * T;
      for (int64_t ij = 0; ij < T * T; ++ij) dst[ij] = table[int64_t(index[ij]) * H + h];
    });
  });
}

Step rotary_step(const std::string& name, int64_t B, int64_t T, int64_t first, int64_t groups, int64_t Dh,
                 int64_t stride, const float* sin, const float* cos, float* x, RotaryLayout layout, int64_t tables) {
  // Pair i's channels: (2i, 2i + 1) interleaved, (i, i + Dh/2) in halves.
  const int64_t half = Dh / 2, step = layout == RotaryLayout::Half ? 1 : 2, other = layout == RotaryLayout::Half ? half : 1;
  return host_step(name, [=] {
    const int64_t rotated = T - first;
    parallel_for(B * rotated, [&](int64_t bt) {
      const int64_t b = bt / rotated, t = bt % rotated;
      float* row = x + (b * T + first + t) * stride;
      for (int64_t g = 0; g < groups; ++g) {
        const float* s = sin + ((g % tables) * rotated + t) * half;
        const float* c = cos + ((g % tables) * rotated + t) * half;
        float* v = row + g * Dh;
        for (int64_t i = 0; i < half; ++i) {
          float* a = v + i * step;
          const float x0 = a[0], x1 = a[other];
          a[0] = x0 * c[i] - x1 * s[i];
          a[other] = x1 * c[i] + x0 * s[i];
        }
      }
    });
  });
}

LayerNormWeights make_rms_norm(Arena& store, const float* gamma, int64_t D, float eps) {
  LayerNormWeights rn;
  rn.D = D;
  rn.eps = eps;
  rn.kind = NormKind::Rms;
  rn.gamma = stored_copy(store, memory::desc({D}, dt::f32, tag::a), gamma);
  return rn;
}

Step rms_norm_step(const std::string& name, const LayerNormWeights& rn, int64_t M, const float* src, float* dst) {
  if (rn.kind != NormKind::Rms) throw Error(name, "internal: rms_norm_step of a LayerNorm");
  const float* gamma = static_cast<const float*>(rn.gamma.get_data_handle());
  return host_step(name, [=] {
    const int64_t D = rn.D;
    parallel_for(M, [&](int64_t m) {
      const float* x = src + m * D;
      float* y = dst + m * D;
      // torch.mean(x.pow(2)) in float32 (a pairwise sum there; in double here, nearer the exact mean).
      double sq = 0;
      for (int64_t i = 0; i < D; ++i) sq += double(x[i]) * x[i];
      const float r = 1.f / std::sqrt(float(sq / double(D)) + rn.eps);
      for (int64_t i = 0; i < D; ++i) y[i] = x[i] * r * gamma[i];
    });
  }, "host rms_norm");
}

Step swiglu_step(const std::string& name, int64_t M, int64_t H, const float* src, float* dst) {
  return host_step(name, [=] {
    parallel_for(M, [&](int64_t m) {
      const float* g = src + m * 2 * H;
      const float* v = g + H;
      float* o = dst + m * H;
      for (int64_t i = 0; i < H; ++i) o[i] = g[i] / (1.f + std::exp(-g[i])) * v[i];
    });
  });
}

Step attention_pool_step(const std::string& name, int64_t B, int64_t T, int64_t H, int64_t Dh, const float* q,
                         const float* kv, float* scores, float* out, const int32_t* lengths) {
  Step s = host_step(name, [=] {
    if (lengths) check_lengths(name, B, 1, T, lengths);
    const int64_t D = H * Dh;
    const float scale = 1.f / std::sqrt(float(Dh));
    parallel_for(B * H, [&](int64_t bh) {
      const int64_t b = bh / H, h = bh % H, n = lengths ? int64_t(lengths[b]) : T;
      const float* qh = q + h * Dh;
      float* p = scores + bh * T;
      std::fill(p + n, p + T, 0.f);
      float top = -INFINITY;
      for (int64_t t = 0; t < n; ++t) {
        const float* k = kv + (b * T + t) * 2 * D + h * Dh;
        float dot = 0.f;
        for (int64_t d = 0; d < Dh; ++d) dot += qh[d] * k[d];
        p[t] = dot * scale;
        top = std::max(top, p[t]);
      }
      float sum = 0.f;
      for (int64_t t = 0; t < n; ++t) sum += (p[t] = std::exp(p[t] - top));
      float* o = out + b * D + h * Dh;
      for (int64_t d = 0; d < Dh; ++d) o[d] = 0.f;
      for (int64_t t = 0; t < n; ++t) {
        const float w = p[t] / sum;
        const float* v = kv + (b * T + t) * 2 * D + D + h * Dh;
        for (int64_t d = 0; d < Dh; ++d) o[d] += w * v[d];
      }
    });
  });
  s.flops = 4.0 * double(B * H * T * Dh);
  return s;
}

Step patchify_step(const std::string& name, int64_t B, int64_t C, int64_t Sh, int64_t Sw, int64_t P,
                   const float* src, float* dst) {
  return host_step(name, [=] {
    const int64_t Nh = Sh / P, Nw = Sw / P, row = C * P * P;
    parallel_for(B * Nh, [&](int64_t bg) {
      const int64_t b = bg / Nh, gy = bg % Nh;
      for (int64_t gx = 0; gx < Nw; ++gx) {
        float* o = dst + (bg * Nw + gx) * row;
        for (int64_t c = 0; c < C; ++c)
          for (int64_t ky = 0; ky < P; ++ky) {
            const float* in = src + ((b * C + c) * Sh + gy * P + ky) * Sw + gx * P;
            std::memcpy(o + (c * P + ky) * P, in, size_t(P) * sizeof(float));
          }
      }
    });
  });
}

Step embed_tokens_step(const std::string& name, int64_t B, int64_t N, int64_t D,
                       const std::vector<const float*>& prefix, const float* pos, bool pos_covers_prefix,
                       const float* patches, float* x) {
  return host_step(name, [=] {
    const int64_t P = int64_t(prefix.size()), T = P + N;
    parallel_for(B, [&](int64_t b) {
      float* xb = x + b * T * D;
      for (int64_t t = 0; t < P; ++t) std::memcpy(xb + t * D, prefix[size_t(t)], size_t(D) * sizeof(float));
      const float* src = patches + b * N * D;
      if (!pos) {
        std::memcpy(xb + P * D, src, size_t(N * D) * sizeof(float));
        return;
      }
      if (pos_covers_prefix)
        for (int64_t i = 0; i < P * D; ++i) xb[i] += pos[i];
      const float* pp = pos_covers_prefix ? pos + P * D : pos;
      for (int64_t i = 0; i < N * D; ++i) xb[P * D + i] = src[i] + pp[i];
    });
  });
}

Step select_token_step(const std::string& name, int64_t B, int64_t T, int64_t D, int64_t t, const float* src,
                       float* dst) {
  return host_step(name, [=] {
    for (int64_t b = 0; b < B; ++b) std::memcpy(dst + b * D, src + (b * T + t) * D, size_t(D) * sizeof(float));
  });
}

Step mean_tokens_step(const std::string& name, int64_t B, int64_t T, int64_t D, int64_t first, const float* src,
                      float* dst, const int32_t* lengths) {
  return host_step(name, [=] {
    if (lengths) check_lengths(name, B, first + 1, T, lengths);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t n = lengths ? int64_t(lengths[b]) : T;
      float* o = dst + b * D;
      const float* f = src + b * T * D;
      for (int64_t d = 0; d < D; ++d) o[d] = 0.f;
      for (int64_t t = first; t < n; ++t)
        for (int64_t d = 0; d < D; ++d) o[d] += f[t * D + d];
      for (int64_t d = 0; d < D; ++d) o[d] /= float(n - first);
    }
  });
}

Step average_step(const std::string& name, int64_t n, const float* y, float* x) {
  return host_step(name, [=] {
    for (int64_t i = 0; i < n; ++i) x[i] = 0.5f * (x[i] + y[i]);
  });
}

CpuIsa cpu_isa() {
  using isa = dnnl::cpu_isa;
  const isa have = dnnl::get_effective_cpu_isa();
  // Each ISA's value holds the bits of those it extends.
  const auto has = [&](isa i) { return (unsigned(have) & unsigned(i)) == unsigned(i); };
  static const std::pair<isa, const char*> kNames[] = {
      {isa::avx512_core_amx, "avx512_core_amx"}, {isa::avx512_core_bf16, "avx512_core_bf16"},
      {isa::avx512_core_vnni, "avx512_core_vnni"}, {isa::avx512_core, "avx512_core"}, {isa::avx2_vnni, "avx2_vnni"},
      {isa::avx2, "avx2"}, {isa::avx, "avx"}, {isa::sse41, "sse41"}};
  CpuIsa c{"below sse41", false, false};
  for (const auto& [i, name] : kNames)
    if (has(i)) {
      c.name = name;
      break;
    }
  c.bf16 = has(isa::avx512_core_bf16);
  c.vnni = has(isa::avx512_core_vnni) || has(isa::avx2_vnni);
  return c;
}

MatmulPeak matmul_peak(Precision p) {
  const int64_t M = 3152, K = 768, N = 3072;
  const dt src_t = p == Precision::Int8 ? dt::u8 : p == Precision::BF16 ? dt::bf16 : dt::f32;
  const dt w_t = p == Precision::Int8 ? dt::s8 : src_t, dst_t = p == Precision::Int8 ? dt::s32 : dt::f32;
  const memory::desc a({M, K}, src_t, tag::ab), w({K, N}, w_t, tag::any), c({M, N}, dst_t, tag::ab);
  dnnl::matmul::primitive_desc pd;
  try {
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, w, c), cpu_engine());
  } catch (const dnnl::error&) {
    return {0, "none"};
  }
  memory am(a, cpu_engine()), wm(pd.weights_desc(), cpu_engine()), cm(c, cpu_engine());
  // Ordinary values (0.5 in f32 and bf16, 1 in u8 and s8): no denormal products to slow a kernel down.
  for (memory* m : {&am, &wm}) {
    const size_t bytes = m->get_desc().get_size();
    void* d = m->get_data_handle();
    const dt t = m->get_desc().data_type();
    if (t == dt::f32) std::fill_n(static_cast<float*>(d), bytes / sizeof(float), 0.5f);
    else if (t == dt::bf16) std::fill_n(static_cast<uint16_t*>(d), bytes / sizeof(uint16_t), uint16_t(0x3F00));
    else std::memset(d, 1, bytes);
  }
  Program prog;
  prog.add({"peak", dnnl::matmul(pd), {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, cm}}, {}, 0, ""});
  for (int i = 0; i < 2; ++i) prog.run();
  // At least 3 runs and half a second; the best run counts, as a profile's best pass does (on a shared
  // machine the mean measures the other processes too).
  int runs = 0;
  double s = 0, best = 1e30;
  const auto t0 = std::chrono::steady_clock::now();
  while (runs < 3 || s < 0.5) {
    const auto r0 = std::chrono::steady_clock::now();
    prog.run();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count());
    ++runs;
    s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return {2.0 * double(M * K * N) / best / 1e9, prog.steps()[0].impl};
}

std::optional<Precision> product_precision(const Step& s) {
  if (!s.prim || s.flops <= 0) return std::nullopt;
  const dnnl_memory_desc_t* md = dnnl_primitive_desc_query_md(s.prim.get_primitive_desc(), dnnl_query_src_md, 0);
  if (!md) return std::nullopt;
  switch (memory::desc(*md).data_type()) {
    case dt::u8:
    case dt::s8: return Precision::Int8;
    case dt::bf16: return Precision::BF16;
    case dt::f32: return Precision::F32;
    default: return std::nullopt;
  }
}

}  // namespace vit

// Attention's second road (ops.h, AttentionRoad::Matmuls): the heads copied out of the qkv rows, q k^T and
// the softmax times v as oneDNN batched matmuls with oneDNN's softmax between them; and the choice between it
// and the fused host kernel, timed once per shape.
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <tuple>

#include "engine/nn/ops.h"
#include "vit/error.h"

namespace vit {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

namespace {

// f32 to bf16, rounded to nearest even (as oneDNN's reorders and vcvtneps2bf16 round).
inline uint16_t to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// Where the road's buffers sit in its scratch (in floats): q, k, v dense [3, B, H, T, Dh] in the products'
// type, the scores [B, H, T, T] in f32 (unless the caller keeps them), and for bf16 products the softmax
// rows in bf16.
struct MatmulScratch {
  int64_t qkv, scores, probs, total;
  MatmulScratch(int64_t B, int64_t T, int64_t H, int64_t Dh, Precision products) {
    const int64_t per = products == Precision::BF16 ? 2 : 1;  // values per float
    qkv = 0;
    scores = (3 * B * H * T * Dh + per - 1) / per;
    probs = scores + B * H * T * T;
    total = probs + (products == Precision::BF16 ? (B * H * T * T + 1) / 2 : 0);
  }
};

// heads [3, B, H, T, Dh] (f32, or bf16 for bf16 products) = the q, k and v heads of the qkv rows [B, T, 3, H, Dh].
Step split_heads_step(const std::string& name, int64_t B, int64_t T, int64_t H, int64_t Dh, const float* qkv,
                      void* heads, Precision products) {
  return host_step(name, [=] {
    const int64_t D = H * Dh, BHTD = B * H * T * Dh;
    parallel_for(B * T, [&](int64_t bt) {
      const int64_t b = bt / T, t = bt % T;
      const float* row = qkv + bt * 3 * D;
      for (int64_t s3 = 0; s3 < 3; ++s3)
        for (int64_t h = 0; h < H; ++h) {
          const int64_t at = s3 * BHTD + ((b * H + h) * T + t) * Dh;
          const float* in = row + s3 * D + h * Dh;
          if (products == Precision::BF16) {
            uint16_t* o = static_cast<uint16_t*>(heads) + at;
            for (int64_t d = 0; d < Dh; ++d) o[d] = to_bf16(in[d]);
          } else {
            std::memcpy(static_cast<float*>(heads) + at, in, size_t(Dh) * sizeof(float));
          }
        }
    });
  });
}

Step primitive_step(const std::string& name, const dnnl::primitive& prim, std::unordered_map<int, memory> args,
                    double flops = 0) {
  Step s;
  s.name = name;
  s.prim = prim;
  s.args = std::move(args);
  s.flops = flops;
  return s;
}

std::string step_impl(const Step& s) {
  const char* impl = nullptr;
  dnnl_primitive_desc_query(s.prim.get_primitive_desc(), dnnl_query_impl_info_str, 0, &impl);
  return impl ? impl : "";
}

dnnl::softmax_v2_forward::primitive_desc softmax_pd(const memory::desc& src, const memory::desc& dst) {
  return dnnl::softmax_v2_forward::primitive_desc(
      dnnl::softmax_v2_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::softmax_accurate, src, dst, 3),
      cpu_engine());
}

dt products_type(Precision products) { return products == Precision::BF16 ? dt::bf16 : dt::f32; }

// q k^T for B images: q [B, H, T, Dh] times k [B, H, T, Dh] read transposed ([B, H, Dh, T] as abdc), into f32 scores
// [B, H, T, T], 1/sqrt(Dh) as the output scale.
dnnl::matmul::primitive_desc scores_pd(int64_t B, int64_t T, int64_t H, int64_t Dh, Precision products) {
  const dt pt = products_type(products);
  const memory::desc q_md({B, H, T, Dh}, pt, tag::abcd), kt_md({B, H, Dh, T}, pt, tag::abdc);
  dnnl::primitive_attr scaled;
  scaled.set_output_scales(0, {1.f / std::sqrt(float(Dh))});
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(q_md, kt_md, memory::desc({B, H, T, T}, dt::f32, tag::abcd)),
                                      scaled, cpu_engine());
}

}  // namespace

int64_t attention_matmul_floats(int64_t B, int64_t T, int64_t H, int64_t Dh, Precision products) {
  return MatmulScratch(B, T, H, Dh, attention_matmul_products(products)).total;
}

Precision attention_matmul_products(Precision asked) {
  return asked != Precision::F32 && cpu_isa().bf16 ? Precision::BF16 : Precision::F32;
}

std::vector<Step> attention_matmul_steps(const std::string& name, int64_t B, int64_t T, int64_t H, int64_t Dh,
                                         const float* qkv, float* work, float* scores, float* out, Precision asked) {
  const Precision products = attention_matmul_products(asked);
  const dt pt = products_type(products);
  const int64_t D = H * Dh, BHTD = B * H * T * Dh;
  const MatmulScratch at(B, T, H, Dh, products);
  const size_t value = products == Precision::BF16 ? 2 : 4;
  char* heads = reinterpret_cast<char*>(work + at.qkv);
  float* S = scores ? scores : work + at.scores;
  const memory::desc q_md({B, H, T, Dh}, pt, tag::abcd), kt_md({B, H, Dh, T}, pt, tag::abdc);
  const memory::desc s_md({B, H, T, T}, dt::f32, tag::abcd), p_md({B, H, T, T}, pt, tag::abcd);
  const memory::desc o_md({B, H, T, Dh}, dt::f32, memory::dims{T * D, Dh, D, 1});  // heads concatenated
  std::vector<Step> steps;
  steps.push_back(split_heads_step(name + ".split_heads", B, T, H, Dh, qkv, heads, products));

  const dnnl::matmul::primitive_desc qk = scores_pd(B, T, H, Dh, products);
  const double flops = 2.0 * double(B * H) * double(T) * double(T) * double(Dh);
  steps.push_back(primitive_step(name + ".qk", dnnl::matmul(qk),
                                 {{DNNL_ARG_SRC, memory_view(q_md, heads)}, {DNNL_ARG_WEIGHTS, memory_view(kt_md, heads + BHTD * value)},
                                  {DNNL_ARG_DST, memory_view(s_md, S)}},
                                 flops));
  // The softmax in place in f32; for bf16 products written as bf16 rows for the second product (straight
  // from the softmax, or converted after it when the f32 rows are kept).
  void* P = S;
  if (products == Precision::F32) {
    steps.push_back(primitive_step(name + ".softmax", dnnl::softmax_v2_forward(softmax_pd(s_md, s_md)),
                                   {{DNNL_ARG_SRC, memory_view(s_md, S)}, {DNNL_ARG_DST, memory_view(s_md, S)}}));
  } else {
    P = work + at.probs;
    if (scores) {
      steps.push_back(primitive_step(name + ".softmax", dnnl::softmax_v2_forward(softmax_pd(s_md, s_md)),
                                     {{DNNL_ARG_SRC, memory_view(s_md, S)}, {DNNL_ARG_DST, memory_view(s_md, S)}}));
      const memory from = memory_view(s_md, S), to = memory_view(p_md, P);
      steps.push_back(primitive_step(name + ".to_bf16", dnnl::reorder(from, to), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}}));
    } else {
      steps.push_back(primitive_step(name + ".softmax", dnnl::softmax_v2_forward(softmax_pd(s_md, p_md)),
                                     {{DNNL_ARG_SRC, memory_view(s_md, S)}, {DNNL_ARG_DST, memory_view(p_md, P)}}));
    }
  }
  const dnnl::matmul::primitive_desc pv(dnnl::matmul::desc(p_md, q_md, o_md), cpu_engine());
  steps.push_back(primitive_step(name + ".pv", dnnl::matmul(pv),
                                 {{DNNL_ARG_SRC, memory_view(p_md, P)}, {DNNL_ARG_WEIGHTS, memory_view(q_md, heads + 2 * BHTD * value)},
                                  {DNNL_ARG_DST, memory_view(o_md, out)}},
                                 flops));
  for (const Step& s : steps)
    if (s.prim && kernel_kind(step_impl(s)) == KernelKind::Reference)
      throw Error(s.name, "oneDNN has only its reference kernel for this step on this CPU (" + cpu_isa().name + ")");
  return steps;
}

namespace {

// The best of a few runs of steps, in seconds.
double best_seconds(std::vector<Step> steps) {
  Program p;
  for (Step& s : steps) p.add(std::move(s));
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    p.run();
    if (i >= 1) best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// Both roads timed on random rows of this shape; the matmuls taken only when they are clearly faster (by a
// fifth: on AVX2 the two are level, within 5%, on AMX the matmuls run on tiles), so that timing noise seldom
// changes the choice, and with it the last bits of an answer, between runs.
AttentionRoad timed_road(int64_t B, int64_t T, int64_t H, int64_t Dh, Precision products) {
  // Where oneDNN's batched matmuls are gemm:jit (AVX2), the two roads were measured level (docs/PERFORMANCE.md), and
  // timing them would cost tens of milliseconds of start-up (gemm:jit's first runs): the fused kernel, untimed.
  try {
    if (kernel_kind(impl_name(scores_pd(B, T, H, Dh, attention_matmul_products(products)))) != KernelKind::Brgemm)
      return AttentionRoad::Fused;
  } catch (const dnnl::error&) {
    return AttentionRoad::Fused;
  }
  const int64_t D = H * Dh;
  std::vector<float> qkv(size_t(B * T * 3 * D)), out(size_t(B * T * D));
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (float& x : qkv) x = normal(rng);
  std::vector<float> packed(size_t(attention_scratch_floats(B, T, H, Dh))),
      work(size_t(attention_matmul_floats(B, T, H, Dh, products)));
  std::vector<Step> matmuls;
  try {
    matmuls = attention_matmul_steps("attn", B, T, H, Dh, qkv.data(), work.data(), nullptr, out.data(), products);
  } catch (const std::exception&) {  // no fast kernel for a step here
    return AttentionRoad::Fused;
  }
  const double fused = best_seconds(attention_steps("attn", B, T, H, Dh, qkv.data(), packed.data(), nullptr, out.data(),
                                                    nullptr, products));
  return best_seconds(std::move(matmuls)) < 0.8 * fused ? AttentionRoad::Matmuls : AttentionRoad::Fused;
}

}  // namespace

AttentionRoad attention_road(int64_t B, int64_t T, int64_t H, int64_t Dh, Precision products) {
  const char* env = std::getenv("VIT_ATTENTION");
  const std::string asked = env ? env : "";
  if (asked == "fused") return AttentionRoad::Fused;
  if (asked == "matmuls") return AttentionRoad::Matmuls;
  if (!asked.empty() && asked != "timed")
    throw Error("VIT_ATTENTION=" + asked + ": expected fused, matmuls or timed (the default)");
  static std::mutex mutex;
  static std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, Precision, int>, AttentionRoad> chosen;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(B, T, H, Dh, products, max_threads());
  const auto it = chosen.find(key);
  if (it != chosen.end()) return it->second;
  return chosen[key] = timed_road(B, T, H, Dh, products);
}

const char* road_name(AttentionRoad r) { return r == AttentionRoad::Matmuls ? "oneDNN matmuls" : "fused kernel"; }

}  // namespace vit

// oneDNN building blocks, model-agnostic. Weights are reordered once into the layout chosen at load;
// for each batch size a model builds a Program: a flat list of Steps (a primitive with its bound
// arguments, or a small host loop), so a forward pass only calls execute() and allocates nothing.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "engine/nn/arena.h"
#include "vit/cpu.h"
#include "vit/precision.h"
#include "vit/threads.h"

namespace vit {

dnnl::engine& cpu_engine();
// A memory of md over p, which the caller owns: how a primitive's arguments point into an arena or the store.
dnnl::memory memory_view(const dnnl::memory::desc& md, const void* p);
dnnl::stream& cpu_stream();
int max_threads();

// Runs body(i) for i in [0, n) on the OpenMP threads, or inline when there is one thread (libgomp
// allocates a team for every single-thread parallel region; a forward pass allocates nothing).
template <typename F>
void parallel_for(int64_t n, const F& body) {
  if (max_threads() == 1) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) body(i);
}

struct Step {
  std::string name;                              // for profiles: "blocks.3.mlp.fc1"
  dnnl::primitive prim;                          // either a primitive with its args ...
  std::unordered_map<int, dnnl::memory> args;
  std::function<void()> host;                    // ... or a host loop
  double flops = 0;                              // 2 x multiply-adds, for reports
  std::string impl;  // oneDNN's implementation ("brg:avx512_core_vnni"), or what runs a host loop;
                     // filled in by Program::add for primitives
};

// What kind of kernel oneDNN chose for a primitive: its brgemm kernels (AVX-512 and newer), its
// reference kernels (plain loops, far slower: never run in a forward pass), or another of its JIT ones.
enum class KernelKind { Brgemm, Reference, Jit };
KernelKind kernel_kind(const std::string& impl);
std::string impl_name(const dnnl::primitive_desc_base& pd);

// A step that runs a host loop; impl says how, for profiles.
Step host_step(const std::string& name, std::function<void()> loop, const std::string& impl = "host");

// Steps run with the asynchronous signals blocked in every thread of the team (SignalShield, signals.h):
// a signal that arrives meanwhile is delivered when run() returns.
class Program {
 public:
  void add(Step s);
  void run() const;
  void execute(size_t i) const;  // step i alone, without waiting for the stream
  // Runs once, timing each step; returns {name, seconds} in order.
  std::vector<std::pair<std::string, double>> profile() const;
  double flops() const;
  const std::vector<Step>& steps() const { return steps_; }

 private:
  void execute_step(size_t i) const;  // without a shield of its own
  std::vector<Step> steps_;
  // Each primitive step's arguments as oneDNN's C API takes them, built once: the C++ execute()
  // rebuilds that array (a heap allocation) on every call.
  std::vector<std::vector<dnnl_exec_arg_t>> c_args_;
};

// A norm over rows of D: LayerNorm (mean and variance, gamma and beta), or RMSNorm (timm's RmsNorm: the root
// mean square only, gamma, no beta: AIMv2).
enum class NormKind { Layer, Rms };
struct LayerNormWeights {
  int64_t D = 0;
  float eps = 1e-6f;
  NormKind kind = NormKind::Layer;
  dnnl::memory gamma, beta;  // beta empty for RMSNorm
};
LayerNormWeights make_layer_norm(Arena& store, const float* gamma, const float* beta, int64_t D, float eps);
// dst[M, D] = the norm of src[M, D] over the last dimension (in place when dst == src): oneDNN's LayerNorm, or
// for an RMSNorm rms_norm_step.
Step layer_norm_step(const std::string& name, const LayerNormWeights& ln, int64_t M, const float* src, float* dst);

// Multi-head self-attention core on qkv [B, T, 3, H, Dh] (a linear layer's output, [B*T, 3*H*Dh]):
// out [B, T, H*Dh] = softmax(Q K^T / sqrt(Dh) + bias) V per image and head, written straight into the
// heads-concatenated layout, by the fused kernel of attention.h. heads: scratch of
// attention_scratch_floats(B, T, H, Dh) (each head's K and V packed); scores [B, H, T, T]: the softmax
// written out, or null; bias [H, T, T] (the same for every image) or null. An image's result does not
// depend on the images beside it. products: what q k^T and the softmax times v multiply in, BF16 or
// Int8 where the CPU has those kernels (attention_kernels(Precision)), else f32.
// lengths: images of different lengths padded to T (NaFlex), or null when every image fills T. Image b's
// first lengths[b] tokens are its own, the rest padding; the lengths are read when the step runs, so one
// Plan serves every batch, and each must be in [1, T] (an Error otherwise). Image b is computed exactly as
// alone with T = lengths[b] (the same kernel, loop order and blocking: its answer is bit-identical): padded
// keys get no weight, padded query rows are written as zeros, and its scores hold its softmax in their top
// left lengths[b] x lengths[b] corner, zeros elsewhere; a bias is read in that corner.
// causal: each token attends to itself and the tokens before it only (CLIP's text tower: open_clip's attn_mask,
// -inf above the diagonal, which adds nothing elsewhere); its scores past them are zero.
int64_t attention_scratch_floats(int64_t B, int64_t T, int64_t H, int64_t Dh);
std::vector<Step> attention_steps(const std::string& name, int64_t B, int64_t T, int64_t H, int64_t Dh,
                                  const float* qkv, float* heads, float* scores, float* out,
                                  const float* bias = nullptr, Precision products = Precision::F32,
                                  const int32_t* lengths = nullptr, bool causal = false);

// attention_steps' two roads, chosen per shape by attention_road. Fused: the host kernel of attention.h (any
// bias, lengths, products). Matmuls: the heads copied out of the qkv rows into dense [3, B, H, T, Dh] in the
// products' type, q k^T as one oneDNN batched matmul (1/sqrt(Dh) as its output scale), oneDNN's softmax in f32,
// then its product with v as a second matmul written straight into the heads-concatenated output: the road on
// which oneDNN picks its own kernels per CPU (AMX tiles where there are some). No bias, lengths or causal mask on it.
enum class AttentionRoad { Fused, Matmuls };
const char* road_name(AttentionRoad r);
// The faster road for B images of this shape at this many threads, timed once per process on random rows
// (the matmuls only when a fifth faster, so timing noise seldom changes the choice between runs);
// VIT_ATTENTION=fused or =matmuls in the environment forces one (anything else but "timed" is an Error).
AttentionRoad attention_road(int64_t B, int64_t T, int64_t H, int64_t Dh, Precision products);
// What the matmul road multiplies in for products asked: bf16 for bf16 or int8 where the CPU has bf16
// instructions, else f32 (its int8 products would need per-row scales that oneDNN 2.6's matmul has no post-op for).
Precision attention_matmul_products(Precision asked);
// The matmul road's scratch, in floats, for B images.
int64_t attention_matmul_floats(int64_t B, int64_t T, int64_t H, int64_t Dh, Precision products);
// The matmul road's steps: attention_steps' contract without bias or lengths; work: attention_matmul_floats;
// scores: where the softmax is written out, or null (then it is kept in work). Throws where oneDNN has only
// its reference kernel for a step.
std::vector<Step> attention_matmul_steps(const std::string& name, int64_t B, int64_t T, int64_t H, int64_t Dh,
                                         const float* qkv, float* work, float* scores, float* out,
                                         Precision products = Precision::F32);

// A bias per head looked up through an index over token pairs, written out dense for attention_steps:
// bias[h, i, j] = table[index[i * T + j] * H + h] (a relative position bias: table [R, H], index [T, T] of
// values below R), bias [H, T, T].
Step lookup_bias_step(const std::string& name, int64_t H, int64_t T, const float* table, const int32_t* index,
                      float* bias);

// How a head's channels pair up for a rotary embedding, and which angle turns each pair (timm's
// apply_rot_embed): Interleaved (EVA-02's rot(), half=False), pairs (2i, 2i+1) turned by angle i; Half
// (rope_rotate_half, DINOv3's and Naver's layout, half=True), pairs (i, i + Dh/2) turned by angle i.
enum class RotaryLayout { Interleaved, Half };

// Rotary position embedding, in place on rows x [B, T, stride]: in the rows of tokens first..T-1, each of
// the first `groups` groups of Dh channels (the heads of q and k in a fused qkv row) has each channel pair
// (a, b) of the layout rotated by that token's angle i: x'[a] = x[a] cos - x[b] sin, x'[b] = x[b] cos +
// x[a] sin. sin, cos: [T - first, Dh / 2], one row per rotated token; or `tables` such tables one after the
// other, group g turned by table g % tables (RoPE-Mixed's angles per head: q's head h and k's share table h).
Step rotary_step(const std::string& name, int64_t B, int64_t T, int64_t first, int64_t groups, int64_t Dh,
                 int64_t stride, const float* sin, const float* cos, float* x,
                 RotaryLayout layout = RotaryLayout::Interleaved, int64_t tables = 1);

// The gated unit of a SwiGLU MLP: dst [M, H] = silu(src[:, :H]) * src[:, H:] for src [M, 2H] (the gate's
// H columns first, then the values'), silu(g) = g * sigmoid(g).
Step swiglu_step(const std::string& name, int64_t M, int64_t H, const float* src, float* dst);

// RMSNorm (timm's RmsNorm, layers/fast_norm.py rms_norm): dst[m] = src[m] * rsqrt(mean(src[m]^2) + eps) *
// gamma over rows of D, in place when dst == src. gamma is copied into the store.
LayerNormWeights make_rms_norm(Arena& store, const float* gamma, int64_t D, float eps);
Step rms_norm_step(const std::string& name, const LayerNormWeights& rn, int64_t M, const float* src, float* dst);

// Attention pooling with one query shared by every image (timm's AttentionPoolLatent with one latent, the
// MAP head of SigLIP): out [B, H*Dh] = per head h, softmax(q_h . k_h^T / sqrt(Dh)) v_h, from q [H*Dh] and
// kv [B, T, 2, H, Dh] (a linear layer's output [B*T, 2*H*Dh]); scores [B, H, T] is scratch.
// lengths: as attention_steps' (image b's first lengths[b] tokens, the rest padding left out of its
// softmax, as timm's masked attn_pool leaves them; its scores past them zero), or null.
Step attention_pool_step(const std::string& name, int64_t B, int64_t T, int64_t H, int64_t Dh, const float* q,
                         const float* kv, float* scores, float* out, const int32_t* lengths = nullptr);

// Rearranges images [B, C, S_h, S_w] into patch rows [B * Nh * Nw, C * P * P] in (c, ky, kx) order,
// the order of a PyTorch conv weight [D, C, P, P], so the patch embedding is one linear layer.
Step patchify_step(const std::string& name, int64_t B, int64_t C, int64_t Sh, int64_t Sw, int64_t P,
                   const float* src, float* dst);

// x [B, T, D] = prefix token rows, then the patch rows [B, N, D], plus the position table: timm's
// _pos_embed. prefix: vectors [D] (class, distillation token) put before each image's patches, so
// T = prefix.size() + N. pos is [T, D], or [N, D] added to the patch rows only (pos_covers_prefix false:
// timm's no_embed_class), or null for no position table (BEiT).
Step embed_tokens_step(const std::string& name, int64_t B, int64_t N, int64_t D,
                       const std::vector<const float*>& prefix, const float* pos, bool pos_covers_prefix,
                       const float* patches, float* x);

// dst [B, D] = src [B, T, D] at token t of each image (timm's x[:, t]).
Step select_token_step(const std::string& name, int64_t B, int64_t T, int64_t D, int64_t t, const float* src,
                       float* dst);
// dst [B, D] = the mean of src [B, T, D] over tokens first..T-1 (timm's x[:, num_prefix_tokens:].mean(1)).
// lengths: over tokens first..lengths[b]-1 of image b, the padding after them left out (timm's
// global_pool_naflex), each length in [first + 1, T] (an Error otherwise); or null.
Step mean_tokens_step(const std::string& name, int64_t B, int64_t T, int64_t D, int64_t first, const float* src,
                      float* dst, const int32_t* lengths = nullptr);
// x [n] = (x + y) / 2, element by element.
Step average_step(const std::string& name, int64_t n, const float* y, float* x);

// What a step's product multiplies in: the data type of a primitive step's source (u8: Int8, bf16: BF16,
// f32: F32); nullopt for host loops and for primitives that do no multiply-adds (reorders).
std::optional<Precision> product_precision(const Step& s);

}  // namespace vit

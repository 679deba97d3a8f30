// ViT loading, the parameter count (the loader's walk over shapes alone) and the forward pass; each step names
// the timm line it mirrors.
#include "network.h"

#include <omp.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "checkpoint.h"
#include "random_weights.h"
#include "positions.h"
#include "engine/io/files.h"
#include "engine/io/json_file.h"
#include "engine/nn/attention.h"
#include "models/int8_weights.h"
#include "vit/error.h"
#include "vit/model_files.h"
#include "engine/preprocess/preprocess.h"
#include "engine/preprocess/resample.h"

namespace vit {
namespace {

// The stored position table at the input's grid: timm's resample_abs_pos_embed (bicubic, antialiased,
// prefix tokens kept as they are) when the grid differs from the one it was trained at; for the layouts
// whose code interpolates without antialiasing (transformers' Dinov2, CLIP, SigLIP), torch's plain bicubic.
std::vector<float> position_table(const ViTConfig& c, std::vector<float> pos) {
  if (c.pos_grid_h == c.grid_h() && c.pos_grid_w == c.grid_w()) return pos;
  const int64_t D = c.width, prefix = c.no_embed_class ? 0 : c.prefix_tokens();
  const float* patches = pos.data() + prefix * D;
  std::vector<float> grid =
      c.pos_antialias ? resample_grid(patches, int(c.pos_grid_h), int(c.pos_grid_w), int(D), int(c.grid_h()),
                                      int(c.grid_w()), Filter::Bicubic)
                      : interpolate_bicubic(patches, int(c.pos_grid_h), int(c.pos_grid_w), int(D), int(c.grid_h()),
                                            int(c.grid_w()));
  pos.resize(size_t(prefix * D));
  pos.insert(pos.end(), grid.begin(), grid.end());
  spdlog::debug("position table resampled from {}x{} to {}x{}", c.pos_grid_h, c.pos_grid_w, c.grid_h(), c.grid_w());
  return pos;
}

// y [N] = W [N, K] x + b, accumulated in double: a product made once, at load.
std::vector<float> affine(const float* w, const float* b, const float* x, int64_t N, int64_t K) {
  std::vector<float> y(static_cast<size_t>(N));
  for (int64_t o = 0; o < N; ++o) {
    double acc = b[o];
    for (int64_t k = 0; k < K; ++k) acc += double(w[o * K + k]) * x[k];
    y[size_t(o)] = float(acc);
  }
  return y;
}

// A linear layer's weight [N, K] and bias [N] assembled from several tensors.
struct Dense {
  std::vector<float> w, b;
};
void append(std::vector<float>* v, TensorSource::Tensor t) {
  const std::vector<float> part = std::move(t).to_vector();
  v->insert(v->end(), part.begin(), part.end());
}

// BEiT's and EVA-02's q, k, v as one layer [3D, D] with bias [q, 0, v]: beit.py Attention.forward and
// eva.py EvaAttention.forward, F.linear(x, qkv.weight, torch.cat((q_bias, k_bias, v_bias))) with k_bias a
// zero buffer; EvaAttention's qkv_fused=False (q_proj, k_proj without a bias, v_proj) gives the same rows.
Dense fused_qkv(TensorSource& ck, const std::string& p, const ViTConfig& c) {
  const int64_t D = c.width;
  Dense d;
  if (c.attn.qkv_fused) append(&d.w, ck.take(p + "attn.qkv.weight", {3 * D, D}));
  else
    for (const char* n : {"q_proj", "k_proj", "v_proj"}) append(&d.w, ck.take(p + "attn." + n + ".weight", {D, D}));
  if (!c.attn.qkv_bias) return d;
  append(&d.b, ck.take(p + (c.attn.qkv_fused ? "attn.q_bias" : "attn.q_proj.bias"), {D}));
  d.b.resize(size_t(2 * D), 0.f);
  append(&d.b, ck.take(p + (c.attn.qkv_fused ? "attn.v_bias" : "attn.v_proj.bias"), {D}));
  return d;
}

// SwiGLU's gate and value layers as one [2M, D], the gate's rows first: timm's SwiGLU (fc1_g, fc1_x:
// act(fc1_g(x)) * fc1_x(x)), or GluMlp's packed fc1 (gate_last=False: x1, x2 = fc1(x).chunk(2);
// act(x1) * x2), which is already that.
Dense swiglu_fc1(TensorSource& ck, const std::string& p, const ViTConfig& c) {
  const int64_t D = c.width, M = c.mlp;
  Dense d;
  if (!ck.has(p + "mlp.fc1_g.weight")) {
    append(&d.w, ck.take(p + "mlp.fc1.weight", {2 * M, D}));
    if (c.proj_bias || ck.has(p + "mlp.fc1.bias")) append(&d.b, ck.take(p + "mlp.fc1.bias", {2 * M}));
    return d;
  }
  for (const char* n : {"mlp.fc1_g", "mlp.fc1_x"}) {
    append(&d.w, ck.take(p + n + ".weight", {M, D}));
    if (c.proj_bias) append(&d.b, ck.take(p + n + ".bias", {M}));  // AIMv2's have none
  }
  return d;
}

// The tensors a config asks for, as shapes alone: each one taken is counted and handed back empty. Like
// RandomSource it has no optional tensors, so the loader's walk takes exactly what the config says.
class ShapeSource : public TensorSource {
 public:
  bool has(const std::string&) const override { return false; }
  Tensor take(const std::string&, const std::vector<int64_t>& shape) override {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    taken_ += n;
    return Tensor();
  }
  Layout layout() const override { return Layout::Timm; }
  int64_t taken() const { return taken_; }  // the values of every tensor taken

 private:
  int64_t taken_ = 0;
};

// A block's linear layers, the ones at the model's precision (PrecisionClass::Model), in forward order.
constexpr std::pair<const char*, LinearWeights BlockWeights::*> kBlockLinears[] = {
    {"attn.qkv", &BlockWeights::qkv}, {"attn.proj", &BlockWeights::proj}, {"mlp.fc1", &BlockWeights::fc1},
    {"mlp.fc2", &BlockWeights::fc2}};

}  // namespace

Epilogue activation_epilogue(Activation a) {
  switch (a) {
    case Activation::Gelu: return Epilogue::Gelu;
    case Activation::GeluTanh: return Epilogue::GeluTanh;
    case Activation::QuickGelu: return Epilogue::QuickGelu;
    case Activation::SwiGLU: break;
  }
  return Epilogue::None;
}

int usable_threads(int requested) {
  const int cores = omp_get_num_procs();
  if (requested <= cores) return requested;
  spdlog::warn("{} threads asked for, but this machine has {} cores: using {}", requested, cores, cores);
  return cores;
}

void check_batch_size(int64_t B) {
  if (B < 1 || B > kMaxBatch)
    throw ArgumentError("batch size " + std::to_string(B) + " is out of range (1 to " + std::to_string(kMaxBatch) + ")");
}

ViT ViT::load(const std::string& model, const std::string& config_path, int64_t img_size, Precision precision,
              const std::string& arch) {
  const ModelFiles files = find_model_files(model, config_path);
  const std::string& file = files.weights;
  nlohmann::json cfg_json, pre_json;
  ConfigSources src;
  if (!files.config.empty()) {
    cfg_json = read_json_file(files.config);
    src.config = &cfg_json;
    src.config_name = files.config;
  }
  if (!files.preprocessor.empty()) {
    src.preprocessor_name = files.preprocessor;
    pre_json = read_json_file(src.preprocessor_name);
    src.preprocessor = &pre_json;
  }
  src.arch = arch;
  src.img_size = img_size;

  refuse_unrun_architecture(src);
  Checkpoint ck(file);
  ViT m;
  m.source_ = file;
  m.precision_ = precision;
  m.cfg_ = resolve_config(ck, src);
  spdlog::debug("{}: {} layout, {}", file, layout_name(ck.layout()), m.cfg_.summary());
  // A folder `vit quantize` made: its rounded weights replace quantization at load for int8.
  std::unique_ptr<RoundedWeights> rounded;
  if (!files.int8.empty()) {
    rounded = RoundedWeights::open(files.int8, file);
    m.int8_source_ = files.int8;
  }
  m.load_weights(ck, precision == Precision::Int8 ? rounded.get() : nullptr);
  m.choose_attention_road();
  ck.check_all_used();
  if (rounded && precision == Precision::Int8) rounded->check_all_used();
  return m;
}

// Fills a ViT's weights from a TensorSource, one tensor at a time, in the order and with the shapes timm's
// modules have: a checkpoint's tensors, or random ones. Each layer is made (converted, quantized, placed in
// the model's store) as soon as its tensors are taken, so at most one layer's f32 values are held.
// Without `build` it is the walk alone: every tensor is taken (a ShapeSource counts them) and nothing is made.
struct ViT::WeightLoader {
  ViT& m;
  TensorSource& src;
  RoundedWeights* rounded;  // a `vit quantize` folder's int8 weights, or null
  bool build;               // false: take the tensors, make no layer (ViT::parameters)
  const ViTConfig& c = m.cfg_;
  const int64_t D = c.width, M = c.mlp;

  Precision precision(PrecisionClass pc) const { return pc == PrecisionClass::Model ? m.precision_ : Precision::F32; }
  TensorSource::Tensor take(const std::string& n, const std::vector<int64_t>& s) { return src.take(n, s); }
  template <typename T>
  Stored<T> store(const std::vector<T>& v) { return build ? Stored<T>(m.store_, v) : Stored<T>(); }
  TensorSource::Tensor opt(const std::string& n, const std::vector<int64_t>& s) {
    return src.has(n) ? src.take(n, s) : TensorSource::Tensor();
  }
  // Every layer built here: an int8 one from its rounded weights when the folder has them.
  LinearWeights make(const std::string& n, const float* w, const float* b, int64_t K, int64_t N, Epilogue ep,
                     PrecisionClass pc) {
    if (!build) return {};
    const Precision p = precision(pc);
    if (rounded && p == Precision::Int8) return rounded->linear(m.store_, n, b, K, N, c.tokens(), ep);
    return make_linear(m.store_, w, b, K, N, c.tokens(), ep, p);
  }
  // bias: required, else taken when present; shape: the stored weight's, when not [N, K] (a conv
  // kernel [D, C, P, P] is the same memory as [D, C*P*P]).
  LinearWeights linear(const std::string& n, int64_t K, int64_t N, bool bias, Epilogue ep, PrecisionClass pc,
                       std::vector<int64_t> shape = {}) {
    const auto w = take(n + ".weight", shape.empty() ? std::vector<int64_t>{N, K} : shape);
    const auto b = bias ? take(n + ".bias", {N}) : opt(n + ".bias", {N});
    return make(n, w.data(), b.empty() ? nullptr : b.data(), K, N, ep, pc);
  }
  LinearWeights dense(const std::string& n, const Dense& d, int64_t K, int64_t N) {
    return make(n, d.w.data(), d.b.empty() ? nullptr : d.b.data(), K, N, Epilogue::None, PrecisionClass::Model);
  }
  // The model's norm (LayerNorm or RMSNorm) over D; a LayerNorm over W.
  LayerNormWeights norm(const std::string& n) {
    if (c.norm != NormKind::Rms) return layer_norm(n, D);
    const auto w = take(n + ".weight", {D});
    return build ? make_rms_norm(m.store_, w.data(), D, c.eps) : LayerNormWeights();
  }
  LayerNormWeights layer_norm(const std::string& n, int64_t W) {
    const auto w = take(n + ".weight", {W}), b = take(n + ".bias", {W});
    return build ? make_layer_norm(m.store_, w.data(), b.data(), W, c.eps) : LayerNormWeights();
  }
  // A block branch's last linear layer with the layer scale after it, timm's ls1(attn.proj(x)) and
  // ls2(mlp.fc2(x)) (LayerScale: x * gamma), folded into the layer: gamma * (W x + b) is
  // (gamma W) x + gamma b, one row of W per channel, so the residual add stays fused and int8's
  // per-channel quantization sees the scaled rows.
  LinearWeights scaled_linear(const std::string& n, int64_t K, const std::string& gamma) {
    if (!c.layer_scale) return linear(n, K, D, c.proj_bias, Epilogue::AddToDst, PrecisionClass::Model);
    std::vector<float> w = take(n + ".weight", {D, K}).to_vector();
    std::vector<float> b = c.proj_bias ? take(n + ".bias", {D}).to_vector() : std::vector<float>(size_t(D), 0.f);
    const auto g = take(gamma, {D});
    if (!build) return {};
    for (int64_t o = 0; o < D; ++o) {
      for (int64_t k = 0; k < K; ++k) w[size_t(o * K + k)] *= g.data()[o];
      b[size_t(o)] *= g.data()[o];
    }
    return make(n, w.data(), b.data(), K, D, Epilogue::AddToDst, PrecisionClass::Model);
  }

  // PatchEmbed (or NaFlexEmbeds), the prefix tokens, the position table, norm_pre.
  void embedding() {
    const int64_t P = c.patch, Cin = c.in_chans;
    if (c.naflex.on) {
      // NaFlexEmbeds: proj, a Linear over channels-last patches [D, P * P * C]; pos_embed [1, h, w, D].
      m.patch_embed_ = linear("embeds.proj", Cin * P * P, D, c.patch_bias, Epilogue::None, PrecisionClass::F32);
      auto pos = take("embeds.pos_embed", {1, c.pos_grid_h, c.pos_grid_w, D});
      if (build)
        m.pos_tables_ = std::make_shared<PositionTables>(std::move(pos).to_vector(), int(c.pos_grid_h),
                                                         int(c.pos_grid_w), D, c.naflex.pos_filter);
    } else {
      m.patch_embed_ = linear("patch_embed.proj", Cin * P * P, D, c.patch_bias, Epilogue::None, PrecisionClass::F32,
                              {D, Cin, P, P});
    }
    if (c.patch_norm) m.patch_norm_ = norm("patch_embed.norm");
    if (c.class_token) m.cls_token_ = store(take("cls_token", {1, 1, D}).to_vector());
    if (c.dist_token) m.dist_token_ = store(take("dist_token", {1, 1, D}).to_vector());
    if (c.reg_tokens) m.reg_token_ = store(take("reg_token", {1, c.reg_tokens, D}).to_vector());
    if (c.pos_embed && !c.naflex.on) {
      auto pos = take("pos_embed", {1, c.pos_len(), D});
      if (build) m.pos_embed_ = store(position_table(c, std::move(pos).to_vector()));
    }
    if (c.norm_pre) m.norm_pre_ = norm("norm_pre");
  }

  // Block i: norm1, attn (qkv, attn.norm, proj, ls1), norm2, mlp (fc1, mlp.norm, fc2, ls2).
  BlockWeights block(int64_t i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    BlockWeights b;
    b.norm1 = norm(p + "norm1");
    const bool beit_ls = src.has(p + "gamma_1");  // BEiT's gamma_1 * attn(...), gamma_2 * mlp(...)
    if (c.attn.qkv_fused && c.attn.k_bias)
      b.qkv = linear(p + "attn.qkv", D, 3 * D, c.attn.qkv_bias, Epilogue::None, PrecisionClass::Model);
    else
      b.qkv = dense(p + "attn.qkv", fused_qkv(src, p, c), D, 3 * D);
    if (c.attn.norm) b.attn_norm = norm(p + "attn.norm");
    b.proj = scaled_linear(p + "attn.proj", D, p + (beit_ls ? "gamma_1" : "ls1.gamma"));
    b.norm2 = norm(p + "norm2");
    b.fc1 = c.swiglu() ? dense(p + "mlp.fc1", swiglu_fc1(src, p, c), D, 2 * M)
                       : linear(p + "mlp.fc1", D, M, true, activation_epilogue(c.act), PrecisionClass::Model);
    if (c.mlp_norm) b.mlp_norm = layer_norm(p + "mlp.norm", M);
    b.fc2 = scaled_linear(p + "mlp.fc2", M, p + (beit_ls ? "gamma_2" : "ls2.gamma"));
    if (!c.attn.rel_pos_window) return b;
    auto table = take(p + "attn.relative_position_bias_table", {c.rel_pos_len(), c.heads});
    if (build)
      b.rel_pos_table = store(resize_relative_position_table(std::move(table).to_vector(), c.heads, c.attn.rel_pos_window,
                                                             c.grid_h(), c.grid_w()));
    return b;
  }

  // The rotary angles of every patch: RoPE-Mixed's from its learned frequencies (x's then y's), else from the grid.
  void rotary() {
    if (!c.rope.on) return;
    std::vector<float> sin, cos;
    const bool mixed = c.rope.kind == RopeKind::Mixed;
    const auto freqs = mixed ? take("rope.freqs", {2, c.depth, c.heads, c.head_dim() / 2}) : TensorSource::Tensor();
    if (!build) return;
    rotary_tables(c, &sin, &cos, mixed ? freqs.data() : nullptr);
    m.rope_sin_ = store(sin);
    m.rope_cos_ = store(cos);
  }

  // The position tables the blocks share, the final norms, the attention pool, the heads.
  void head() {
    if (c.attn.rel_pos_window && build) m.rel_pos_index_ = store(relative_position_index(c.grid_h(), c.grid_w()));
    rotary();
    if (c.pool.final_norm) m.norm_ = norm("norm");
    if (c.pool.fc_norm) m.fc_norm_ = norm("fc_norm");
    if (c.pool.attn()) {
      // AttentionPoolLatent: q = self.q(self.latent), the same for every image, so computed here.
      const auto latent = take("attn_pool.latent", {1, 1, D}), qw = take("attn_pool.q.weight", {D, D});
      const auto qb = take("attn_pool.q.bias", {D});
      AttentionPool& ap = m.attn_pool_;
      if (build) ap.q = store(affine(qw.data(), qb.data(), latent.data(), D, D));
      ap.kv = linear("attn_pool.kv", D, 2 * D, true, Epilogue::None, PrecisionClass::F32);
      ap.proj = linear("attn_pool.proj", D, D, true, Epilogue::None, PrecisionClass::F32);
      ap.norm = norm("attn_pool.norm");
      ap.fc1 = linear("attn_pool.mlp.fc1", D, c.pool.attn_mlp, true, activation_epilogue(c.act), PrecisionClass::F32);
      ap.fc2 = linear("attn_pool.mlp.fc2", c.pool.attn_mlp, D, true, Epilogue::AddToDst, PrecisionClass::F32);
    }
    const int64_t C = c.classes;
    if (C > 0) m.head_ = linear("head", D, C, layout_head_has_bias(src.layout()), Epilogue::None, PrecisionClass::F32);
    if (c.dist_token) m.head_dist_ = linear("head_dist", D, C, true, Epilogue::None, PrecisionClass::F32);
  }

  // The whole model, in timm's order.
  void walk() {
    embedding();
    m.blocks_.clear();
    for (int64_t i = 0; i < c.depth; ++i) m.blocks_.push_back(block(i));
    head();
  }
};

void ViT::load_weights(TensorSource& src, RoundedWeights* rounded) { WeightLoader{*this, src, rounded, true}.walk(); }

int64_t ViT::parameters(const ViTConfig& cfg) {
  ViT shell;  // the walk's config; it gets no weights
  shell.cfg_ = cfg;
  ShapeSource shapes;
  WeightLoader{shell, shapes, nullptr, false}.walk();
  return shapes.taken();
}

ViT ViT::random(const ViTConfig& cfg, uint32_t seed, Precision precision) {
  // Loaded as a checkpoint is, from a source that makes each tensor as the loader asks for it.
  ViT m;
  m.cfg_ = cfg;
  m.precision_ = precision;
  m.source_ = "random:" + (cfg.arch.empty() ? std::string("vit") : cfg.arch);
  RandomSource src(m.cfg_, seed);
  m.load_weights(src, nullptr);
  m.choose_attention_road();
  return m;
}

std::string ViT::attention_summary() const {
  const AttentionKernels& k = attention_kernels(attention_products(precision_));
  std::string s = std::string("fused kernel (") + k.isa + "), " +
                  (&k == attention_kernels_bf16()   ? "bf16 products summed in f32, softmax f32"
                   : &k == attention_kernels_int8() ? "u8 x s8 products summed in s32 (q, k per row, v per channel, softmax per row), softmax f32"
                                                    : "f32");
  if (attention_road_ == AttentionRoad::Fused) return s;
  return std::string("oneDNN matmuls (") + precision_name(attention_matmul_products(attention_products(precision_))) +
         " products, f32 softmax), chosen at load over the " + s;
}

void ViT::choose_attention_road() {
  attention_road_ = cfg_.attn.rel_pos_window || cfg_.naflex.on
                        ? AttentionRoad::Fused
                        : vit::attention_road(attention_chunk(8), cfg_.tokens(), cfg_.heads, cfg_.head_dim(),
                                         attention_products(precision_));
}

int64_t ViT::attention_chunk(int64_t B) const {
  // Images per attention pass: their packed keys and values (attention_scratch_floats) about 1 MiB per
  // thread, so they are still in cache when the pass reads them. An image's result does not depend on
  // the pass it runs in.
  const int64_t per_image = attention_scratch_floats(1, cfg_.tokens(), cfg_.heads, cfg_.head_dim()) * int64_t(sizeof(float));
  return std::min(B, std::max(int64_t(1), max_threads() * (int64_t(1) << 20) / per_image));
}

ViT::BatchLayout ViT::batch_layout(int64_t B, const PlanOptions& o) const {
  check_batch_size(B);
  BatchLayout l;
  l.B = B;
  l.keep_attention = o.keep_attention;
  const int64_t chunk = attention_chunk(B);
  for (int64_t b = 0; b < B; b += chunk) {
    const int64_t n = B - b < 2 * chunk ? B - b : chunk;  // the last pass takes the remainder
    l.attention_passes.push_back({b, n});
    if (n > chunk) break;
  }
  return l;
}

int64_t ViT::BatchLayout::largest_pass() const {
  int64_t n = 0;
  for (const auto& [first, images] : attention_passes) n = std::max(n, images);
  return n;
}

// Every buffer of a forward pass laid out as l says: make_plan sizes its arena from it and carves the
// buffers out of it.
BufferTable ViT::activation_table(const BatchLayout& l, Plan* plan) const {
  const ViTConfig& c = cfg_;
  Plan::Activations* a = &plan->act_;
  const int64_t B = l.B, D = c.width, T = c.tokens(), N = c.patches(), BT = B * T;
  BufferTable t;
  t.add("input", &a->input, B * c.input_floats());
  t.add("patches", &a->patches, B * N * c.in_chans * c.patch * c.patch);
  t.add("patch_embed", &a->patch_embed, B * N * D);
  t.add("x", &a->x, BT * D);
  t.add("h", &a->h, BT * D);
  t.add("attn", &a->attn, BT * D);
  t.add("qkv", &a->qkv, BT * 3 * D);
  const int64_t pass = l.largest_pass();
  t.add("heads", &a->heads,
        attention_road_ == AttentionRoad::Matmuls
            ? attention_matmul_floats(pass, T, c.heads, c.head_dim(), attention_products(precision_))
            : attention_scratch_floats(pass, T, c.heads, c.head_dim()));
  t.add("scores", &a->scores, l.keep_attention ? c.depth * B * c.heads * T * T : 0);
  t.add("mlp", &a->mlp, BT * c.mlp);
  t.add("mlp_gate", &a->mlp_gate, c.swiglu() ? BT * 2 * c.mlp : 0);
  t.add("rel_bias", &a->rel_bias, c.attn.rel_pos_window ? c.heads * T * T : 0);
  t.add("pooled", &a->pooled, B * D);
  t.add("pooled_norm", &a->pooled_norm, B * D);
  t.add("pooled_dist", &a->pooled_dist, B * D);
  t.add("pool_scores", &a->pool_scores, c.pool.attn() ? B * c.pool_heads() * T : 0);
  t.add("logits", &a->logits, B * c.classes);
  t.add("logits_dist", &a->logits_dist, B * c.classes);
  // The layers' scratch: inputs at most max(D, M) wide, results added into the residual stream D wide.
  plan->precision_.add_scratch(t, T, std::max(D, c.mlp), D);
  return t;
}

std::vector<std::pair<std::string, const LinearWeights*>> ViT::linear_layers() const {
  const AttentionPool& ap = attn_pool_;
  std::vector<std::pair<std::string, const LinearWeights*>> out = {{"patch_embed.proj", &patch_embed_}};
  if (!blocks_.empty())
    for (const auto& [n, layer] : kBlockLinears) out.push_back({std::string("blocks.*.") + n, &(blocks_[0].*layer)});
  if (cfg_.pool.attn())
    out.insert(out.end(), {{"attn_pool.kv", &ap.kv}, {"attn_pool.proj", &ap.proj}, {"attn_pool.mlp.fc1", &ap.fc1},
                           {"attn_pool.mlp.fc2", &ap.fc2}});
  if (cfg_.classes > 0) out.push_back({"head", &head_});
  if (cfg_.dist_token) out.push_back({"head_dist", &head_dist_});
  return out;
}

std::vector<std::pair<std::string, const LinearWeights*>> ViT::block_linear_layers() const {
  std::vector<std::pair<std::string, const LinearWeights*>> out;
  for (size_t i = 0; i < blocks_.size(); ++i)
    for (const auto& [n, layer] : kBlockLinears) out.push_back({"blocks." + std::to_string(i) + "." + n, &(blocks_[i].*layer)});
  return out;
}

double ViT::flops(int64_t images) const {
  const ViTConfig& c = cfg_;
  const double B = double(images), T = double(c.tokens()), D = double(c.width);
  double f = 0;
  for (const auto& [name, lw] : linear_layers()) {  // rows per image: the patches, the tokens, or one
    const bool block = name.rfind("blocks.", 0) == 0;  // one entry for every block's layer
    const double rows = name == "patch_embed.proj" ? double(c.patches()) : block || name == "attn_pool.kv" ? T : 1.0;
    f += 2.0 * B * rows * double(lw->K) * double(lw->N) * (block ? double(c.depth) : 1.0);
  }
  f += double(c.depth) * 4.0 * B * double(c.heads) * T * T * double(c.head_dim());  // q k^T and p v
  if (c.pool.attn()) f += 4.0 * B * T * D;  // the attention pool's one query over the tokens, every head
  return f;
}

size_t ViT::weight_bytes() const {
  // Every weight lives in the store, but a NaFlex model's position table, which its PositionTables owns.
  const size_t naflex_table = pos_tables_ ? size_t(cfg_.pos_grid_h * cfg_.pos_grid_w * cfg_.width) * sizeof(float) : 0;
  return store_.bytes_used() + naflex_table;
}

// Appends a Plan's steps in forward order, as its layout says, each named for the timm line it mirrors.
// How each linear layer and attention run at the model's precision is the Plan's PrecisionRoad's to say.
struct ViT::PlanBuilder {
  const ViT& m;
  const BatchLayout& layout;
  Plan& plan;

  const Plan::Activations& a() const { return plan.act_; }
  void add(Step s) { plan.program_.add(std::move(s)); }
  void add(std::vector<Step> steps) {
    for (Step& s : steps) add(std::move(s));
  }
  void tap(const std::string& name, const float* data, int64_t count) {
    plan.taps_.push_back({plan.program_.steps().size() - 1, name, data, count});
  }
  // dst = layer(src) over images of `rows` rows, its input tapped as {name}.input. next: the layer that
  // reads dst next (see PrecisionRoad::linear).
  void linear(const std::string& name, const LinearWeights& lw, int64_t rows, const float* src, float* dst,
              const LinearWeights* next = nullptr) {
    tap(name + ".input", src, layout.B * rows * lw.K);
    add(plan.precision_.linear(name, lw, rows, src, dst, next));
  }
  // h = norm(x), then dst = layer(h), over the tokens; h tapped as the norm's output and the layer's input.
  void norm_linear(const std::string& norm_name, const LayerNormWeights& ln, const std::string& name,
                   const LinearWeights& lw, float* dst, const LinearWeights* next = nullptr) {
    const int64_t T = m.cfg_.tokens(), BT = layout.B * T;
    add(plan.precision_.norm_linear(norm_name, ln, a().x, a().h, name, lw, T, dst, next));
    tap(norm_name, a().h, BT * ln.D);
    tap(name + ".input", a().h, BT * lw.K);
  }

  // NaFlexEmbeds.forward(patches, patch_coord, patch_valid): x = self.proj(patches);
  // self._apply_learned_naflex_pos_embed(x, patch_coord): each image's table resized to its grid
  // (F.interpolate(mode, antialias=True), PositionTables), added to its patches (none to padding).
  // Each image's input is its max_patches patches; its grid, the Plan's (set_grid).
  void naflex_embedding() {
    const ViTConfig& c = m.cfg_;
    const int64_t B = layout.B, D = c.width, N = c.patches(), K = c.in_chans * c.patch * c.patch;
    const float* in = a().input;
    float* patches = a().patches;
    const PatchGrid* grids = plan.grids_.data();
    add(host_step("embeds.patches", [=] {
      for (int64_t b = 0; b < B; ++b)
        if (grids[b].count() == 0)
          throw Error("internal: image " + std::to_string(b) + " of the batch was given no grid (Plan::set_grid)");
      parallel_for(B, [&](int64_t b) { std::memcpy(patches + b * N * K, in + b * N * K, size_t(N * K) * sizeof(float)); });
    }));
    linear("embeds.proj", m.patch_embed_, N, a().patches, a().patch_embed);
    tap("patch_embed", a().patch_embed, B * N * D);
    PositionTables* tables = m.pos_tables_.get();
    float* x = a().patch_embed;
    add(host_step("embeds.pos_embed", [=] {
      for (int64_t b = 0; b < B; ++b) {
        const auto table = tables->get(grids[b]);
        float* rows = x + b * N * D;
        const int64_t n = int64_t(table->size());
        parallel_for(n / D, [&](int64_t t) {
          for (int64_t d = 0; d < D; ++d) rows[t * D + d] += (*table)[size_t(t * D + d)];
        });
      }
    }));
    add(embed_tokens_step("embed", B, N, D, {}, nullptr, false, a().patch_embed, a().x));
    tap("embed", a().x, B * c.tokens() * D);
  }

  // x = self.patch_embed(x); x = self._pos_embed(x)
  void embedding() {
    const ViTConfig& c = m.cfg_;
    if (c.naflex.on) return naflex_embedding();
    const int64_t B = layout.B, D = c.width, N = c.patches();
    // The P x P / stride P conv as patch rows times the flattened kernel.
    add(patchify_step("patch_embed.patchify", B, c.in_chans, c.img_h(), c.img_w(), c.patch, a().input, a().patches));
    linear("patch_embed.proj", m.patch_embed_, N, a().patches, a().patch_embed);
    // x = self.norm(x) in PatchEmbed.forward (AIMv2's embed_norm_layer), in place.
    if (c.patch_norm) add(layer_norm_step("patch_embed.norm", m.patch_norm_, B * N, a().patch_embed, a().patch_embed));
    tap("patch_embed", a().patch_embed, B * N * D);
    // Prepend class/distillation tokens, add the position table (to the patches only, before
    // prepending, when no_embed_class).
    std::vector<const float*> prefix_rows;
    if (c.class_token) prefix_rows.push_back(m.cls_token_.data());
    if (c.dist_token) prefix_rows.push_back(m.dist_token_.data());
    for (int64_t r = 0; r < c.reg_tokens; ++r) prefix_rows.push_back(m.reg_token_.data() + r * D);  // [cls, reg...]
    add(embed_tokens_step("embed", B, N, D, prefix_rows, c.pos_embed ? m.pos_embed_.data() : nullptr, !c.no_embed_class,
                          a().patch_embed, a().x));
    tap("embed", a().x, B * c.tokens() * D);
    // x = self.norm_pre(x) (CLIP), in place: the blocks read the residual stream x.
    if (c.norm_pre) add(layer_norm_step("norm_pre", m.norm_pre_, B * c.tokens(), a().x, a().x));
  }

  // Block.forward (vision_transformer.py; beit.py's and eva.py's blocks alike):
  //   x = x + self.drop_path1(self.ls1(self.attn(self.norm1(x))))
  //   x = x + self.drop_path2(self.ls2(self.mlp(self.norm2(x))))
  // ls1 and ls2 (LayerScale) are folded into attn.proj's and mlp.fc2's rows at load; both layers add
  // their result into x, the residual stream.
  void block(int64_t i) {
    const BlockWeights& w = m.blocks_[size_t(i)];
    const std::string p = "blocks." + std::to_string(i);
    attention(i, p, w);  // x = x + ls1(attn(norm1(x)))
    if (m.cfg_.swiglu())
      swiglu_mlp(p, w);  // x = x + ls2(mlp(norm2(x)))
    else
      mlp(p, w);         // x = x + ls2(mlp(norm2(x)))
    tap(p, a().x, layout.B * m.cfg_.tokens() * m.cfg_.width);
  }

  // Attention.forward on norm1(x), its result added into x.
  void attention(int64_t i, const std::string& p, const BlockWeights& w) {
    const ViTConfig& c = m.cfg_;
    const int64_t B = layout.B, D = c.width, T = c.tokens(), H = c.heads;
    // qkv = self.qkv(self.norm1(x))
    norm_linear(p + ".norm1", w.norm1, p + ".attn.qkv", w.qkv, a().qkv);
    // EvaAttention.forward: q, k = apply_rot_embed_cat(q[:, :, npt:], rope, half=half), the same for k: the
    // patch tokens' q and k heads (the first 2H of the row's 3H) turned by their positions' angles, in
    // interleaved pairs (EVA-02) or rotate-half pairs (DINOv3, rope_rotate_half).
    // RoPE-Mixed (Eva.forward_features: blk(x, rope=rot_pos_embed[i])): block i's table per head.
    const bool mixed = c.rope.kind == RopeKind::Mixed;
    const int64_t table = mixed ? i * H * c.patches() * (c.head_dim() / 2) : 0;
    if (c.rope.on)
      add(rotary_step(p + ".attn.rope", B, T, c.prefix_tokens(), 2 * H, c.head_dim(), 3 * D, m.rope_sin_.data() + table,
                      m.rope_cos_.data() + table, a().qkv,
                      c.rope.kind == RopeKind::DinoV3 ? RotaryLayout::Half : RotaryLayout::Interleaved, mixed ? H : 1));
    // beit.py Attention.forward: attn = attn + self._get_rel_pos_bias() (the table looked up through the
    // index, [H, T, T]), before the softmax.
    if (c.attn.rel_pos_window)
      add(lookup_bias_step(p + ".attn.rel_pos_bias", H, T, w.rel_pos_table.data(), m.rel_pos_index_.data(), a().rel_bias));
    // x = F.scaled_dot_product_attention(q, k, v): softmax(q k^T / sqrt(Dh)) v per head, a few images
    // per pass (BatchLayout::attention_passes), the heads concatenated: x.transpose(1, 2).reshape(B, N, C)
    float* scores = layout.keep_attention ? a().scores + i * B * H * T * T : nullptr;
    for (const auto& [first, n] : layout.attention_passes)
      add(plan.precision_.attention(p + ".attn", n, T, H, c.head_dim(), a().qkv + first * T * 3 * D, a().heads,
                                    scores ? scores + first * H * T * T : nullptr, a().attn + first * T * D,
                                    c.attn.rel_pos_window ? a().rel_bias : nullptr,
                                    c.naflex.on ? plan.lengths_.data() + first : nullptr, m.attention_road_));
    // x = self.norm(x) (EvaAttention's scale_norm: EVA-02 CLIP's scale_attn_inner), in place
    if (c.attn.norm) add(layer_norm_step(p + ".attn.norm", w.attn_norm, B * T, a().attn, a().attn));
    // x = self.proj(x), added into x
    linear(p + ".attn.proj", w.proj, T, a().attn, a().x);
  }

  // Mlp.forward on norm2(x), its result added into x.
  void mlp(const std::string& p, const BlockWeights& w) {
    const ViTConfig& c = m.cfg_;
    const int64_t T = c.tokens();
    // x = self.fc1(self.norm2(x)); x = self.act(x) (the activation fused into fc1), read by fc2 next
    norm_linear(p + ".norm2", w.norm2, p + ".mlp.fc1", w.fc1, a().mlp, &w.fc2);
    tap(p + ".mlp.fc1_gelu", a().mlp, layout.B * T * c.mlp);
    // x = self.fc2(x), added into x
    linear(p + ".mlp.fc2", w.fc2, T, a().mlp, a().x);
  }

  // SwiGLU.forward (EVA-02) on norm2(x), its result added into x. fc1 holds fc1_g's and fc1_x's rows, the
  // gate's first.
  void swiglu_mlp(const std::string& p, const BlockWeights& w) {
    const ViTConfig& c = m.cfg_;
    const int64_t T = c.tokens(), BT = layout.B * T;
    // x_gate = self.fc1_g(norm2(x)); x = self.fc1_x(norm2(x))
    norm_linear(p + ".norm2", w.norm2, p + ".mlp.fc1", w.fc1, a().mlp_gate);
    // x = self.act(x_gate) * x
    add(swiglu_step(p + ".mlp.swiglu", BT, c.mlp, a().mlp_gate, a().mlp));
    tap(p + ".mlp.swiglu", a().mlp, BT * c.mlp);
    // x = self.norm(x) (mlp_norm)
    if (c.mlp_norm) add(layer_norm_step(p + ".mlp.norm", w.mlp_norm, BT, a().mlp, a().mlp));
    // x = self.fc2(x), added into x
    linear(p + ".mlp.fc2", w.fc2, T, a().mlp, a().x);
  }

  // x = self.norm(x); x = self.forward_head(x): pool (token 0, the mean of the patch tokens, or the
  // attention pool), fc_norm, head.
  void head() {
    const ViTConfig& c = m.cfg_;
    const int64_t B = layout.B, D = c.width, T = c.tokens(), BT = B * T;
    const float* feats = a().x;
    if (c.pool.final_norm) {
      add(layer_norm_step("norm", m.norm_, BT, a().x, a().h));
      tap("norm", a().h, BT * D);
      feats = a().h;
    }
    if (c.pool.kind == Pool::Token) {
      add(select_token_step("pool", B, T, D, 0, feats, a().pooled));
    } else if (c.pool.kind == Pool::Avg) {
      add(mean_tokens_step("pool", B, T, D, c.prefix_tokens(), feats, a().pooled,
                           c.naflex.on ? plan.lengths_.data() : nullptr));
    } else {
      attention_pool(feats);
    }
    const float* head_in = a().pooled;
    if (c.pool.fc_norm) {
      add(layer_norm_step("fc_norm", m.fc_norm_, B, a().pooled, a().pooled_norm));
      head_in = a().pooled_norm;
    }
    plan.tokens_ = feats;
    plan.features_ = head_in;
    if (c.classes > 0) linear("head", m.head_, 1, head_in, a().logits);
    if (c.dist_token) {
      // DeiT distilled, eval: (head(x[:, 0]) + head_dist(x[:, 1])) / 2
      add(select_token_step("pool_dist", B, T, D, 1, feats, a().pooled_dist));
      linear("head_dist", m.head_dist_, 1, a().pooled_dist, a().logits_dist);
      add(average_step("head.average", B * c.classes, a().logits_dist, a().logits));
      // forward_head(pre_logits=True) of the distilled model: (x[:, 0] + x[:, 1]) / 2, once both heads have read them.
      add(average_step("pre_logits.average", B * D, a().pooled_dist, a().pooled));
    }
    tap("logits", a().logits, B * c.classes);
  }

  // x = self.attn_pool(x) (AttentionPoolLatent.forward): k, v = kv(x); x = softmax(q k^T / sqrt(Dh)) v;
  // x = proj(x); x = x + mlp(norm(x)); x[:, 0]. The kv rows reuse the blocks' qkv buffer.
  void attention_pool(const float* feats) {
    const ViTConfig& c = m.cfg_;
    const int64_t B = layout.B, T = c.tokens();
    linear("attn_pool.kv", m.attn_pool_.kv, T, feats, a().qkv);
    // AttentionPoolLatent's own heads (num_heads: Perception Encoder's attn_pool_num_heads, else the blocks').
    add(attention_pool_step("attn_pool.attn", B, T, c.pool_heads(), c.width / c.pool_heads(), m.attn_pool_.q.data(), a().qkv,
                            a().pool_scores, a().pooled_dist, c.naflex.on ? plan.lengths_.data() : nullptr));
    linear("attn_pool.proj", m.attn_pool_.proj, 1, a().pooled_dist, a().pooled);
    add(layer_norm_step("attn_pool.norm", m.attn_pool_.norm, B, a().pooled, a().pooled_norm));
    linear("attn_pool.mlp.fc1", m.attn_pool_.fc1, 1, a().pooled_norm, a().mlp);
    linear("attn_pool.mlp.fc2", m.attn_pool_.fc2, 1, a().mlp, a().pooled);
  }
};

std::unique_ptr<ViT::Plan> ViT::make_plan(int64_t B, const PlanOptions& options) const {
  const BatchLayout layout = batch_layout(B, options);
  auto plan = std::make_unique<Plan>();
  plan->B_ = B;
  plan->input_floats_ = cfg_.input_floats();
  plan->prefix_ = cfg_.prefix_tokens();
  plan->fixed_grid_ = PatchGrid{int(cfg_.grid_h()), int(cfg_.grid_w())};
  plan->keeps_attention_ = options.keep_attention;
  plan->depth_ = cfg_.depth;
  plan->scores_per_image_ = cfg_.heads * cfg_.tokens() * cfg_.tokens();
  plan->precision_ = PrecisionRoad(precision_, B);
  if (cfg_.naflex.on) {
    plan->budget_ = cfg_.naflex.max_patches;
    plan->grids_.assign(size_t(B), PatchGrid{});
    plan->lengths_.assign(size_t(B), int32_t(cfg_.tokens()));
  }
  const BufferTable table = activation_table(layout, plan.get());
  plan->arena_ = table.carve();
  spdlog::debug("plan for batch {}: {:.1f} MiB of activations, the largest {}", B, table.bytes() / 1048576.0,
                table.largest());
  PlanBuilder build{*this, layout, *plan};
  build.embedding();
  for (int64_t i = 0; i < cfg_.depth; ++i) build.block(i);
  build.head();
  return plan;
}

void ViT::set_pool(Pool pool) {
  if (pool == Pool::Token && !cfg_.class_token) throw Error(source_, "token pooling needs a class token, and the model has none");
  if (pool == Pool::Map && !cfg_.pool.attn())
    throw Error(source_, "attention pooling needs an attention-pool head (attn_pool), and the model has none");
  cfg_.pool.kind = pool;
  cfg_.origin.pool = "asked for";
  plans_.clear();
}

void ViT::set_max_patches(int64_t n) {
  if (!cfg_.naflex.on)
    throw ArgumentError("--max-patches applies to NaFlex models (timm's naflexvit_*, and SigLIP towers vit_*_siglip_* made "
                        "with use_naflex=True, their config.json saying model_args use_naflex true), and " + source_ +
                        " is a " + family_name(cfg_.family) + " with a fixed " + std::to_string(cfg_.img_h()) + "x" +
                        std::to_string(cfg_.img_w()) + " input");
  if (n < 1 || n > kMaxNaflexPatches)
    throw ArgumentError("max patches " + std::to_string(n) + " is out of range (1 to " +
                        std::to_string(kMaxNaflexPatches) + ")");
  cfg_.naflex.max_patches = n;
  plans_.clear();
}

PatchGrid ViT::prepare_input(const Image& image, float* dst) const {
  if (!cfg_.naflex.on) {
    preprocess(image, cfg_.pre, dst);
    return PatchGrid{int(cfg_.grid_h()), int(cfg_.grid_w())};
  }
  const NaflexConfig n = cfg_.naflex_config();
  std::vector<int32_t> coords(size_t(2 * n.max_patches));
  std::vector<uint8_t> valid(size_t(n.max_patches));
  return naflex_patches(image, n, n.max_patches, dst, coords.data(), valid.data());
}

void ViT::Plan::set_grid(int64_t b, PatchGrid grid) {
  if (b < 0 || b >= B_) throw Error("internal: image " + std::to_string(b) + " of a batch of " + std::to_string(B_));
  if (grids_.empty()) {  // a fixed-size model: its one grid
    if (grid != fixed_grid_)
      throw Error("internal: a grid of " + std::to_string(grid.rows) + " x " + std::to_string(grid.cols) +
                  " patches for a model whose grid is " + std::to_string(fixed_grid_.rows) + " x " +
                  std::to_string(fixed_grid_.cols));
    return;
  }
  if (grid.rows < 1 || grid.cols < 1 || grid.count() > budget_)
    throw Error("embeds: image " + std::to_string(b) + " of the batch has a grid of " + std::to_string(grid.rows) +
                " x " + std::to_string(grid.cols) + " patches, not within its budget of " + std::to_string(budget_));
  grids_[size_t(b)] = grid;
  lengths_[size_t(b)] = int32_t(prefix_ + grid.count());
}

const float* ViT::Plan::attention(int64_t block) const {
  if (!keeps_attention_ || block < 0 || block >= depth_)
    throw Error("internal: attention of block " + std::to_string(block) + " asked of a Plan that does not keep it");
  return act_.scores + block * B_ * scores_per_image_;
}

const float* ViT::Plan::run() const {
  program_.run();
  return act_.logits;
}

const float* ViT::Plan::run(const TapFn& tap) const {
  tap("input", act_.input, B_ * input_floats_);
  const auto& steps = program_.steps();
  size_t next_tap = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    program_.execute(i);
    cpu_stream().wait();
    for (; next_tap < taps_.size() && taps_[next_tap].after_step == i; ++next_tap)
      tap(taps_[next_tap].name, taps_[next_tap].data, taps_[next_tap].count);
  }
  return act_.logits;
}

ViT::Plan& ViT::plan(int64_t B) {
  auto& p = plans_[B];
  if (!p) p = make_plan(B);
  return *p;
}

void ViT::forward(const float* images, int64_t B, float* logits) {
  Plan& p = plan(B);
  std::memcpy(p.input(), images, size_t(B * cfg_.input_floats()) * sizeof(float));
  std::memcpy(logits, p.run(), size_t(B * cfg_.classes) * sizeof(float));
}

void ViT::forward_with_taps(const float* images, int64_t B, const TapFn& tap) {
  Plan& p = plan(B);
  std::memcpy(p.input(), images, size_t(B * cfg_.input_floats()) * sizeof(float));
  p.run(tap);
}

}  // namespace vit

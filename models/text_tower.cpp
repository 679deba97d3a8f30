// The text tower's weights and its forward pass as a Plan; each step names the reference line it mirrors (open_clip's
// TextTransformer.forward and CLIP.encode_text, transformers' CLIPTextTransformer and SiglipTextTransformer).
#include "text_tower.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "checkpoint.h"
#include "vit/error.h"
#include "vit/limits.h"
#include "vit/model_files.h"

namespace vit {

// The tensors by the text tower's names (layouts.h's text tables), each layer made as soon as it is read.
struct TextTower::Loader {
  TextTower& t;
  Checkpoint& ck;
  const TextConfig& c = t.cfg_;
  const int64_t D = c.width;

  LayerNormWeights norm(const std::string& n) {
    const auto w = ck.take(n + ".weight", {D}), b = ck.take(n + ".bias", {D});
    return make_layer_norm(t.store_, w.data(), b.data(), D, c.eps);
  }
  // The blocks' layers at the model's precision; the projection, which gives the embedding, in f32 (as the image
  // towers' heads). At int8 on a CPU without VNNI, 8-bit weights and 7-bit inputs: on ViT-B-32's and
  // ViT-B-16-SigLIP's towers the embeddings' cosine to f32 is 0.9991 so against 0.9985 the other way round
  // (docs/PERFORMANCE.md).
  LinearWeights linear(const std::string& n, int64_t K, int64_t N, bool bias, Epilogue ep, Precision p) {
    const auto w = ck.take(n + ".weight", {N, K});
    const auto b = bias ? ck.take(n + ".bias", {N}) : TensorSource::Tensor();
    return make_linear(t.store_, w.data(), b.empty() ? nullptr : b.data(), K, N, c.context, ep, p, WeightLayout::Auto,
                       LinearForm::Auto, Int8Split::SevenBitInputs);
  }

  void load() {
    t.token_embedding_ = Stored<float>(t.store_, ck.take("token_embedding", {c.vocab, D}).to_vector());
    t.position_embedding_ = Stored<float>(t.store_, ck.take("position_embedding", {c.context, D}).to_vector());
    const Precision p = t.precision_;
    for (int64_t i = 0; i < c.depth; ++i) {
      // ResidualAttentionBlock (ln_1, attn, ln_2, mlp c_fc, gelu, c_proj) and CLIPEncoderLayer, in timm's names.
      const std::string b = "blocks." + std::to_string(i) + ".";
      BlockWeights w;
      w.norm1 = norm(b + "norm1");
      w.qkv = linear(b + "attn.qkv", D, 3 * D, true, Epilogue::None, p);
      w.proj = linear(b + "attn.proj", D, D, true, Epilogue::AddToDst, p);
      w.norm2 = norm(b + "norm2");
      w.fc1 = linear(b + "mlp.fc1", D, c.mlp, true, activation_epilogue(c.act), p);
      w.fc2 = linear(b + "mlp.fc2", c.mlp, D, true, Epilogue::AddToDst, p);
      t.blocks_.push_back(std::move(w));
    }
    t.norm_ = norm("norm");
    if (c.projection == TextProjection::Linear) {
      t.proj_ = linear("proj", D, c.embed, c.proj_bias, Epilogue::None, Precision::F32);
    } else if (c.projection == TextProjection::Matrix) {  // x @ text_projection: its transpose as a layer's [E, D]
      const auto w = ck.take("proj_matrix", {c.embed, D});
      t.proj_ = make_linear(t.store_, w.data(), nullptr, D, c.embed, 1, Epilogue::None, Precision::F32);
    }
  }
};

namespace {

// logit_scale (stored as its log, as open_clip's and transformers' CLIP and SigLIP hold it) and logit_bias: one number
// each, beside both towers.
void read_logit_scale(const SafeTensors& st, float* scale, std::optional<float>* bias) {
  const auto scalar = [&](const char* name) -> std::optional<float> {
    if (!st.has(name)) return std::nullopt;
    const std::vector<float> v = st.to_f32(name);
    if (v.size() != 1) throw Error(st.path(), std::string(name) + " holds " + std::to_string(v.size()) + " numbers, not one");
    return v[0];
  };
  const std::optional<float> s = scalar("logit_scale");
  *scale = s ? std::exp(*s) : std::nanf("");
  *bias = scalar("logit_bias");
}

}  // namespace

TextTower TextTower::load(const std::string& model, Precision precision, const std::string& tokenizer_folder) {
  const ModelFiles files = find_model_files(model);
  Checkpoint ck(files.weights, Tower::Text);
  TextTower t;
  t.source_ = files.weights;
  t.precision_ = precision;
  t.cfg_ = resolve_text_config(ck, files, tokenizer_folder);
  t.tokenizer_ = Tokenizer::open(t.cfg_.tokenizer);
  if (t.tokenizer_->vocab_size() > t.cfg_.vocab)
    spdlog::warn("{}: its tokenizer has {} tokens, the text tower's embedding {} rows: texts with the others are refused",
                 files.weights, t.tokenizer_->vocab_size(), t.cfg_.vocab);
  spdlog::debug("{}: {}", files.weights, t.cfg_.summary());
  Loader{t, ck}.load();
  ck.check_all_used();
  read_logit_scale(ck.file(), &t.logit_scale_, &t.logit_bias_);
  return t;
}

std::vector<Tokens> TextTower::tokenize(const std::vector<std::string>& texts) const {
  std::vector<Tokens> out;
  out.reserve(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    try {
      out.push_back(tokenizer_->encode(texts[i]));
    } catch (const Error& e) {
      throw Error("text " + std::to_string(i), e.what());
    }
  }
  return out;
}

int64_t TextTower::pooled_row(const Tokens& t) const { return vit::pooled_row(cfg_, t); }

int64_t TextTower::attention_chunk(int64_t B, int64_t T) const {
  const int64_t per_text = attention_scratch_floats(1, T, cfg_.heads, cfg_.head_dim()) * int64_t(sizeof(float));
  return std::min(B, std::max(int64_t(1), max_threads() * (int64_t(1) << 20) / per_text));
}

// A Plan's steps in forward order.
struct TextTower::Builder {
  const TextTower& m;
  Plan& plan;
  const TextConfig& c = m.cfg_;
  const int64_t B = plan.B_, T = plan.T_, D = c.width;

  const Plan::Activations& a() const { return plan.act_; }
  void add(Step s) { plan.program_.add(std::move(s)); }
  void add(std::vector<Step> steps) {
    for (Step& s : steps) add(std::move(s));
  }

  // x = self.token_embedding(text) + self.positional_embedding[:seq_len] (CLIPTextEmbeddings alike)
  void embedding() {
    const float* tok = m.token_embedding_.data();
    const float* pos = m.position_embedding_.data();
    const int32_t* ids = a().ids;
    float* x = a().x;
    const int64_t B_ = B, T_ = T, D_ = D;
    add(host_step("embed", [=] {
      parallel_for(B_ * T_, [&](int64_t bt) {
        const float* e = tok + int64_t(ids[bt]) * D_;
        const float* p = pos + (bt % T_) * D_;
        float* row = x + bt * D_;
        for (int64_t d = 0; d < D_; ++d) row[d] = e[d] + p[d];
      });
    }));
  }

  // x = q_x + ls_1(attention(ln_1(q_x), attn_mask)); x = x + ls_2(mlp(ln_2(x))), ResidualAttentionBlock.forward
  void block(int64_t i) {
    const BlockWeights& w = m.blocks_[size_t(i)];
    const std::string p = "blocks." + std::to_string(i);
    add(plan.precision_.norm_linear(p + ".norm1", w.norm1, a().x, a().h, p + ".attn.qkv", w.qkv, T, a().qkv));
    // nn.MultiheadAttention(q, k, v, attn_mask): open_clip's causal mask (-inf above the diagonal), or none; each
    // text over its own rows (the padding past its pooled row changes nothing of it under the mask).
    const int64_t chunk = m.attention_chunk(B, T), H = c.heads;
    for (int64_t first = 0; first < B; first += chunk)
      add(plan.precision_.attention(p + ".attn", std::min(chunk, B - first), T, H, c.head_dim(), a().qkv + first * T * 3 * D,
                                    a().heads, nullptr, a().attn + first * T * D, nullptr,
                                    c.causal ? a().lengths + first : nullptr, AttentionRoad::Fused, c.causal));
    add(plan.precision_.linear(p + ".attn.proj", w.proj, T, a().attn, a().x));
    add(plan.precision_.norm_linear(p + ".norm2", w.norm2, a().x, a().h, p + ".mlp.fc1", w.fc1, T, a().mlp, &w.fc2));
    add(plan.precision_.linear(p + ".mlp.fc2", w.fc2, T, a().mlp, a().x));
  }

  // pooled = text_global_pool(ln_final(x), text, pool_type), then text_projection: the pooled row selected first
  // (a LayerNorm is per row, so the same), then normed.
  void head() {
    const int32_t* at = a().pooled_at;
    const float* x = a().x;
    float* pooled = a().pooled;
    const int64_t T_ = T, D_ = D, B_ = B;
    add(host_step("pool", [=] {
      for (int64_t b = 0; b < B_; ++b) std::memcpy(pooled + b * D_, x + (b * T_ + at[b]) * D_, size_t(D_) * sizeof(float));
    }));
    add(layer_norm_step("norm", m.norm_, B, a().pooled, a().pooled_norm));
    if (c.projection != TextProjection::None) {
      add(plan.precision_.linear("proj", m.proj_, 1, a().pooled_norm, a().out));
    } else {
      const float* src = a().pooled_norm;
      float* out = a().out;
      add(host_step("proj", [=] { std::memcpy(out, src, size_t(B_ * D_) * sizeof(float)); }));
    }
  }
};

std::unique_ptr<TextTower::Plan> TextTower::make_plan(int64_t B, int64_t T) const {
  check_batch_size(B);
  if (T < 1 || T > cfg_.context || (!cfg_.causal && T != cfg_.context))
    throw Error("internal: a text Plan of " + std::to_string(T) + " tokens for a tower of " +
                std::to_string(cfg_.context) + (cfg_.causal ? "" : " (unmasked: all of them)"));
  auto plan = std::make_unique<Plan>();
  plan->cfg_ = cfg_;
  plan->B_ = B;
  plan->T_ = T;
  plan->precision_ = PrecisionRoad(precision_, B);
  Plan::Activations* a = &plan->act_;
  const int64_t D = cfg_.width, BT = B * T;
  BufferTable t;
  t.add("ids", &a->ids, BT);
  t.add("lengths", &a->lengths, B);
  t.add("pooled_at", &a->pooled_at, B);
  t.add("x", &a->x, BT * D);
  t.add("h", &a->h, BT * D);
  t.add("qkv", &a->qkv, BT * 3 * D);
  t.add("heads", &a->heads, attention_scratch_floats(attention_chunk(B, T), T, cfg_.heads, cfg_.head_dim()));
  t.add("attn", &a->attn, BT * D);
  t.add("mlp", &a->mlp, BT * cfg_.mlp);
  t.add("pooled", &a->pooled, B * D);
  t.add("pooled_norm", &a->pooled_norm, B * D);
  t.add("out", &a->out, B * cfg_.embed);
  plan->precision_.add_scratch(t, T, std::max(D, cfg_.mlp), D);
  plan->arena_ = t.carve();
  Builder build{*this, *plan};
  build.embedding();
  for (int64_t i = 0; i < cfg_.depth; ++i) build.block(i);
  build.head();
  return plan;
}

const float* TextTower::Plan::run(const std::vector<Tokens>& texts) const {
  if (int64_t(texts.size()) != B_)
    throw Error("internal: " + std::to_string(texts.size()) + " texts for a Plan of " + std::to_string(B_));
  const TextConfig& c = cfg_;
  for (int64_t b = 0; b < B_; ++b) {
    const Tokens& t = texts[size_t(b)];
    if (int64_t(t.ids.size()) != c.context)
      throw Error("text " + std::to_string(b) + " has " + std::to_string(t.ids.size()) + " tokens, not the tower's " +
                  std::to_string(c.context));
    const int64_t row = vit::pooled_row(c, t);
    if (row >= T_) throw Error("internal: text " + std::to_string(b) + " is pooled at row " + std::to_string(row) +
                               ", past the Plan's " + std::to_string(T_));
    for (int64_t i = 0; i < T_; ++i) {
      const int32_t id = t.ids[size_t(i)];
      if (id < 0 || id >= c.vocab)
        throw Error("text " + std::to_string(b) + ": token " + std::to_string(id) + " is outside the tower's vocabulary of " +
                    std::to_string(c.vocab));
      act_.ids[b * T_ + i] = id;
    }
    act_.pooled_at[b] = int32_t(row);
    act_.lengths[b] = int32_t(c.causal ? row + 1 : T_);
  }
  program_.run();
  return act_.out;
}

std::vector<float> TextTower::embed(const std::vector<Tokens>& texts) {
  if (texts.empty()) return {};
  // The rows the batch needs, rounded up to 8 (fewer Plans), at most the context; all of it without the mask.
  int64_t T = cfg_.context;
  if (cfg_.causal) {
    int64_t need = 1;
    for (const Tokens& t : texts) need = std::max(need, pooled_row(t) + 1);
    T = std::min(cfg_.context, (need + 7) / 8 * 8);
  }
  auto& p = plans_[{int64_t(texts.size()), T}];
  if (!p) p = make_plan(int64_t(texts.size()), T);
  const float* out = p->run(texts);
  return std::vector<float>(out, out + texts.size() * size_t(cfg_.embed));
}

}  // namespace vit

// ViT loading and the forward pass; each step names the timm line it mirrors.
#include "vit.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint.h"
#include "engine/error.h"
#include "engine/resample.h"

namespace vit {
namespace {

bool is_dir(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool exists(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0;
}
std::string parent_dir(const std::string& p) {
  const auto pos = p.find_last_of('/');
  return pos == std::string::npos ? "." : p.substr(0, pos);
}
std::string base_name(const std::string& p) {
  std::string s = p;
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  const auto pos = s.find_last_of('/');
  return pos == std::string::npos ? s : s.substr(pos + 1);
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open: " + std::strerror(errno));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": invalid JSON: " + e.what());
  }
}

using WeightFn = std::function<std::vector<float>(const std::string&, const std::vector<int64_t>&)>;

size_t round16(size_t n) { return (n + 15) / 16 * 16; }

}  // namespace

ViT ViT::load(const std::string& model, const std::string& config_path, int64_t img_size) {
  std::string file = model, dir;
  if (!exists(model)) throw Error(model + ": no such file or directory");
  if (is_dir(model)) {
    dir = model;
    file = model + (model.back() == '/' ? "" : "/") + "model.safetensors";
    if (!exists(file)) throw Error(model + ": folder has no model.safetensors");
  } else {
    dir = parent_dir(model);
  }
  std::string cfg_file = config_path;
  if (cfg_file.empty() && exists(dir + "/config.json")) cfg_file = dir + "/config.json";
  nlohmann::json cfg_json, pre_json;
  ConfigSources src;
  if (!cfg_file.empty()) {
    cfg_json = read_json(cfg_file);
    src.config = &cfg_json;
    src.config_name = cfg_file;
  }
  if (exists(dir + "/preprocessor_config.json")) {
    src.preprocessor_name = dir + "/preprocessor_config.json";
    pre_json = read_json(src.preprocessor_name);
    src.preprocessor = &pre_json;
  }
  src.name_hint = base_name(is_dir(model) ? model : (base_name(file) == "model.safetensors" ? dir : file));
  src.img_size = img_size;

  Checkpoint ck(file);
  ViT m;
  m.source_ = file;
  m.cfg_ = resolve_config(ck, src);
  spdlog::debug("{}: {} layout, {}", file, layout_name(ck.layout()), m.cfg_.summary());
  m.load_weights(ck);
  ck.check_all_used();
  return m;
}

void ViT::load_weights(Checkpoint& ck) {
  const ViTConfig& c = cfg_;
  const int64_t D = c.width, M = c.mlp, C = c.classes, P = c.patch, Cin = c.in_chans;
  auto take = [&](const std::string& n, const std::vector<int64_t>& s) { return ck.take(n, s); };
  auto opt = [&](const std::string& n, const std::vector<int64_t>& s) {
    return ck.has(n) ? ck.take(n, s) : Checkpoint::Tensor();
  };
  // bias: required, else taken when present; shape: the stored weight's, when not [N, K] (a conv
  // kernel [D, C, P, P] is the same memory as [D, C*P*P]).
  auto linear = [&](const std::string& n, int64_t K, int64_t N, bool bias, std::vector<int64_t> shape = {}) {
    const auto w = take(n + ".weight", shape.empty() ? std::vector<int64_t>{N, K} : shape);
    const auto b = bias ? take(n + ".bias", {N}) : opt(n + ".bias", {N});
    return make_linear(store_, w.data(), b.empty() ? nullptr : b.data(), K, N);
  };
  auto norm = [&](const std::string& n) {
    const auto w = take(n + ".weight", {D}), b = take(n + ".bias", {D});
    return make_layer_norm(store_, w.data(), b.data(), D, c.eps);
  };

  patch_embed_ = linear("patch_embed.proj", Cin * P * P, D, false, {D, Cin, P, P});
  if (c.class_token) cls_token_ = take("cls_token", {1, 1, D}).to_vector();
  if (c.dist_token) dist_token_ = take("dist_token", {1, 1, D}).to_vector();
  std::vector<float> pos = take("pos_embed", {1, c.pos_len(), D}).to_vector();
  if (c.pos_grid_h != c.grid_h() || c.pos_grid_w != c.grid_w()) {
    // timm resample_abs_pos_embed: bicubic, antialiased, prefix tokens kept as they are.
    const int64_t prefix = c.no_embed_class ? 0 : c.prefix_tokens();
    std::vector<float> grid = resample_grid(pos.data() + prefix * D, int(c.pos_grid_h), int(c.pos_grid_w), int(D),
                                            int(c.grid_h()), int(c.grid_w()), Filter::Bicubic);
    pos.resize(size_t(prefix * D));
    pos.insert(pos.end(), grid.begin(), grid.end());
    spdlog::debug("position table resampled from {}x{} to {}x{}", c.pos_grid_h, c.pos_grid_w, c.grid_h(), c.grid_w());
  }
  pos_embed_ = std::move(pos);
  blocks_.clear();
  for (int64_t i = 0; i < c.depth; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    BlockWeights b;
    b.norm1 = norm(p + "norm1");
    b.qkv = linear(p + "attn.qkv", D, 3 * D, c.qkv_bias);
    b.proj = linear(p + "attn.proj", D, D, true);
    b.norm2 = norm(p + "norm2");
    b.fc1 = linear(p + "mlp.fc1", D, M, true);
    b.fc2 = linear(p + "mlp.fc2", M, D, true);
    blocks_.push_back(std::move(b));
  }
  if (c.final_norm) norm_ = norm("norm");
  if (c.fc_norm) fc_norm_ = norm("fc_norm");
  head_ = linear("head", D, C, true);
  if (c.dist_token) head_dist_ = linear("head_dist", D, C, true);
}

ViT ViT::random(const ViTConfig& cfg, uint32_t seed) {
  // The same structures load_weights fills, from a seeded generator instead of a file.
  ViT m;
  m.cfg_ = cfg;
  m.source_ = "random:" + (cfg.arch.empty() ? std::string("vit") : cfg.arch);
  uint64_t state = 0x9E3779B97F4A7C15ull ^ seed;
  auto fill = [&](size_t n, float scale, float offset) {
    std::vector<float> v(n);
    for (auto& x : v) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      x = offset + scale * (float(int32_t(state >> 32)) / 2147483648.f);
    }
    return v;
  };
  const int64_t D = cfg.width, M = cfg.mlp, C = cfg.classes, K0 = cfg.in_chans * cfg.patch * cfg.patch;
  auto linear = [&](int64_t K, int64_t N) {
    const auto w = fill(size_t(N * K), 1.f / std::sqrt(float(K)), 0.f), b = fill(size_t(N), 0.02f, 0.f);
    return make_linear(m.store_, w.data(), b.data(), K, N);
  };
  auto norm = [&] {
    const auto g = fill(size_t(D), 0.1f, 1.f), b = fill(size_t(D), 0.02f, 0.f);
    return make_layer_norm(m.store_, g.data(), b.data(), D, cfg.eps);
  };
  m.patch_embed_ = linear(K0, D);
  if (cfg.class_token) m.cls_token_ = fill(size_t(D), 0.02f, 0.f);
  if (cfg.dist_token) m.dist_token_ = fill(size_t(D), 0.02f, 0.f);
  m.pos_embed_ = fill(size_t(cfg.pos_len() * D), 0.02f, 0.f);
  for (int64_t i = 0; i < cfg.depth; ++i)
    m.blocks_.push_back({norm(), norm(), linear(D, 3 * D), linear(D, D), linear(D, M), linear(M, D)});
  if (cfg.final_norm) m.norm_ = norm();
  if (cfg.fc_norm) m.fc_norm_ = norm();
  m.head_ = linear(D, C);
  if (cfg.dist_token) m.head_dist_ = linear(D, C);
  return m;
}

size_t ViT::activation_bytes(int64_t B) const {
  const ViTConfig& c = cfg_;
  const size_t T = size_t(c.tokens()), D = size_t(c.width), N = size_t(c.patches());
  const size_t floats = round16(B * 3 * c.img_h * c.img_w) + round16(B * N * c.in_chans * c.patch * c.patch) +
                        round16(B * N * D) + 3 * round16(B * T * D) + 2 * round16(B * T * 3 * D) +
                        round16(size_t(B * c.heads) * T * T) + round16(B * T * c.mlp) + 3 * round16(B * D) +
                        2 * round16(B * c.classes);
  return floats * sizeof(float);
}

std::unique_ptr<ViT::Plan> ViT::make_plan(int64_t B) const {
  if (B <= 0) throw Error("batch size must be positive, got " + std::to_string(B));
  const ViTConfig& c = cfg_;
  const int64_t D = c.width, T = c.tokens(), N = c.patches(), H = c.heads, M = c.mlp, C = c.classes;
  const int64_t prefix = c.prefix_tokens(), BT = B * T;
  spdlog::debug("plan for batch {}: {:.1f} MiB of activations", B, activation_bytes(B) / 1048576.0);
  auto plan = std::make_unique<Plan>();
  plan->B_ = B;
  plan->arena_ = Arena(activation_bytes(B) / sizeof(float));
  float* next = plan->arena_.data();
  auto carve = [&](int64_t n) {
    float* p = next;
    next += round16(size_t(n));
    return p;
  };
  float* input = carve(B * 3 * c.img_h * c.img_w);             // [B, 3, H, W]
  float* patches = carve(B * N * c.in_chans * c.patch * c.patch);  // [B*N, C*P*P]
  float* pe = carve(B * N * D);                                 // [B*N, D]
  float* x = carve(BT * D);                                     // [B, T, D] residual stream
  float* h = carve(BT * D);                                     // [B, T, D] normalized
  float* attn = carve(BT * D);                                  // [B, T, D] heads concatenated
  float* qkv = carve(BT * 3 * D);                               // [B, T, 3, H, Dh]
  float* heads = carve(BT * 3 * D);                             // [3, B, H, T, Dh]
  float* scores = carve(B * H * T * T);                         // [B, H, T, T]
  float* mlp = carve(BT * M);                                   // [B, T, M]
  float* pooled = carve(B * D);                                 // [B, D]
  float* pooled_n = carve(B * D);                               // [B, D]
  float* pooled_dist = carve(B * D);                            // [B, D]
  float* logits = carve(B * C);                                 // [B, C]
  float* logits_dist = carve(B * C);                            // [B, C]
  plan->input_ = input;
  plan->logits_ = logits;
  Program& prog = plan->program_;
  auto tap = [&](const std::string& name, const float* data, int64_t count) {
    plan->taps_.push_back({prog.steps().size() - 1, name, data, count});
  };

  // x = self.patch_embed(x): the P x P / stride P conv as patch rows times the flattened kernel.
  prog.add(patchify_step("patch_embed.patchify", B, c.in_chans, c.img_h, c.img_w, c.patch, input, patches));
  prog.add(linear_step("patch_embed.proj", patch_embed_, B * N, patches, pe, Epilogue::None));
  tap("patch_embed", pe, B * N * D);

  // x = self._pos_embed(x): prepend class/distillation tokens, add the position table (to the patches
  // only, before prepending, when no_embed_class).
  {
    Step s;
    s.name = "embed";
    const float* cls = cls_token_.data();
    const float* dist = dist_token_.data();
    const float* pos = pos_embed_.data();
    const bool class_token = c.class_token, dist_token = c.dist_token, nec = c.no_embed_class;
    s.host = [=] {
      parallel_for(B, [&](int64_t b) {
        float* xb = x + b * T * D;
        int64_t t = 0;
        if (class_token) std::memcpy(xb + (t++) * D, cls, size_t(D) * 4);
        if (dist_token) std::memcpy(xb + (t++) * D, dist, size_t(D) * 4);
        if (!nec)
          for (int64_t i = 0; i < prefix * D; ++i) xb[i] += pos[i];
        const float* pp = nec ? pos : pos + prefix * D;
        const float* src = pe + b * N * D;
        for (int64_t i = 0; i < N * D; ++i) xb[prefix * D + i] = src[i] + pp[i];
      });
    };
    prog.add(std::move(s));
    tap("embed", x, BT * D);
  }

  // x = self.blocks(x): x = x + attn(norm1(x)); x = x + mlp(norm2(x))
  for (int64_t i = 0; i < c.depth; ++i) {
    const BlockWeights& w = blocks_[size_t(i)];
    const std::string p = "blocks." + std::to_string(i);
    prog.add(layer_norm_step(p + ".norm1", w.norm1, BT, x, h));
    tap(p + ".norm1", h, BT * D);
    prog.add(linear_step(p + ".attn.qkv", w.qkv, BT, h, qkv, Epilogue::None));
    for (Step& s : attention_steps(p + ".attn", B, T, H, c.head_dim(), qkv, heads, scores, attn)) prog.add(std::move(s));
    prog.add(linear_step(p + ".attn.proj", w.proj, BT, attn, x, Epilogue::AddToDst));
    prog.add(layer_norm_step(p + ".norm2", w.norm2, BT, x, h));
    tap(p + ".norm2", h, BT * D);
    prog.add(linear_step(p + ".mlp.fc1", w.fc1, BT, h, mlp, Epilogue::Gelu));
    tap(p + ".mlp.fc1_gelu", mlp, BT * M);
    prog.add(linear_step(p + ".mlp.fc2", w.fc2, BT, mlp, x, Epilogue::AddToDst));
    tap(p, x, BT * D);
  }

  // x = self.norm(x)
  const float* feats = x;
  if (c.final_norm) {
    prog.add(layer_norm_step("norm", norm_, BT, x, h));
    tap("norm", h, BT * D);
    feats = h;
  }

  // x = self.forward_head(x): pool (token 0, or the mean of the patch tokens), fc_norm, head.
  {
    Step s;
    s.name = "pool";
    const bool avg = c.global_pool == "avg", dist = c.dist_token;
    s.host = [=] {
      for (int64_t b = 0; b < B; ++b) {
        float* o = pooled + b * D;
        const float* f = feats + b * T * D;
        if (dist) std::memcpy(pooled_dist + b * D, f + D, size_t(D) * 4);  // x[:, 1]
        if (!avg) {
          std::memcpy(o, f, size_t(D) * 4);  // x[:, 0]
          continue;
        }
        for (int64_t d = 0; d < D; ++d) o[d] = 0.f;  // x[:, num_prefix_tokens:].mean(dim=1)
        for (int64_t t = prefix; t < T; ++t)
          for (int64_t d = 0; d < D; ++d) o[d] += f[t * D + d];
        for (int64_t d = 0; d < D; ++d) o[d] /= float(T - prefix);
      }
    };
    prog.add(std::move(s));
  }
  const float* head_in = pooled;
  if (c.fc_norm) {
    prog.add(layer_norm_step("fc_norm", fc_norm_, B, pooled, pooled_n));
    head_in = pooled_n;
  }
  prog.add(linear_step("head", head_, B, head_in, logits, Epilogue::None));
  if (c.dist_token) {
    // DeiT distilled, eval: (head(x[:, 0]) + head_dist(x[:, 1])) / 2
    prog.add(linear_step("head_dist", head_dist_, B, pooled_dist, logits_dist, Epilogue::None));
    Step s;
    s.name = "head.average";
    s.host = [=] {
      for (int64_t i = 0; i < B * C; ++i) logits[i] = 0.5f * (logits[i] + logits_dist[i]);
    };
    prog.add(std::move(s));
  }
  tap("logits", logits, B * C);
  return plan;
}

const float* ViT::Plan::run() const {
  program_.run();
  return logits_;
}

ViT::Plan& ViT::plan(int64_t B) {
  auto& p = plans_[B];
  if (!p) p = make_plan(B);
  return *p;
}

void ViT::forward(const float* images, int64_t B, float* logits) {
  Plan& p = plan(B);
  std::memcpy(p.input(), images, size_t(B * 3 * cfg_.img_h * cfg_.img_w) * sizeof(float));
  std::memcpy(logits, p.run(), size_t(B * cfg_.classes) * sizeof(float));
}

void ViT::forward_with_taps(const float* images, int64_t B, const TapFn& tap) {
  Plan& p = plan(B);
  std::memcpy(p.input(), images, size_t(B * 3 * cfg_.img_h * cfg_.img_w) * sizeof(float));
  tap("input", p.input(), B * 3 * cfg_.img_h * cfg_.img_w);
  const auto& steps = p.program().steps();
  size_t next_tap = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    p.program().execute(i);
    cpu_stream().wait();
    for (; next_tap < p.taps_.size() && p.taps_[next_tap].after_step == i; ++next_tap)
      tap(p.taps_[next_tap].name, p.taps_[next_tap].data, p.taps_[next_tap].count);
  }
}

}  // namespace vit

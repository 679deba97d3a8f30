// Model files for tests; see model_files.h.
#include "model_files.h"

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/io/safetensors.h"

namespace vit::test {

std::vector<float> random_vector(size_t n, std::mt19937& rng, float scale, float offset) {
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = offset + scale * dist(rng);
  return v;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TensorMap tiny_vit_tensors(const TinySpec& s, uint32_t seed) {
  std::mt19937 rng(seed);
  TensorMap t;
  auto add = [&](const std::string& n, std::vector<int64_t> shape, float scale, float offset = 0.f) {
    size_t count = 1;
    for (auto d : shape) count *= size_t(d);
    t[n] = {shape, random_vector(count, rng, scale, offset)};
  };
  const int64_t D = s.D, N = (s.img / s.patch) * (s.img / s.patch);
  const int64_t prefix = int64_t(s.class_token) + int64_t(s.dist_token);
  add("patch_embed.proj.weight", {D, 3, s.patch, s.patch}, 0.05f);
  add("patch_embed.proj.bias", {D}, 0.1f);
  if (s.class_token) add("cls_token", {1, 1, D}, 0.5f);
  if (s.dist_token) add("dist_token", {1, 1, D}, 0.5f);
  add("pos_embed", {1, s.no_embed_class ? N : N + prefix, D}, 0.5f);
  for (int64_t i = 0; i < s.depth; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    add(p + "norm1.weight", {D}, 0.2f, 1.f);
    add(p + "norm1.bias", {D}, 0.2f);
    add(p + "attn.qkv.weight", {3 * D, D}, 0.3f);
    add(p + "attn.qkv.bias", {3 * D}, 0.1f);
    add(p + "attn.proj.weight", {D, D}, 0.15f);
    add(p + "attn.proj.bias", {D}, 0.1f);
    add(p + "norm2.weight", {D}, 0.2f, 1.f);
    add(p + "norm2.bias", {D}, 0.2f);
    add(p + "mlp.fc1.weight", {s.mlp, D}, 0.15f);
    add(p + "mlp.fc1.bias", {s.mlp}, 0.1f);
    add(p + "mlp.fc2.weight", {D, s.mlp}, 0.1f);
    add(p + "mlp.fc2.bias", {D}, 0.1f);
  }
  const std::string final_norm = s.fc_norm ? "fc_norm" : "norm";
  add(final_norm + ".weight", {D}, 0.2f, 1.f);
  add(final_norm + ".bias", {D}, 0.2f);
  add("head.weight", {s.classes, D}, 0.2f);
  add("head.bias", {s.classes}, 0.1f);
  if (s.dist_token) {
    add("head_dist.weight", {s.classes, D}, 0.2f);
    add("head_dist.bias", {s.classes}, 0.1f);
  }
  return t;
}

void write_tensors(const std::string& path, const TensorMap& t) {
  std::vector<TensorToWrite> w;
  for (const auto& [name, v] : t) w.push_back({name, v.first, v.second.data()});
  write_safetensors(path, w, {{"format", "pt"}});
}

void write_tiny_model(const std::string& dir, const TinySpec& s, uint32_t seed) {
  write_tensors(dir + "/model.safetensors", tiny_vit_tensors(s, seed));
  nlohmann::json cfg = {{"architecture", "vit_custom"},
                        {"num_classes", s.classes},
                        {"global_pool", s.class_token && !s.fc_norm ? "token" : "avg"},
                        {"model_args", {{"num_heads", s.heads}, {"no_embed_class", s.no_embed_class}}},
                        {"pretrained_cfg",
                         {{"input_size", {3, s.img, s.img}},
                          {"interpolation", "bicubic"},
                          {"crop_pct", 0.9},
                          {"crop_mode", "center"},
                          {"mean", {0.485, 0.456, 0.406}},
                          {"std", {0.229, 0.224, 0.225}}}}};
  write_file(dir + "/config.json", cfg.dump(2));
}

namespace {
// `top` renames whole names, `block` renames what follows "blocks.{i}." to what follows prefix(i). A name no
// tensor has is a module's: its .weight and .bias are renamed alike ({"norm1", "ln_1"}: ln_1.weight, ln_1.bias).
using Renames = std::vector<std::pair<std::string, std::string>>;
void rename_one(TensorMap& out, const TensorMap& t, const std::string& from, const std::string& to) {
  if (t.count(from)) {
    out[to] = t.at(from);
    return;
  }
  for (const char* part : {".weight", ".bias"})
    if (t.count(from + part)) out[to + part] = t.at(from + part);
}
TensorMap rename(const TensorMap& t, int64_t depth, const Renames& top, const Renames& block,
                 const std::function<std::string(int64_t)>& prefix) {
  TensorMap out;
  for (const auto& [from, to] : top) rename_one(out, t, from, to);
  for (int64_t i = 0; i < depth; ++i)
    for (const auto& [from, to] : block) rename_one(out, t, "blocks." + std::to_string(i) + "." + from, prefix(i) + to);
  return out;
}

// Hugging Face's query, key and value (each [D, ...]) from timm's qkv, under `prefix` + name + suffix.
void split_qkv(TensorMap& out, const TensorMap& t, int64_t depth, int64_t D, const std::function<std::string(int64_t)>& layer,
               const char* const names[3], const std::string& suffix) {
  for (int64_t i = 0; i < depth; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    const auto& w = t.at(p + "attn.qkv.weight").second;
    const auto& b = t.at(p + "attn.qkv.bias").second;
    const size_t d = size_t(D);
    for (size_t k = 0; k < 3; ++k) {
      out[layer(i) + names[k] + suffix + ".weight"] = {{D, D}, {w.begin() + long(k * d * d), w.begin() + long((k + 1) * d * d)}};
      out[layer(i) + names[k] + suffix + ".bias"] = {{D}, {b.begin() + long(k * d), b.begin() + long((k + 1) * d)}};
    }
  }
}
// Hugging Face ViT's and DINOv2's names of them.
const char* const kHfViTQkv[3] = {"attention.attention.query", "attention.attention.key", "attention.attention.value"};
}  // namespace

TensorMap to_hf_layout(const TensorMap& t, int64_t depth, int64_t D) {
  const auto layer = [](int64_t i) { return "vit.encoder.layer." + std::to_string(i) + "."; };
  TensorMap hf = rename(t, depth,
                        {{"cls_token", "vit.embeddings.cls_token"},
                         {"pos_embed", "vit.embeddings.position_embeddings"},
                         {"patch_embed.proj", "vit.embeddings.patch_embeddings.projection"},
                         {"norm", "vit.layernorm"},
                         {"head", "classifier"}},
                        {{"norm1", "layernorm_before"},
                         {"norm2", "layernorm_after"},
                         {"attn.proj", "attention.output.dense"},
                         {"mlp.fc1", "intermediate.dense"},
                         {"mlp.fc2", "output.dense"}},
                        layer);
  split_qkv(hf, t, depth, D, layer, kHfViTQkv, "");  // Hugging Face splits qkv into query, key and value
  return hf;
}

TensorMap to_torchvision_layout(const TensorMap& t, int64_t depth) {
  return rename(t, depth,
                {{"cls_token", "class_token"},
                 {"pos_embed", "encoder.pos_embedding"},
                 {"patch_embed.proj", "conv_proj"},
                 {"norm", "encoder.ln"},
                 {"head", "heads.head"}},
                {{"norm1", "ln_1"},
                 {"attn.qkv.weight", "self_attention.in_proj_weight"},
                 {"attn.qkv.bias", "self_attention.in_proj_bias"},
                 {"attn.proj", "self_attention.out_proj"},
                 {"norm2", "ln_2"},
                 {"mlp.fc1", "mlp.0"},
                 {"mlp.fc2", "mlp.3"}},
                [](int64_t i) { return "encoder.layers.encoder_layer_" + std::to_string(i) + "."; });
}

TensorMap read_tensors(const std::string& path) {
  SafeTensors st(path);
  TensorMap out;
  for (const auto& [name, view] : st.tensors()) out[name] = {view.shape, st.to_f32(name)};
  return out;
}

namespace {

void add_random(TensorMap& t, std::mt19937& rng, const std::string& n, std::vector<int64_t> shape, float scale,
                float offset = 0.f) {
  size_t count = 1;
  for (auto d : shape) count *= size_t(d);
  t[n] = {shape, random_vector(count, rng, scale, offset)};
}

// A tensor with its leading 1s dropped ([1, 1, D] -> [D], [1, T, D] -> [T, D]).
std::pair<std::vector<int64_t>, std::vector<float>> squeeze(const std::pair<std::vector<int64_t>, std::vector<float>>& v,
                                                           size_t ones) {
  return {std::vector<int64_t>(v.first.begin() + long(ones), v.first.end()), v.second};
}

const Renames kHfEncoderBlock = {{"norm1", "layer_norm1"},
                                 {"attn.proj", "self_attn.out_proj"},
                                 {"norm2", "layer_norm2"},
                                 {"mlp.fc1", "mlp.fc1"},
                                 {"mlp.fc2", "mlp.fc2"}};
const char* const kHfQkv[3] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"};

}  // namespace

void add_layer_scale(TensorMap& t, int64_t depth, int64_t D, uint32_t seed) {
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < depth; ++i)
    for (const char* g : {"ls1.gamma", "ls2.gamma"}) add_random(t, rng, "blocks." + std::to_string(i) + "." + g, {D}, 0.2f, 0.5f);
}

void add_norm_pre(TensorMap& t, int64_t D, uint32_t seed) {
  std::mt19937 rng(seed);
  add_random(t, rng, "norm_pre.weight", {D}, 0.2f, 1.f);
  add_random(t, rng, "norm_pre.bias", {D}, 0.2f);
}

void add_attn_pool(TensorMap& t, int64_t D, int64_t mlp, uint32_t seed) {
  std::mt19937 rng(seed);
  add_random(t, rng, "attn_pool.latent", {1, 1, D}, 0.5f);
  add_random(t, rng, "attn_pool.q.weight", {D, D}, 0.3f);
  add_random(t, rng, "attn_pool.q.bias", {D}, 0.1f);
  add_random(t, rng, "attn_pool.kv.weight", {2 * D, D}, 0.3f);
  add_random(t, rng, "attn_pool.kv.bias", {2 * D}, 0.1f);
  add_random(t, rng, "attn_pool.proj.weight", {D, D}, 0.15f);
  add_random(t, rng, "attn_pool.proj.bias", {D}, 0.1f);
  add_random(t, rng, "attn_pool.norm.weight", {D}, 0.2f, 1.f);
  add_random(t, rng, "attn_pool.norm.bias", {D}, 0.2f);
  add_random(t, rng, "attn_pool.mlp.fc1.weight", {mlp, D}, 0.15f);
  add_random(t, rng, "attn_pool.mlp.fc1.bias", {mlp}, 0.1f);
  add_random(t, rng, "attn_pool.mlp.fc2.weight", {D, mlp}, 0.1f);
  add_random(t, rng, "attn_pool.mlp.fc2.bias", {D}, 0.1f);
}

TensorMap to_openclip_layout(const TensorMap& t, int64_t depth) {
  TensorMap oc = rename(t, depth,
                        {{"patch_embed.proj.weight", "visual.conv1.weight"},
                         {"norm_pre", "visual.ln_pre"},
                         {"norm", "visual.ln_post"}},
                        {{"norm1", "ln_1"},
                         {"attn.qkv.weight", "attn.in_proj_weight"}, {"attn.qkv.bias", "attn.in_proj_bias"},
                         {"attn.proj", "attn.out_proj"},
                         {"norm2", "ln_2"},
                         {"mlp.fc1", "mlp.c_fc"},
                         {"mlp.fc2", "mlp.c_proj"},
                         {"ls1.gamma", "ls_1.gamma"}, {"ls2.gamma", "ls_2.gamma"}},
                        [](int64_t i) { return "visual.transformer.resblocks." + std::to_string(i) + "."; });
  oc["visual.class_embedding"] = squeeze(t.at("cls_token"), 2);
  oc["visual.positional_embedding"] = squeeze(t.at("pos_embed"), 1);
  const auto& [shape, w] = t.at("head.weight");  // [C, D] -> proj [D, C]
  std::vector<float> proj(w.size());
  for (int64_t c = 0; c < shape[0]; ++c)
    for (int64_t d = 0; d < shape[1]; ++d) proj[size_t(d * shape[0] + c)] = w[size_t(c * shape[1] + d)];
  oc["visual.proj"] = {{shape[1], shape[0]}, proj};
  oc["logit_scale"] = {{}, {4.6f}};  // a text tower's tensors beside it are left alone
  oc["token_embedding.weight"] = {{4, shape[0]}, std::vector<float>(size_t(4 * shape[0]), 0.1f)};
  return oc;
}

TensorMap to_hf_dinov2_layout(const TensorMap& t, int64_t depth, int64_t D) {
  const auto layer = [](int64_t i) { return "encoder.layer." + std::to_string(i) + "."; };
  TensorMap hf = rename(t, depth,
                        {{"cls_token", "embeddings.cls_token"},
                         {"pos_embed", "embeddings.position_embeddings"},
                         {"patch_embed.proj", "embeddings.patch_embeddings.projection"},
                         {"norm", "layernorm"}},
                        {{"norm1", "norm1"},
                         {"attn.proj", "attention.output.dense"},
                         {"ls1.gamma", "layer_scale1.lambda1"}, {"ls2.gamma", "layer_scale2.lambda1"},
                         {"norm2", "norm2"},
                         {"mlp.fc1", "mlp.fc1"},
                         {"mlp.fc2", "mlp.fc2"}},
                        layer);
  split_qkv(hf, t, depth, D, layer, kHfViTQkv, "");
  hf["embeddings.mask_token"] = {{1, D}, std::vector<float>(size_t(D), 0.f)};  // for masked training only
  return hf;
}

TensorMap to_hf_clip_layout(const TensorMap& t, int64_t depth, int64_t D) {
  const auto layer = [](int64_t i) { return "vision_model.encoder.layers." + std::to_string(i) + "."; };
  TensorMap hf = rename(t, depth,
                        {{"patch_embed.proj.weight", "vision_model.embeddings.patch_embedding.weight"},
                         {"norm_pre", "vision_model.pre_layrnorm"},
                         {"fc_norm", "vision_model.post_layernorm"},
                         {"head.weight", "visual_projection.weight"}},
                        kHfEncoderBlock, layer);
  split_qkv(hf, t, depth, D, layer, kHfQkv, "");
  hf["vision_model.embeddings.class_embedding"] = squeeze(t.at("cls_token"), 2);
  hf["vision_model.embeddings.position_embedding.weight"] = squeeze(t.at("pos_embed"), 1);
  return hf;
}

TensorMap to_hf_siglip_layout(const TensorMap& t, int64_t depth, int64_t D) {
  const auto layer = [](int64_t i) { return "vision_model.encoder.layers." + std::to_string(i) + "."; };
  TensorMap hf = rename(t, depth,
                        {{"patch_embed.proj", "vision_model.embeddings.patch_embedding"},
                         {"norm", "vision_model.post_layernorm"},
                         {"attn_pool.latent", "vision_model.head.probe"},
                         {"attn_pool.proj", "vision_model.head.attention.out_proj"},
                         {"attn_pool.norm", "vision_model.head.layernorm"},
                         {"attn_pool.mlp.fc1", "vision_model.head.mlp.fc1"},
                         {"attn_pool.mlp.fc2", "vision_model.head.mlp.fc2"}},
                        kHfEncoderBlock, layer);
  split_qkv(hf, t, depth, D, layer, kHfQkv, "");
  hf["vision_model.embeddings.position_embedding.weight"] = squeeze(t.at("pos_embed"), 1);
  // nn.MultiheadAttention's in_proj: q, k, v stacked, timm's q then kv.
  for (const char* p : {"weight", "bias"}) {
    auto stacked = t.at(std::string("attn_pool.q.") + p);
    const auto& kv = t.at(std::string("attn_pool.kv.") + p);
    stacked.first[0] += kv.first[0];
    stacked.second.insert(stacked.second.end(), kv.second.begin(), kv.second.end());
    hf[std::string("vision_model.head.attention.in_proj_") + p] = stacked;
  }
  return hf;
}

}  // namespace vit::test

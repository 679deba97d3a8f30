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
  nlohmann::json cfg = {{"architecture", "vit_test"},
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
// `top` renames whole names, `block` renames what follows "blocks.{i}." to what follows prefix(i).
using Renames = std::vector<std::pair<std::string, std::string>>;
TensorMap rename(const TensorMap& t, int64_t depth, const Renames& top, const Renames& block,
                 const std::function<std::string(int64_t)>& prefix) {
  TensorMap out;
  for (const auto& [from, to] : top)
    if (t.count(from)) out[to] = t.at(from);
  for (int64_t i = 0; i < depth; ++i)
    for (const auto& [from, to] : block) {
      const std::string name = "blocks." + std::to_string(i) + "." + from;
      if (t.count(name)) out[prefix(i) + to] = t.at(name);
    }
  return out;
}
}  // namespace

TensorMap to_hf_layout(const TensorMap& t, int64_t depth, int64_t D) {
  const auto layer = [](int64_t i) { return "vit.encoder.layer." + std::to_string(i) + "."; };
  TensorMap hf = rename(t, depth,
                        {{"cls_token", "vit.embeddings.cls_token"},
                         {"pos_embed", "vit.embeddings.position_embeddings"},
                         {"patch_embed.proj.weight", "vit.embeddings.patch_embeddings.projection.weight"},
                         {"patch_embed.proj.bias", "vit.embeddings.patch_embeddings.projection.bias"},
                         {"norm.weight", "vit.layernorm.weight"},
                         {"norm.bias", "vit.layernorm.bias"},
                         {"head.weight", "classifier.weight"},
                         {"head.bias", "classifier.bias"}},
                        {{"norm1.weight", "layernorm_before.weight"},
                         {"norm1.bias", "layernorm_before.bias"},
                         {"norm2.weight", "layernorm_after.weight"},
                         {"norm2.bias", "layernorm_after.bias"},
                         {"attn.proj.weight", "attention.output.dense.weight"},
                         {"attn.proj.bias", "attention.output.dense.bias"},
                         {"mlp.fc1.weight", "intermediate.dense.weight"},
                         {"mlp.fc1.bias", "intermediate.dense.bias"},
                         {"mlp.fc2.weight", "output.dense.weight"},
                         {"mlp.fc2.bias", "output.dense.bias"}},
                        layer);
  for (int64_t i = 0; i < depth; ++i) {  // Hugging Face splits qkv into query, key and value
    const std::string p = "blocks." + std::to_string(i) + ".", q = layer(i);
    const auto& w = t.at(p + "attn.qkv.weight").second;
    const auto& b = t.at(p + "attn.qkv.bias").second;
    const size_t d = size_t(D);
    const char* names[3] = {"query", "key", "value"};
    for (size_t k = 0; k < 3; ++k) {
      hf[q + "attention.attention." + names[k] + ".weight"] = {{D, D}, {w.begin() + long(k * d * d), w.begin() + long((k + 1) * d * d)}};
      hf[q + "attention.attention." + names[k] + ".bias"] = {{D}, {b.begin() + long(k * d), b.begin() + long((k + 1) * d)}};
    }
  }
  return hf;
}

TensorMap to_torchvision_layout(const TensorMap& t, int64_t depth) {
  return rename(t, depth,
                {{"cls_token", "class_token"},
                 {"pos_embed", "encoder.pos_embedding"},
                 {"patch_embed.proj.weight", "conv_proj.weight"},
                 {"patch_embed.proj.bias", "conv_proj.bias"},
                 {"norm.weight", "encoder.ln.weight"},
                 {"norm.bias", "encoder.ln.bias"},
                 {"head.weight", "heads.head.weight"},
                 {"head.bias", "heads.head.bias"}},
                {{"norm1.weight", "ln_1.weight"},
                 {"norm1.bias", "ln_1.bias"},
                 {"attn.qkv.weight", "self_attention.in_proj_weight"},
                 {"attn.qkv.bias", "self_attention.in_proj_bias"},
                 {"attn.proj.weight", "self_attention.out_proj.weight"},
                 {"attn.proj.bias", "self_attention.out_proj.bias"},
                 {"norm2.weight", "ln_2.weight"},
                 {"norm2.bias", "ln_2.bias"},
                 {"mlp.fc1.weight", "mlp.0.weight"},
                 {"mlp.fc1.bias", "mlp.0.bias"},
                 {"mlp.fc2.weight", "mlp.3.weight"},
                 {"mlp.fc2.bias", "mlp.3.bias"}},
                [](int64_t i) { return "encoder.layers.encoder_layer_" + std::to_string(i) + "."; });
}

TensorMap read_tensors(const std::string& path) {
  SafeTensors st(path);
  TensorMap out;
  for (const auto& [name, view] : st.tensors()) out[name] = {view.shape, st.to_f32(name)};
  return out;
}

}  // namespace vit::test

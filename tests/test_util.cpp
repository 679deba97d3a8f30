// Test helpers; see test_util.h.
#include "test_util.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace vit::test {

std::string shared_data() {
  if (const char* e = std::getenv("VIT_SHARED_DATA")) return e;
  return VIT_SOURCE_DIR "/../shared/data";
}

bool have_shared_data() { return std::filesystem::exists(shared_data() + "/models/deit_tiny_patch16_224.fb_in1k"); }

bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "vit-test-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

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

Golden read_golden(const SafeTensors& st, const std::string& name) {
  const TensorView& t = st.get(name);
  Golden g;
  g.shape = t.shape;
  if (t.dtype == DType::U8) g.u8.assign(t.data, t.data + t.nbytes);
  else g.f32 = st.to_f32(name);
  return g;
}

}  // namespace vit::test

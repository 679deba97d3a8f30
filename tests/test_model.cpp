// A tiny random ViT written to a temporary .safetensors, loaded by the real loader and run end to end
// against the naive reference forward; the layouts and variants timm has; and the loader's errors.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "models/vit.h"
#include "reference.h"

namespace vit::test {
namespace {

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

std::vector<float> run(ViT& m, const std::vector<float>& images, int64_t B) {
  std::vector<float> out(size_t(B * m.config().classes));
  m.forward(images.data(), B, out.data());
  return out;
}

class TinyVariant : public ::testing::TestWithParam<TinySpec> {};

TEST_P(TinyVariant, MatchesNaiveForward) {
  const TinySpec s = GetParam();
  TempDir d;
  write_tiny_model(d.path(), s, 7);
  ViT m = ViT::load(d.path());
  EXPECT_EQ(m.config().tokens(), (s.img / s.patch) * (s.img / s.patch) + s.class_token + s.dist_token);
  std::mt19937 rng(11);
  const int64_t B = 3;
  const auto images = random_vector(size_t(B * 3 * s.img * s.img), rng);
  const auto want = ref_vit_forward(tiny_vit_tensors(s, 7), s, images, B);
  EXPECT_LT(max_abs_diff(run(m, images, B), want), 1e-3f);
}

TinySpec spec(bool cls, bool dist, bool nec, bool fcn, int64_t img = 32, int64_t patch = 8) {
  TinySpec s;
  s.class_token = cls;
  s.dist_token = dist;
  s.no_embed_class = nec;
  s.fc_norm = fcn;
  s.img = img;
  s.patch = patch;
  return s;
}

INSTANTIATE_TEST_SUITE_P(Layouts, TinyVariant,
                         ::testing::Values(spec(true, false, false, false),       // ViT / DeiT, class token
                                           spec(true, true, false, false),        // DeiT distilled
                                           spec(true, false, true, false),        // no_embed_class
                                           spec(true, false, false, true),        // avg pool + fc_norm
                                           spec(false, false, false, true),       // no class token
                                           spec(true, false, false, false, 42, 6)));  // patch 6, 49 patches

TEST(TinyModel, BatchOfEightEqualsOneAtATime) {
  TempDir d;
  TinySpec s;
  write_tiny_model(d.path(), s);
  ViT m = ViT::load(d.path());
  std::mt19937 rng(2);
  const size_t per = size_t(3 * s.img * s.img);
  const auto images = random_vector(per * 8, rng);
  const auto all = run(m, images, 8);
  for (int i = 0; i < 8; ++i) {
    const std::vector<float> one(images.begin() + i * per, images.begin() + (i + 1) * per);
    const auto got = run(m, one, 1);
    const std::vector<float> row(all.begin() + i * s.classes, all.begin() + (i + 1) * s.classes);
    EXPECT_LT(max_abs_diff(got, row), 1e-4f);
  }
}

TEST(TinyModel, HuggingFaceLayoutGivesTheSameLogits) {
  TempDir timm_dir, hf_dir;
  TinySpec s;
  write_tiny_model(timm_dir.path(), s, 3);
  const TensorMap t = tiny_vit_tensors(s, 3);
  TensorMap hf;
  auto put = [&](const std::string& from, const std::string& to) { hf[to] = t.at(from); };
  put("cls_token", "vit.embeddings.cls_token");
  put("pos_embed", "vit.embeddings.position_embeddings");
  put("patch_embed.proj.weight", "vit.embeddings.patch_embeddings.projection.weight");
  put("patch_embed.proj.bias", "vit.embeddings.patch_embeddings.projection.bias");
  for (int64_t i = 0; i < s.depth; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".", q = "vit.encoder.layer." + std::to_string(i) + ".";
    put(p + "norm1.weight", q + "layernorm_before.weight");
    put(p + "norm1.bias", q + "layernorm_before.bias");
    put(p + "norm2.weight", q + "layernorm_after.weight");
    put(p + "norm2.bias", q + "layernorm_after.bias");
    put(p + "attn.proj.weight", q + "attention.output.dense.weight");
    put(p + "attn.proj.bias", q + "attention.output.dense.bias");
    put(p + "mlp.fc1.weight", q + "intermediate.dense.weight");
    put(p + "mlp.fc1.bias", q + "intermediate.dense.bias");
    put(p + "mlp.fc2.weight", q + "output.dense.weight");
    put(p + "mlp.fc2.bias", q + "output.dense.bias");
    const auto& w = t.at(p + "attn.qkv.weight").second;
    const auto& b = t.at(p + "attn.qkv.bias").second;
    const size_t D = size_t(s.D);
    const char* names[3] = {"query", "key", "value"};
    for (size_t k = 0; k < 3; ++k) {
      hf[q + "attention.attention." + names[k] + ".weight"] = {{s.D, s.D}, {w.begin() + k * D * D, w.begin() + (k + 1) * D * D}};
      hf[q + "attention.attention." + names[k] + ".bias"] = {{s.D}, {b.begin() + k * D, b.begin() + (k + 1) * D}};
    }
  }
  put("norm.weight", "vit.layernorm.weight");
  put("norm.bias", "vit.layernorm.bias");
  put("head.weight", "classifier.weight");
  put("head.bias", "classifier.bias");
  write_tensors(hf_dir.file("model.safetensors"), hf);
  nlohmann::json cfg = {{"model_type", "vit"}, {"num_attention_heads", s.heads}, {"layer_norm_eps", 1e-6},
                        {"image_size", s.img}, {"hidden_act", "gelu"}};
  write_file(hf_dir.file("config.json"), cfg.dump());
  ViT a = ViT::load(timm_dir.path()), b = ViT::load(hf_dir.path());
  std::mt19937 rng(4);
  const auto images = random_vector(size_t(2 * 3 * s.img * s.img), rng);
  EXPECT_LT(max_abs_diff(run(a, images, 2), run(b, images, 2)), 1e-5f);
  EXPECT_EQ(b.config().pre.crop_mode, "squash");  // Hugging Face's processor resizes straight to the input size
}

TEST(TinyModel, TorchvisionLayoutGivesTheSameLogits) {
  TempDir timm_dir, tv_dir;
  TinySpec s;
  s.D = 64;  // torchvision checkpoints carry no config: heads = width / 64
  s.heads = 1;
  write_tiny_model(timm_dir.path(), s, 5);
  const TensorMap t = tiny_vit_tensors(s, 5);
  TensorMap tv;
  auto put = [&](const std::string& from, const std::string& to) { tv[to] = t.at(from); };
  put("cls_token", "class_token");
  put("pos_embed", "encoder.pos_embedding");
  put("patch_embed.proj.weight", "conv_proj.weight");
  put("patch_embed.proj.bias", "conv_proj.bias");
  for (int64_t i = 0; i < s.depth; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".", q = "encoder.layers.encoder_layer_" + std::to_string(i) + ".";
    put(p + "norm1.weight", q + "ln_1.weight");
    put(p + "norm1.bias", q + "ln_1.bias");
    put(p + "attn.qkv.weight", q + "self_attention.in_proj_weight");
    put(p + "attn.qkv.bias", q + "self_attention.in_proj_bias");
    put(p + "attn.proj.weight", q + "self_attention.out_proj.weight");
    put(p + "attn.proj.bias", q + "self_attention.out_proj.bias");
    put(p + "norm2.weight", q + "ln_2.weight");
    put(p + "norm2.bias", q + "ln_2.bias");
    put(p + "mlp.fc1.weight", q + "mlp.0.weight");
    put(p + "mlp.fc1.bias", q + "mlp.0.bias");
    put(p + "mlp.fc2.weight", q + "mlp.3.weight");
    put(p + "mlp.fc2.bias", q + "mlp.3.bias");
  }
  put("norm.weight", "encoder.ln.weight");
  put("norm.bias", "encoder.ln.bias");
  put("head.weight", "heads.head.weight");
  put("head.bias", "heads.head.bias");
  write_tensors(tv_dir.file("vit_b_16.safetensors"), tv);
  ViT a = ViT::load(timm_dir.path()), b = ViT::load(tv_dir.file("vit_b_16.safetensors"));
  std::mt19937 rng(6);
  const auto images = random_vector(size_t(2 * 3 * s.img * s.img), rng);
  EXPECT_LT(max_abs_diff(run(a, images, 2), run(b, images, 2)), 1e-5f);
  EXPECT_EQ(b.config().pre.interpolation, Filter::Bilinear);  // torchvision's resize 256 / crop 224
  EXPECT_DOUBLE_EQ(b.config().pre.crop_pct, 0.875);
}

TEST(TinyModel, NoConfigUsesDefaults) {
  TempDir d;
  TinySpec s;
  write_tensors(d.file("weights.safetensors"), tiny_vit_tensors(s, 1));
  ViT m = ViT::load(d.file("weights.safetensors"));
  EXPECT_EQ(m.config().heads, 1);  // width 32 / 64, at least one
  EXPECT_EQ(m.config().img_h, 32);
  EXPECT_EQ(m.config().classes, 10);
}

void expect_load_error(const std::string& model, const std::string& fragment, const std::string& config = "") {
  try {
    ViT::load(model, config);
    FAIL() << "no error, expected: " << fragment;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(LoaderErrors, MissingTensor) {
  TempDir d;
  TinySpec s;
  TensorMap t = tiny_vit_tensors(s, 1);
  t.erase("blocks.1.mlp.fc2.bias");
  write_tensors(d.file("model.safetensors"), t);
  expect_load_error(d.file("model.safetensors"), "model.safetensors: missing tensor blocks.1.mlp.fc2.bias");
}

TEST(LoaderErrors, WrongShape) {
  TempDir d;
  TinySpec s;
  TensorMap t = tiny_vit_tensors(s, 1);
  t["blocks.1.attn.qkv.weight"].first = {64, 48};
  write_tensors(d.file("model.safetensors"), t);
  expect_load_error(d.file("model.safetensors"), "blocks.1.attn.qkv.weight has shape [64,48], expected [96,32]");
}

TEST(LoaderErrors, UnusedTensor) {
  TempDir d;
  TinySpec s;
  TensorMap t = tiny_vit_tensors(s, 1);
  t["blocks.0.attn.extra_scale"] = {{1}, {1.f}};
  write_tensors(d.file("model.safetensors"), t);
  expect_load_error(d.file("model.safetensors"), "does not use: blocks.0.attn.extra_scale");
}

TEST(LoaderErrors, NotAViT) {
  TempDir d;
  write_tensors(d.file("model.safetensors"), {{"conv1.weight", {{2, 2}, {1, 2, 3, 4}}}});
  expect_load_error(d.file("model.safetensors"), "not a ViT checkpoint");
}

TEST(LoaderErrors, InvalidConfigJson) {
  TempDir d;
  write_tiny_model(d.path(), TinySpec{});
  write_file(d.file("config.json"), "{\"architecture\": ");
  expect_load_error(d.path(), "config.json: invalid JSON");
}

TEST(LoaderErrors, ConfigWithBadValues) {
  TempDir d;
  write_tiny_model(d.path(), TinySpec{});
  write_file(d.file("bad.json"), R"({"architecture": "x", "model_args": {"num_heads": 5}})");
  expect_load_error(d.path(), "5 heads do not divide width 32", d.file("bad.json"));
  write_file(d.file("bad2.json"), R"({"pretrained_cfg": {"interpolation": "cubic-ish"}})");
  expect_load_error(d.path(), "unknown interpolation 'cubic-ish'", d.file("bad2.json"));
}

TEST(LoaderErrors, MissingModel) {
  expect_load_error("/nonexistent/model.safetensors", "/nonexistent/model.safetensors: no such file");
  TempDir d;
  expect_load_error(d.path(), "folder has no model.safetensors");
}

}  // namespace
}  // namespace vit::test

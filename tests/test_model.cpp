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
  const TensorMap hf = to_hf_layout(t, s.depth, s.D);
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
  const TensorMap tv = to_torchvision_layout(tiny_vit_tensors(s, 5), s.depth);
  write_tensors(tv_dir.file("vit_b_16.safetensors"), tv);
  ViT a = ViT::load(timm_dir.path()), b = ViT::load(tv_dir.file("vit_b_16.safetensors"));
  std::mt19937 rng(6);
  const auto images = random_vector(size_t(2 * 3 * s.img * s.img), rng);
  EXPECT_LT(max_abs_diff(run(a, images, 2), run(b, images, 2)), 1e-5f);
  EXPECT_EQ(b.config().pre.interpolation, Filter::Bilinear);  // torchvision's resize 256 / crop 224
  EXPECT_DOUBLE_EQ(b.config().pre.crop_pct, 0.875);
}

TEST(TinyModel, ConfigHeadsAreUsedEvenWhenTheyEqualTheDefault) {
  // num_heads 3 at width 48: width / 64 would say 1.
  TempDir d;
  TinySpec s;
  s.D = 48;
  s.heads = 3;
  write_tiny_model(d.path(), s, 8);
  ViT m = ViT::load(d.path());
  EXPECT_EQ(m.config().heads, 3);
  std::mt19937 rng(9);
  const auto images = random_vector(size_t(3 * s.img * s.img), rng);
  EXPECT_LT(max_abs_diff(run(m, images, 1), ref_vit_forward(tiny_vit_tensors(s, 8), s, images, 1)), 1e-3f);
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

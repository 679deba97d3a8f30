// A tiny random ViT written to a temporary .safetensors, loaded by the real loader and run end to end
// against the naive reference forward; the layouts and variants timm has; and the loader's errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/explain/picture.h"
#include "vit/error.h"
#include "vit/explain.h"
#include "vit/load_options.h"
#include "vit/vit.h"
#include "models/families.h"
#include "models/network.h"
#include "reference.h"

namespace vit::test {
namespace {

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
                                           spec(true, false, false, false, 42, 6)),  // patch 6, 49 patches
                         [](const ::testing::TestParamInfo<TinySpec>& i) {
                           const TinySpec& s = i.param;
                           return std::string(s.class_token ? "cls" : "nocls") + (s.dist_token ? "_dist" : "") +
                                  (s.no_embed_class ? "_noembedclass" : "") + (s.fc_norm ? "_fcnorm" : "") + "_patch" +
                                  std::to_string(s.patch);
                         });

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

// vit.h: independent Plans of one model may run on different threads at once.
TEST(TinyModel, TwoPlansOnTwoThreadsGiveTheirOwnAnswers) {
  TempDir d;
  TinySpec s;
  write_tiny_model(d.path(), s);
  const ViT m = ViT::load(d.path());
  std::mt19937 rng(12);
  const size_t per = size_t(3 * s.img * s.img);
  const auto images = random_vector(per * 3, rng);
  auto plan_a = m.make_plan(2), plan_b = m.make_plan(3);
  const auto run_plan = [&](ViT::Plan& p) {
    std::copy(images.begin(), images.begin() + long(per) * p.batch(), p.input());
    const float* y = p.run();
    return std::vector<float>(y, y + p.batch() * s.classes);
  };
  const auto want_a = run_plan(*plan_a), want_b = run_plan(*plan_b);
  std::vector<float> got_a, got_b;
  bool same_a = true, same_b = true;
  std::thread ta([&] {
    for (int i = 0; i < 50; ++i) same_a = same_a && run_plan(*plan_a) == want_a;
  });
  std::thread tb([&] {
    for (int i = 0; i < 50; ++i) same_b = same_b && run_plan(*plan_b) == want_b;
  });
  ta.join();
  tb.join();
  EXPECT_TRUE(same_a);
  EXPECT_TRUE(same_b);
  const std::vector<float> a_rows(want_b.begin(), want_b.begin() + 2 * s.classes);
  EXPECT_LT(max_abs_diff(want_a, a_rows), 1e-5f);  // the same images in either plan
}

// int8: an image's logits are the same, bit for bit, alone and inside batches of other images (its
// grids are its own; integer sums are exact). Two seeds' images, in several batch sizes and places.
TEST(TinyModel, Int8ImageAloneEqualsInsideAnyBatch) {
  TempDir d;
  TinySpec s;
  write_tiny_model(d.path(), s);
  ViT m = ViT::load(d.path(), "", 0, Precision::Int8);
  std::mt19937 rng(21);
  const size_t per = size_t(3 * s.img * s.img);
  const auto images = random_vector(per * 5, rng);
  const auto all = run(m, images, 5);
  for (int64_t B : {1, 2, 3}) {
    for (int64_t first = 0; first + B <= 5; ++first) {
      const std::vector<float> part(images.begin() + long(first * per), images.begin() + long((first + B) * per));
      const auto got = run(m, part, B);
      for (int64_t i = 0; i < B * s.classes; ++i)
        ASSERT_EQ(got[size_t(i)], all[size_t(first * s.classes + i)]) << "batch " << B << " from image " << first;
    }
  }
}

// int8 and f32 on the same model and images: the same answers within int8's rounding.
TEST(TinyModel, Int8AgreesWithF32) {
  TempDir d;
  TinySpec s;
  write_tiny_model(d.path(), s, 4);
  ViT f = ViT::load(d.path()), q = ViT::load(d.path(), "", 0, Precision::Int8);
  EXPECT_EQ(q.precision(), Precision::Int8);
  EXPECT_LT(q.weight_bytes(), f.weight_bytes());
  std::mt19937 rng(5);
  const auto images = random_vector(size_t(4 * 3 * s.img * s.img), rng);
  const auto a = run(f, images, 4), b = run(q, images, 4);
  float mag = 0;
  for (float v : a) mag = std::max(mag, std::fabs(v));
  EXPECT_LT(max_abs_diff(a, b), 0.1f * mag);  // a random model's logits are close together: a loose check;
}                                             // test_goldens.cpp measures int8 on the real model

TEST(LoaderErrors, Bf16WithoutTheInstructionsIsRefused) {
  if (cpu_isa().bf16) GTEST_SKIP() << "this CPU has bf16 (" << cpu_isa().name << "): nothing to refuse";
  TempDir d;
  write_tiny_model(d.path(), TinySpec{});
  expect_error([&] { ViT::load(d.path(), "", 0, Precision::BF16); },
               "precision bf16 needs a CPU with avx512_bf16 or AMX; oneDNN runs this one as " + cpu_isa().name);
}

// The parameter count the loader's walk gives for the loaded config is what the checkpoint holds.
TEST(TinyModel, ParameterCountMatchesTheTensors) {
  for (const TinySpec& s : {spec(true, false, false, false), spec(true, true, false, false),
                            spec(true, false, true, false), spec(false, false, false, true)}) {
    TempDir d;
    write_tiny_model(d.path(), s);
    int64_t stored = 0;
    for (const auto& [name, t] : tiny_vit_tensors(s, 1)) stored += int64_t(t.second.size());
    EXPECT_EQ(ViT::parameters(ViT::load(d.path()).config()), stored);
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
  EXPECT_EQ(b.config().pre.crop_mode, CropMode::Squash);  // Hugging Face's processor resizes straight to the input size
}

// The same weights renamed into OpenCLIP's and Hugging Face's DINOv2, CLIP and SigLIP layouts (each with its own
// settings written to match) give the same features and outputs as in timm's: the name tables, the class
// token's and the position table's shapes, OpenCLIP's transposed proj, SigLIP's stacked in_proj.
struct LayoutCase {
  const char* name;
  std::function<void(TensorMap&, TinySpec&, nlohmann::json&)> timm;        // the timm side's tensors and config
  std::function<TensorMap(const TensorMap&, const TinySpec&)> convert;     // into the layout
  const char* file;                                                         // its weights file
  const char* config_file;
  nlohmann::json config;
};

void zero(TensorMap& t, const std::string& n) { std::fill(t[n].second.begin(), t[n].second.end(), 0.f); }
void no_head(TensorMap& t, TinySpec& s, nlohmann::json& cfg) {
  t.erase("head.weight");
  t.erase("head.bias");
  s.classes = 0;
  cfg["num_classes"] = 0;
}

// The layouts of OtherLayoutsGiveTheSameOutputs: what each layout's model has or lacks beside the tiny timm
// model, its writer, and its config.
std::vector<LayoutCase> layout_cases() {
  return {
      {"OpenCLIP",
       [](TensorMap& t, TinySpec& s, nlohmann::json&) {
         zero(t, "patch_embed.proj.bias");  // OpenCLIP's conv1 and proj have no biases
         zero(t, "head.bias");
         add_norm_pre(t, s.D, 11);
         add_layer_scale(t, s.depth, s.D, 12);
       },
       [](const TensorMap& t, const TinySpec& s) { return to_openclip_layout(t, s.depth); },
       "open_clip_model.safetensors", "open_clip_config.json",
       {{"model_cfg", {{"embed_dim", 10}, {"vision_cfg", {{"width", 32}, {"layers", 2}, {"head_width", 16},
                                                           {"patch_size", 8}, {"image_size", 32}}}}}}},
      {"Hugging Face Dinov2Model",
       [](TensorMap& t, TinySpec& s, nlohmann::json& cfg) {
         no_head(t, s, cfg);
         add_layer_scale(t, s.depth, s.D, 13);
       },
       [](const TensorMap& t, const TinySpec& s) { return to_hf_dinov2_layout(t, s.depth, s.D); },
       "model.safetensors", "config.json",
       {{"model_type", "dinov2"}, {"hidden_size", 32}, {"num_attention_heads", 2}, {"mlp_ratio", 2},
        {"image_size", 32}, {"patch_size", 8}, {"layer_norm_eps", 1e-6}}},
      {"Hugging Face CLIP",
       [](TensorMap& t, TinySpec& s, nlohmann::json&) {
         t["fc_norm.weight"] = t["norm.weight"];  // post_layernorm: on the pooled class token only
         t["fc_norm.bias"] = t["norm.bias"];
         t.erase("norm.weight");
         t.erase("norm.bias");
         zero(t, "patch_embed.proj.bias");
         zero(t, "head.bias");
         add_norm_pre(t, s.D, 14);
       },
       [](const TensorMap& t, const TinySpec& s) { return to_hf_clip_layout(t, s.depth, s.D); },
       "model.safetensors", "config.json",
       {{"model_type", "clip_vision_model"}, {"num_attention_heads", 2}, {"projection_dim", 10}, {"image_size", 32},
        {"patch_size", 8}, {"hidden_act", "gelu"}}},
      {"Hugging Face SigLIP",
       [](TensorMap& t, TinySpec& s, nlohmann::json& cfg) {
         no_head(t, s, cfg);
         add_attn_pool(t, s.D, 48, 15);
         cfg["global_pool"] = "map";
       },
       [](const TensorMap& t, const TinySpec& s) { return to_hf_siglip_layout(t, s.depth, s.D); },
       "model.safetensors", "config.json",
       {{"model_type", "siglip_vision_model"}, {"num_attention_heads", 2}, {"image_size", 32}, {"patch_size", 8},
        {"hidden_act", "gelu"}}},
  };
}

TEST(TinyModel, OtherLayoutsGiveTheSameOutputs) {
  const std::vector<LayoutCase> cases = layout_cases();
  for (const LayoutCase& c : cases) {
    TempDir timm_dir, other_dir;
    TinySpec s;
    s.class_token = std::string(c.name) != "Hugging Face SigLIP";
    TensorMap t = tiny_vit_tensors(s, 21);
    nlohmann::json cfg = {{"architecture", "vit_custom"}, {"num_classes", s.classes},
                          {"global_pool", s.class_token ? "token" : "avg"}, {"model_args", {{"num_heads", s.heads}}}};
    c.timm(t, s, cfg);
    if (std::string(c.name) == "Hugging Face CLIP") cfg["global_pool"] = "token";
    write_tensors(timm_dir.file("model.safetensors"), t);
    write_file(timm_dir.file("config.json"), cfg.dump());
    write_tensors(other_dir.file(c.file), c.convert(t, s));
    write_file(other_dir.file(c.config_file), c.config.dump());
    ViT a = ViT::load(timm_dir.path()), b = ViT::load(other_dir.path());
    EXPECT_EQ(b.config().heads, 2) << c.name;
    EXPECT_EQ(b.config().eps, a.config().eps) << c.name;
    std::mt19937 rng(22);
    const auto images = random_vector(size_t(2 * 3 * s.img * s.img), rng);
    auto pa = a.make_plan(2), pb = b.make_plan(2);
    std::memcpy(pa->input(), images.data(), images.size() * sizeof(float));
    std::memcpy(pb->input(), images.data(), images.size() * sizeof(float));
    pa->run();
    pb->run();
    EXPECT_LT(max_abs_diff(pa->features(), pb->features(), size_t(2 * s.D)), 1e-5f) << c.name;
    if (s.classes) EXPECT_LT(max_abs_diff(pa->logits(), pb->logits(), size_t(2 * s.classes)), 1e-5f) << c.name;
    EXPECT_NE(b.config().stored_as.find(std::string(c.name) == "OpenCLIP" ? "OpenCLIP names" : "Hugging Face"),
              std::string::npos) << b.config().stored_as;
  }
}

// torchvision's names read as timm's. Without a config only torchvision's own ViTs run (vit_b_*, vit_l_*, vit_h_14,
// known by their width, MLP and depth, which say their heads); a torchvision checkpoint of another shape needs one.
TEST(TinyModel, TorchvisionLayoutGivesTheSameLogits) {
  TempDir timm_dir, tv_dir;
  TinySpec s;
  s.D = 64;
  s.heads = 1;
  write_tiny_model(timm_dir.path(), s, 5);
  const TensorMap tv = to_torchvision_layout(tiny_vit_tensors(s, 5), s.depth);
  write_tensors(tv_dir.file("vit_b_16.safetensors"), tv);
  expect_error([&] { ViT::load(tv_dir.file("vit_b_16.safetensors")); },
               "a torchvision checkpoint of width 64, MLP 64 and depth 2 is none of torchvision's ViTs (vit_b_*, "
               "vit_l_*, vit_h_14), and the number of heads is not in the tensors: give --config");
  ViT a = ViT::load(timm_dir.path()), b = ViT::load(tv_dir.file("vit_b_16.safetensors"), timm_dir.file("config.json"));
  std::mt19937 rng(6);
  const auto images = random_vector(size_t(2 * 3 * s.img * s.img), rng);
  EXPECT_LT(max_abs_diff(run(a, images, 2), run(b, images, 2)), 1e-5f);
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

// A config that names an architecture without model_args.num_heads runs with that architecture's heads, as
// timm builds it: vit_base_patch16_gap_224 has 16 (width / 64 would say 12, here 1), SigLIP so400m 16 (not 18).
TEST(TinyModel, AnArchitecturesOwnHeadsWhenItsConfigNamesNone) {
  TempDir d;
  TinySpec s;
  write_tensors(d.file("model.safetensors"), tiny_vit_tensors(s, 2));
  write_file(d.file("config.json"), R"({"architecture": "vit_base_patch16_gap_224", "global_pool": "token"})");
  const ViTConfig c = ViT::load(d.path()).config();
  EXPECT_EQ(c.heads, 16);
  EXPECT_EQ(c.origin.heads, "timm's defaults for vit_base_patch16_gap_224");
  EXPECT_EQ(config_for_arch("vit_so400m_patch14_siglip_224").heads, 16);
  EXPECT_EQ(config_for_arch("vit_giant_patch14_clip_224").heads, 16);
}

// What the tensors cannot say is never guessed: without a config, a checkpoint in timm's (or Hugging Face ViT's)
// names is refused asking for --arch or --config, one in another layout for its own config; a config that names
// no architecture must name the heads.
TEST(TinyModel, WhatTheTensorsCannotSayIsRefused) {
  TempDir d;
  const TinySpec s;
  const TensorMap t = tiny_vit_tensors(s, 1);
  const std::string unknown = "no config.json: the number of heads, the block order (pre- or post-norm), the MLP's "
                              "activation, the norms' eps, the pooling, any rotary embedding and the preprocessing are "
                              "not in the tensors; ";
  write_tensors(d.file("weights.safetensors"), t);
  expect_error([&] { ViT::load(d.file("weights.safetensors")); },
               d.file("weights.safetensors") + ": " + unknown + "name the architecture (--arch, e.g. --arch "
               "vit_base_patch16_224: any that docs/MODELS.md lists as running) or give --config");
  write_tensors(d.file("hf.safetensors"), to_hf_layout(t, s.depth, s.D));
  expect_error([&] { ViT::load(d.file("hf.safetensors")); }, unknown + "name the architecture (--arch");
  write_tensors(d.file("clip.safetensors"), to_hf_clip_layout(t, s.depth, s.D));
  expect_error([&] { ViT::load(d.file("clip.safetensors")); },
               unknown + "give its config (--config: the config.json published with the weights)");
  write_tensors(d.file("openclip.safetensors"), to_openclip_layout(t, s.depth));
  expect_error([&] { ViT::load(d.file("openclip.safetensors")); }, "(--config: the open_clip_config.json published");
  write_file(d.file("custom.json"), R"({"architecture": "vit_custom", "num_classes": 10})");
  expect_error([&] { ViT::load(d.file("weights.safetensors"), d.file("custom.json")); },
               "custom.json: model_args.num_heads is missing, and the config names no architecture that says it");
}

// --arch NAME: what timm's create_model(NAME) and its default pretrained config say, for a checkpoint in timm's
// names of that architecture (any depth): vit_tiny_patch16_224's 3 heads (width / 64 would be 3 as well: its
// mean and std 0.5 and crop 0.9 tell), the same logits as a config giving its settings. Its tensors must be that
// architecture's, else both shapes are named; an architecture the engine does not run gets its reason.
TEST(TinyModel, ArchNamesWhatTheTensorsCannotSay) {
  TempDir d;
  TinySpec s;
  s.D = 192;
  s.depth = 1;
  s.heads = 3;
  s.mlp = 768;
  s.patch = 16;
  s.img = 224;
  s.classes = 1000;
  const TensorMap t = tiny_vit_tensors(s, 3);
  write_tensors(d.file("tiny.safetensors"), t);
  ViT m = ViT::load(d.file("tiny.safetensors"), "", 0, Precision::F32, "vit_tiny_patch16_224");
  const ViTConfig& c = m.config();
  EXPECT_EQ(c.arch, "vit_tiny_patch16_224");
  EXPECT_EQ(c.heads, 3);
  EXPECT_EQ(c.origin.heads, "timm's defaults for vit_tiny_patch16_224 (--arch)");
  EXPECT_EQ(c.pre.mean, (std::array<float, 3>{0.5f, 0.5f, 0.5f}));
  EXPECT_DOUBLE_EQ(c.pre.crop_pct, 0.9);
  EXPECT_EQ(c.pool.kind, Pool::Token);
  std::mt19937 rng(4);
  const auto images = random_vector(size_t(2 * 3 * 224 * 224), rng);
  EXPECT_LT(max_abs_diff(run(m, images, 2), ref_vit_forward(t, s, images, 2)), 1e-3f);
  // Contradicting tensors: another width, another structure (DeiT III's layer scale, its table without the class token).
  expect_error([&] { ViT::load(d.file("tiny.safetensors"), "", 0, Precision::F32, "vit_small_patch16_224"); },
               "--arch vit_small_patch16_224: timm's vit_small_patch16_224 is width 384, patch 16, MLP 1536, a 14x14 "
               "position table; " + d.file("tiny.safetensors") + " is width 192, patch 16, MLP 768, a 14x14 position table");
  expect_error([&] { ViT::load(d.file("tiny.safetensors"), "", 0, Precision::F32, "deit3_small_patch16_224"); },
               "is width 384, patch 16, MLP 1536, a 14x14 position table, a position table over the patches only, "
               "layer scale; ");
  expect_error([&] { ViT::load(d.file("tiny.safetensors"), "", 0, Precision::F32, "vit_base_patch16_rpn_224"); },
               "--arch: ViT with post-norm residual blocks checkpoint: not supported yet (vit_base_patch16_rpn_224)");
  expect_error([&] { ViT::load(d.file("tiny.safetensors"), "", 0, Precision::F32, "vit_unheard_of_224"); },
               "--arch: architecture 'vit_unheard_of_224': not supported");
  expect_error([&] { ViT::load(d.file("tiny.safetensors"), "", 0, Precision::F32, "vit_tiny_patch16_224.augreg_in21k"); },
               "an architecture without a pretrained tag ('.augreg_in21k')");
  // A config naming another architecture, or Hugging Face's layout with its config: one or the other.
  write_file(d.file("deit.json"), R"({"architecture": "deit_tiny_patch16_224"})");
  expect_error([&] { ViT::load(d.file("tiny.safetensors"), d.file("deit.json"), 0, Precision::F32, "vit_tiny_patch16_224"); },
               "deit.json names the architecture deit_tiny_patch16_224: give one or the other");
  TempDir clip;
  write_tensors(clip.file("model.safetensors"), to_hf_clip_layout(tiny_vit_tensors(TinySpec{}, 1), 2, 32));
  write_file(clip.file("config.json"), R"({"model_type": "clip_vision_model", "num_attention_heads": 2})");
  expect_error([&] { ViT::load(clip.path(), "", 0, Precision::F32, "vit_base_patch16_clip_224"); },
               "holds Hugging Face CLIP vision names, whose config says what the model is (--config); --arch names");
}

// One loaded Model shared by a Classifier and an Explainer (what `vit serve` does): one copy of the weights,
// kept alive by the objects over it; the maps from passes at the model's precision, with the Classifier's top
// class; the model's options checked once, by the Model.
TEST(Library, ClassifierAndExplainerShareOneModel) {
  TempDir d;
  write_tiny_model(d.path(), TinySpec{}, 3);
  LoadOptions lo;
  lo.precision = Precision::Int8;
  std::unique_ptr<Model> m = std::make_unique<Model>(d.path(), lo);
  const Classifier c(*m);
  ExplainerSettings es;
  es.picture_size = 128;
  const Explainer e(*m, es);
  EXPECT_EQ(&c.model().impl(), &m->impl()) << "the Classifier holds the Model, not a copy of its weights";
  EXPECT_EQ(c.info().precision, "int8");
  EXPECT_EQ(e.precision(), Precision::Int8);
  m.reset();  // the Classifier and the Explainer keep it
  Image img;
  img.width = img.height = 40;
  for (int k = 0; k < 40 * 40 * 3; ++k) img.rgb.push_back(uint8_t((k * 7) % 251));
  const std::vector<std::pair<std::string, std::string>> in{{"a", encode_png(img)}};
  const std::vector<Result> r = c.classify_encoded(in, 1);
  const std::vector<Explanation> x = e.explain_encoded(in);
  ASSERT_EQ(r.size(), 1u);
  ASSERT_EQ(x.size(), 1u);
  ASSERT_EQ(r[0].error, "");
  ASSERT_EQ(x[0].error, "");
  EXPECT_EQ(x[0].top.index, r[0].top[0].index);
  EXPECT_NEAR(x[0].top.prob, r[0].top[0].prob, 1e-4);
  EXPECT_EQ(x[0].rollout.size(), size_t(x[0].grid_rows * x[0].grid_cols));
  EXPECT_EQ(x[0].picture.substr(1, 3), "PNG");
  LoadOptions bad;
  bad.threads = -1;
  expect_error([&] { Model(d.path(), bad); }, "threads -1 is out of range (0 for all cores, or 1 to 4096)");
  bad = {};
  bad.labels = d.file("labels.txt");
  bad.text_embeddings = d.file("text.safetensors");
  expect_error([&] { Model(d.path(), bad); }, "labels and text embeddings both name the classes: give one");
}

// The library's in-memory pixels (what classify_video feeds it): a missing buffer, a zero side or more
// than max_pixels is that image's error, naming it; the others are classified.
TEST(Library, ClassifyPixelsAnswersBadPixelsByName) {
  TempDir d;
  write_tiny_model(d.path(), TinySpec{}, 3);
  ClassifierOptions o;
  o.max_pixels = 1000;
  const Classifier c(d.path(), o);
  const std::vector<uint8_t> rgb(40 * 30 * 3, 128);
  const std::vector<Result> r = c.classify_pixels(
      {{"good", 30, 30, rgb.data()}, {"null", 30, 30, nullptr}, {"flat", 30, 0, rgb.data()}, {"big", 40, 30, rgb.data()}}, 1);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].error, "");
  EXPECT_EQ(r[0].top.size(), 1u);
  EXPECT_EQ(r[1].error, "no pixels (30x30)");
  EXPECT_EQ(r[2].error, "no pixels (30x0)");
  EXPECT_EQ(r[3].error, "image of 40x30 = 1200 pixels is over the limit of 1000 (--max-pixels)");
  EXPECT_EQ(r[3].file, "big");
}

// A batch smaller than the Classifier's (13 of 16, three of them failing: first, middle, last) runs in
// Plans of powers of two: every result in input order, each as the image gives alone (bit for bit in
// int8), each failure in its place.
TEST(Library, ShortBatchesRunInPowersOfTwoWithTheSameAnswers) {
  TempDir d;
  write_tiny_model(d.path(), TinySpec{}, 3);
  ClassifierOptions o;
  o.batch = 16;
  o.keep_logits = true;
  o.precision = Precision::Int8;
  const Classifier c(d.path(), o);
  std::vector<std::vector<uint8_t>> rgb;
  std::vector<Pixels> in;
  for (int i = 0; i < 13; ++i) {
    rgb.emplace_back(size_t(24 * 24 * 3));
    for (size_t k = 0; k < rgb.back().size(); ++k) rgb.back()[k] = uint8_t((k * (i + 3) + i * 17) % 251);
  }
  for (int i = 0; i < 13; ++i)
    in.push_back({"image" + std::to_string(i), 24, 24, (i == 0 || i == 6 || i == 12) ? nullptr : rgb[size_t(i)].data()});
  const std::vector<Result> all = c.classify_pixels(in, 3);
  ASSERT_EQ(all.size(), 13u);
  for (int i = 0; i < 13; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(all[size_t(i)].file, in[size_t(i)].name);
    if (!in[size_t(i)].rgb) {
      EXPECT_EQ(all[size_t(i)].error, "no pixels (24x24)");
      continue;
    }
    const Result alone = c.classify_pixels({in[size_t(i)]}, 3)[0];
    EXPECT_EQ(all[size_t(i)].error, "");
    EXPECT_EQ(all[size_t(i)].logits, alone.logits);
  }
}

void expect_load_error(const std::string& model, const std::string& fragment, const std::string& config = "",
                       int64_t img_size = 0) {
  expect_error([&] { ViT::load(model, config, img_size); }, fragment);
}

// The tiny model's tensors, changed by `edit`, must be refused with `fragment`.
void expect_tensors_error(const std::function<void(TensorMap&)>& edit, const std::string& fragment) {
  TempDir d;
  write_tiny_model(d.path(), TinySpec{});
  TensorMap t = tiny_vit_tensors(TinySpec{}, 1);
  edit(t);
  write_tensors(d.file("model.safetensors"), t);
  expect_load_error(d.path(), fragment);
}

TEST(LoaderErrors, MissingTensor) {
  expect_tensors_error([](TensorMap& t) { t.erase("blocks.1.mlp.fc2.bias"); },
                       "model.safetensors: missing tensor blocks.1.mlp.fc2.bias");
}

TEST(LoaderErrors, WrongShape) {
  expect_tensors_error([](TensorMap& t) { t["blocks.1.attn.qkv.weight"].first = {64, 48}; },
                       "blocks.1.attn.qkv.weight has shape [64,48], expected [96,32]");
}

// Hugging Face's q, k and v stack into timm's qkv only when their other dimensions agree.
TEST(LoaderErrors, QueryKeyValueThatDoNotStack) {
  TempDir d;
  TensorMap t = to_hf_layout(tiny_vit_tensors(TinySpec{}, 1), 2, 32);
  t["vit.encoder.layer.1.attention.attention.key.weight"] = {{32, 16}, std::vector<float>(512, 0.f)};
  write_tensors(d.file("model.safetensors"), t);
  write_file(d.file("config.json"), R"({"model_type": "vit", "num_attention_heads": 2})");
  expect_load_error(d.file("model.safetensors"),
                    "vit.encoder.layer.1.attention.attention.key.weight has shape [32,16], which does not stack with "
                    "vit.encoder.layer.1.attention.attention.query.weight's [32,32] into blocks.1.attn.qkv.weight");
}

TEST(LoaderErrors, UnusedTensor) {
  expect_tensors_error([](TensorMap& t) { t["blocks.0.attn.extra_scale"] = {{1}, {1.f}}; },
                       "does not use: blocks.0.attn.extra_scale");
}

TEST(LoaderErrors, NotAViT) {
  TempDir d;
  write_tensors(d.file("model.safetensors"), {{"conv1.weight", {{2, 2}, {1, 2, 3, 4}}}});
  expect_load_error(d.file("model.safetensors"), "not a ViT checkpoint");
}

// Families the engine does not run yet are named from their tensors (or a timm config's architecture),
// whatever else the file holds, before any tensor is read.
TEST(LoaderErrors, UnsupportedFamiliesAreRefusedByName) {
  const std::pair<const char*, const char*> cases[] = {
      {"rel_pos_bias.relative_position_bias_table",
       "BEiT with a shared relative position bias (use_shared_rel_pos_bias) checkpoint: not supported yet"},
      {"blocks.0.attn.q_norm.weight", "EVA with qk_norm checkpoint: not supported yet"},
      {"blocks.0.attn.gate.weight", "EVA with gated attention checkpoint: not supported yet"},
      // An OpenCLIP tower on a timm trunk runs (tests/test_layouts.cpp), but only with the config naming the trunk.
      {"visual.trunk.patch_embed.proj.weight", "an OpenCLIP image tower on a timm model (visual.trunk) without its "
                                               "open_clip_config.json"},
      {"visual.attn_pool.query", "OpenCLIP image tower with an attentional pool checkpoint: not supported yet"},
      {"encoder.layer.0.mlp.weights_in.weight", "Hugging Face DINOv2 with a SwiGLU MLP (giant) checkpoint: not supported yet"},
      {"dinov2.embeddings.cls_token", "Hugging Face Dinov2ForImageClassification checkpoint: not supported yet"},
      {"layer.0.layer_scale1.lambda1", "Hugging Face DINOv3ViTModel (use timm's vit_*_dinov3 folder of the same weights) checkpoint: not supported yet"}};
  for (const auto& [tensor, message] : cases) {
    TempDir d;
    write_tensors(d.file("model.safetensors"), {{tensor, {{2}, {1, 2}}}});
    expect_load_error(d.file("model.safetensors"), message);
  }
  TempDir d;
  write_tiny_model(d.path(), TinySpec{});
  write_file(d.file("c.json"), R"({"architecture": "eva02_enormous_patch14_clip_224"})");
  expect_load_error(d.path(),
                    "EVA-02 CLIP tower with post-norm residual blocks (enormous) checkpoint: not supported yet "
                    "(eva02_enormous_patch14_clip_224)",
                    d.file("c.json"));
  write_file(d.file("e.json"), R"({"architecture": "eva_giant_patch14_224"})");
  expect_load_error(d.path(), "EVA checkpoint: not supported yet (eva_giant_patch14_224)", d.file("e.json"));
  // An architecture the engine runs, over tensors that are not it.
  write_file(d.file("t.json"), R"({"architecture": "eva02_tiny_patch14_224"})");
  expect_load_error(d.path(), "eva02_tiny_patch14_224 has a SwiGLU MLP", d.file("t.json"));
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
  write_file(d.file("bad.json"), R"({"architecture": "vit_custom", "model_args": {"num_heads": 5}})");
  expect_load_error(d.path(), "5 heads do not divide width 32", d.file("bad.json"));
  write_file(d.file("bad2.json"), R"({"pretrained_cfg": {"interpolation": "cubic-ish"}})");
  expect_load_error(d.path(), "unknown interpolation 'cubic-ish'", d.file("bad2.json"));
}

TEST(LoaderErrors, ConfigContradictsTheTensors) {
  TempDir d;
  write_tiny_model(d.path(), TinySpec{});  // width 32, depth 2, patch 8, mlp 64, 10 classes, class token
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"model_args": {"depth": 6}})", "depth is 6, but " + d.file("model.safetensors") + " has depth 2"},
      {R"({"model_args": {"patch_size": 16}})", "patch_size is 16, but"},
      {R"({"model_args": {"patch_size": [16, 16]}})", "patch_size is 16, but"},
      {R"({"model_args": {"embed_dim": 192}})", "embed_dim is 192, but"},
      {R"({"model_args": {"mlp_ratio": 3.0}})", "has MLP width 64 for width 32"},
      {R"({"model_args": {"class_token": false}})", "class_token is false, but"},
      {R"({"model_args": {"fc_norm": true}})", "has no fc_norm"},
      {R"({"model_args": {"reg_tokens": 4}})", "register tokens"},
      {R"({"num_classes": 1000})", "num_classes is 1000, but"},
      {R"({"model_args": {"img_size": [224]}})", "img_size must be a size or [H, W]"},
      {R"({"model_type": "vit", "hidden_size": 768})", "hidden_size is 768, but"},
      {R"({"model_type": "vit", "num_hidden_layers": 12})", "num_hidden_layers is 12, but"},
      {R"({"model_type": "vit", "intermediate_size": 3072})", "intermediate_size is 3072"},
      {R"([1, 2, 3])", "not a JSON object"},
  };
  for (const auto& [json, fragment] : cases) {
    write_file(d.file("c.json"), json);
    expect_load_error(d.path(), fragment, d.file("c.json"));
  }
}

// Found by fuzz_checkpoint (tests/fuzz/regressions/checkpoint/hf_image_size_zero): an input size of 0
// reached the position-table resampler.
TEST(LoaderErrors, InputSizeOutOfRange) {
  TempDir d;
  write_tiny_model(d.path(), TinySpec{});
  write_file(d.file("c.json"), R"({"model_type": "vit", "num_attention_heads": 2, "image_size": 0})");
  expect_load_error(d.path(), "input size 0x0 is out of range (1 to 8192)", d.file("c.json"));
  write_file(d.file("c.json"), R"({"pretrained_cfg": {"input_size": [3, 100000, 100000]}})");
  expect_load_error(d.path(), "input size 100000x100000 is out of range", d.file("c.json"));
}

TEST(LoaderErrors, BadPreprocessorConfig) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"do_resize": false})", "do_resize false is not supported"},
      {R"({"size": {"shortest_edge": 40}})", "size {shortest_edge} without a center crop"},
      {R"({"size": {"height": 32, "width": 40}})", "only square sizes"},
      {R"({"size": "big"})", "'size' is neither"},
      {R"({"size": -3})", "'size' is out of range"},
      {R"({"resample": 9})", "resample 9 is not a PIL filter"},
      {R"({"image_std": [0.5, 0, 0.5]})", "image_std values must be positive"},
      {R"({"do_center_crop": true})", "do_center_crop without crop_size"},
  };
  for (const auto& [json, fragment] : cases) {
    TempDir d;
    write_tiny_model(d.path(), TinySpec{});
    write_file(d.file("preprocessor_config.json"), json);
    expect_load_error(d.path(), d.file("preprocessor_config.json") + ": " + fragment);
  }
}

TEST(TinyModel, PreprocessorConfigIsFoldedIntoTimmForm) {
  TempDir d;
  write_tiny_model(d.path(), TinySpec{});
  write_file(d.file("preprocessor_config.json"),
             R"({"size": {"shortest_edge": 36}, "do_center_crop": true, "crop_size": 32, "resample": 2,
                 "rescale_factor": 0.00784313725490196, "image_mean": [1, 1, 1], "image_std": [1, 1, 1]})");
  const ViTConfig c = ViT::load(d.path()).config();
  EXPECT_EQ(c.pre.crop_mode, CropMode::Center);
  EXPECT_EQ(c.pre.resize, 36);
  EXPECT_EQ(c.pre.height, 32);
  EXPECT_EQ(c.pre.interpolation, Filter::Bilinear);
  // x * 2/255 - 1 == (x / 255 - 0.5) / 0.5
  EXPECT_FLOAT_EQ(c.pre.mean[0], 0.5f);
  EXPECT_FLOAT_EQ(c.pre.std[2], 0.5f);
  EXPECT_NE(c.origin.preprocessing.find("preprocessor_config.json"), std::string::npos);
}

TEST(TinyModel, ImgSizeResamplesThePositionTable) {
  TempDir d;
  write_tiny_model(d.path(), TinySpec{});  // 32 px, patch 8: a 4x4 grid
  ViT m = ViT::load(d.path(), "", 48);
  EXPECT_EQ(m.config().tokens(), 37);
  EXPECT_EQ(m.config().pre.height, 48);
  EXPECT_EQ(m.config().origin.input_size, "--img-size");
  std::mt19937 rng(2);
  const auto images = random_vector(size_t(2 * 3 * 48 * 48), rng);
  const auto out = run(m, images, 2);
  for (float v : out) EXPECT_TRUE(std::isfinite(v));
  expect_load_error(d.path(), "image size 50 is not a multiple of the model's patch size 8", "", 50);
}

TEST(LoaderErrors, MissingModel) {
  expect_load_error("/nonexistent/model.safetensors", "/nonexistent/model.safetensors: no such file");
  TempDir d;
  expect_load_error(d.path(), "folder has no model.safetensors");
}

// `vit bench --arch`: architectures of each family have the parameters timm gives them (timm 1.0.31's
// sum(p.numel()) of create_model(arch, num_classes=N), N its default pretrained config's classes: a CLIP tower's
// projection (vit_base_patch16_clip_224's default weights are fine-tuned: 1000 classes), DINOv2's, SigLIP's and
// EVA-02's image models' none), so every family setting is the one timm builds (tests/test_sweep.cpp checks every
// name); and a random model of each family (and variant), cut to one block at four patches a side, runs.
TEST(Archs, ArchitecturesAreTimmsShapeAndRun) {
  const std::map<std::string, int64_t> timm = {
      {"vit_tiny_patch16_224", 5717416},           {"vit_small_patch16_224", 22050664},
      {"vit_base_patch16_224", 86567656},          {"vit_base_patch32_224", 88224232},
      {"vit_large_patch16_224", 304326632},        {"vit_base_patch16_384", 86859496},
      {"deit_tiny_patch16_224", 5717416},          {"deit_small_patch16_224", 22050664},
      {"deit_base_patch16_224", 86567656},         {"deit3_small_patch16_224", 22059496},
      {"deit3_base_patch16_224", 86585320},        {"vit_small_patch14_dinov2", 22056192},
      {"vit_base_patch14_dinov2", 86579712},       {"vit_large_patch14_dinov2", 304367616},
      {"vit_small_patch14_reg4_dinov2", 22057344}, {"vit_base_patch14_reg4_dinov2", 86582016},
      {"vit_base_patch16_clip_224", 86568424},     {"vit_base_patch16_clip_quickgelu_224", 86193152},
      {"vit_base_patch32_clip_224", 88225000},     {"vit_large_patch14_clip_224", 304204776},
      {"vit_base_patch16_siglip_224", 92884224},   {"beit_base_patch16_224", 86530984},
      {"beit_large_patch16_224", 304430568},       {"eva02_tiny_patch14_224", 5502144},
      {"eva02_small_patch14_224", 21621120},       {"eva02_base_patch14_224", 85758720},
      {"vit_large_patch16_siglip_256", 315956224}, {"vit_large_patch16_siglip_384", 316283904},
      {"vit_so400m_patch14_siglip_224", 427680704}, {"vit_so400m_patch14_siglip_378", 428225600},
      {"beitv2_large_patch16_224", 304430568},     {"eva02_base_patch14_448", 87117544},
      {"vit_base_patch16_rope_reg1_gap_256", 86425576},
      // AIMv2 has no head; EVA-02 CLIP's is its 512-wide projection.
      {"aimv2_large_patch14_224", 309197824},      {"eva02_base_patch16_clip_224", 86263040},
      {"vit_base_patch16_rope_224", 86434792},     {"vit_base_patch16_rope_ape_224", 86585320},
      {"vit_base_patch16_rope_mixed_224", 86444008}};
  std::mt19937 rng(5);
  std::set<std::string> ran;
  const std::vector<std::string> known = known_archs();
  for (const auto& [arch, parameters] : timm) {
    SCOPED_TRACE(arch);
    EXPECT_TRUE(std::binary_search(known.begin(), known.end(), arch));
    const ViTConfig full = config_for_arch(arch);
    EXPECT_EQ(ViT::parameters(full), parameters);
    const std::string variant = family_name(full.family) + std::string(full.reg_tokens ? " registers" : "") +
                                (full.mlp_norm ? " scale_mlp" : "") + (full.act == Activation::QuickGelu ? " quickgelu" : "") +
                                (full.rope.kind == RopeKind::Mixed ? " mixed" : "");
    if (!ran.insert(variant).second) continue;
    ViTConfig c = config_for_arch(arch, 4 * full.patch);
    EXPECT_EQ(c.tokens(), 16 + full.prefix_tokens());
    c.depth = 1;
    ViT m = ViT::random(c, 1);
    auto plan = m.make_plan(2);
    EXPECT_EQ(m.flops(2), plan->program().flops());  // counted from the shapes, as the plan's steps sum them
    const auto images = random_vector(size_t(2 * c.input_floats()), rng);
    std::memcpy(plan->input(), images.data(), images.size() * sizeof(float));
    plan->run();
    const float* f = plan->features();
    EXPECT_TRUE(std::all_of(f, f + 2 * c.width, [](float v) { return std::isfinite(v); }));
    EXPECT_GT(max_abs_diff(std::vector<float>(f, f + c.width), std::vector<float>(f + c.width, f + 2 * c.width)), 1e-3f);
  }
  EXPECT_EQ(config_for_arch("vit_small_patch14_dinov2").img_h(), 518);
  EXPECT_TRUE(ran.count("AIMv2") && ran.count("EVA-02 CLIP image tower scale_mlp") &&
              ran.count("ViT with rotary embedding mixed"));
  EXPECT_EQ(config_for_arch("vit_small_patch14_dinov2", 224).tokens(), 257);
  expect_error([] { config_for_arch("vit_gigantic_patch3_999"); },
               "--arch: architecture 'vit_gigantic_patch3_999': not supported (docs/MODELS.md lists");
  expect_error([] { config_for_arch("vit_small_patch14_dinov2", 100); }, "not a multiple of the model's patch size 14");
}

// One list decides what --arch takes: every name docs/MODELS.md lists as running is one (known_archs(): the names
// of models/timm_archs.inc the family rows take), of the family MODELS.md names, and nothing else is; shrunk to 8
// channels a head, one block and two patches a side, its random-weight model runs. A name MODELS.md lists as
// refused gets its reason, as loading a checkpoint of it does.
TEST(Archs, EveryNameDocsModelsMdRunsIsAnArchitecture) {
  const std::vector<ModelsMdRow> rows = models_md();
  ASSERT_GT(rows.size(), 240u);
  std::set<std::string> running;
  std::mt19937 rng(6);
  for (const ModelsMdRow& r : rows) {
    SCOPED_TRACE(r.arch);
    if (!r.runs) {
      if (r.why.rfind("timm itself cannot", 0) != 0) expect_error([&] { config_for_arch(r.arch); }, "--arch: " + r.why);
      continue;
    }
    running.insert(r.arch);
    ViTConfig c = config_for_arch(r.arch);
    EXPECT_EQ(family_name(c.family), r.why);
    c = config_for_arch(r.arch, 2 * c.patch);
    c.depth = 1;
    c.width = 8 * c.heads;
    c.mlp = 16;
    if (c.pool.attn()) c.pool.attn_mlp = 24;
    if (c.classes) c.classes = 5;
    ViT m = ViT::random(c, 1);
    auto plan = m.make_plan(1);
    const auto image = random_vector(size_t(c.input_floats()), rng);
    std::memcpy(plan->input(), image.data(), image.size() * sizeof(float));
    plan->run();
    const float* f = plan->features();
    EXPECT_TRUE(std::all_of(f, f + c.width, [](float v) { return std::isfinite(v); }));
  }
  for (const std::string& arch : known_archs())
    if (arch.rfind("naflexvit_", 0) != 0) EXPECT_EQ(running.count(arch), 1u) << arch << " runs, but docs/MODELS.md says not";
  EXPECT_GT(running.size(), 200u);
}

// `vit bench --arch` builds the biases timm's model has, no more: DINOv3 without _qkvb none for q, k and v;
// AIMv2 none in its blocks (timm's qkv_bias and proj_bias False); a classic ViT all of them.
TEST(Archs, RandomWeightsHaveTheBiasesOfTimmsModel) {
  struct Case {
    const char* arch;
    bool qkv, proj;
  };
  for (const Case& k : {Case{"vit_small_patch16_dinov3", false, true}, Case{"aimv2_large_patch14_224", false, false},
                        Case{"vit_base_patch16_224", true, true}}) {
    SCOPED_TRACE(k.arch);
    ViTConfig c = config_for_arch(k.arch);
    c.pre.height = c.pre.width = int(4 * c.patch);
    c.depth = 1;
    ViT m = ViT::random(c, 1);
    const auto layers = m.block_linear_layers();  // attn.qkv, attn.proj, mlp.fc1, mlp.fc2
    ASSERT_EQ(layers.size(), 4u);
    EXPECT_EQ(bool(layers[0].second->b), k.qkv) << layers[0].first;
    for (size_t i = 1; i < 4; ++i) EXPECT_EQ(bool(layers[i].second->b), k.proj) << layers[i].first;
  }
}

}  // namespace
}  // namespace vit::test

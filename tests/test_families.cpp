// The ViT families against timm itself: shrunk random-weight timm models (tests/make_timm_models.py, run at
// test time by the .venv's timm over Debian's torch) and timm's outputs on sample photos through its own data
// pipeline. Tokens (forward_features), embeddings (pre_logits) and outputs (model(x)) within 1e-4, from timm's
// input tensor and from the photos through our preprocessing; `vit embed` equal to them; BEiT and EVA-02 in
// int8 and bf16 close to f32; the variants not supported yet refused by name. Skipped without timm in .venv (scripts/setup.sh installs it), except under CI=true.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "cli_util.h"
#include "models/families.h"
#include "models/network.h"
#include "reference_models.h"
#include "test_util.h"
#include "vit/vit.h"

namespace vit::test {
namespace {

// The models, generated once per build tree and kept beside the vit binary (ctest runs every test in a
// process of its own; timm takes ~25 s): made again whenever the generator changes (the folder keeps
// the copy of it that made it), under a lock, so that tests running side by side wait for one another.
struct TimmModels {
  static GeneratorSpec get() {
    return {"timm_models", {VIT_SOURCE_DIR "/tests/make_timm_models.py", VIT_SOURCE_DIR "/tests/timm_references.py"},
            "timm", "TIMM_FUSED_ATTN=0 ", "has no timm"};
  }
};
class Families : public GeneratedSuite<TimmModels> {
 protected:
  // Our forward pass on timm's own input tensor: tokens, embeddings and outputs against timm's.
  static void expect_like_timm(const std::string& name, const std::string& ref_name = "reference.safetensors",
                               int64_t img_size = 0) {
    expect_model_like_reference(name, ref_name, img_size, [&](const ViT&) { return name; });
  }
  // A folder holding one of the models (its weights) run against that model's reference.
  static void expect_like_timm_at(const std::string& dir, const std::string& name) {
    const SafeTensors ref(model(name) + "/reference.safetensors");
    ViT m = ViT::load(dir);
    expect_forward_like_reference(name, m, ref);
  }
};

TEST_F(Families, ClassicViTLikeTimm) { expect_like_timm("vit"); }
TEST_F(Families, DeiT3LikeTimm) { expect_like_timm("deit3"); }
TEST_F(Families, CLIPTowerLikeTimm) { expect_like_timm("clip"); }
TEST_F(Families, CLIPTowerWithQuickGeluLikeTimm) { expect_like_timm("clip_quickgelu"); }
TEST_F(Families, SigLIPTowerLikeTimm) { expect_like_timm("siglip"); }
TEST_F(Families, DINOv2LikeTimm) { expect_like_timm("dinov2"); }
TEST_F(Families, DINOv2WithRegistersLikeTimm) { expect_like_timm("dinov2_reg"); }
TEST_F(Families, DINOv2At224LikeTimm) {
  expect_like_timm("dinov2", "reference_224.safetensors", 224);
  expect_like_timm("dinov2_reg", "reference_224.safetensors", 224);
}

TEST_F(Families, BEiTLikeTimm) { expect_like_timm("beit"); }
TEST_F(Families, EVA02TinyLikeTimm) { expect_like_timm("eva02"); }
TEST_F(Families, EVA02BaseLikeTimm) { expect_like_timm("eva02_base"); }
// eva.py's vit_base_patch16_rope_reg1_gap_256: rotary embedding, no position table, one register, GELU, mean pool.
TEST_F(Families, RopeViTLikeTimm) {
  expect_like_timm("vit_rope");
  const ViTConfig c = ViT::load(model("vit_rope")).config();
  EXPECT_EQ(c.family, Family::RopeViT);
  EXPECT_TRUE(c.rope.on && !c.pos_embed && !c.class_token && c.layer_scale && !c.attn.k_bias && c.pool.fc_norm && !c.pool.final_norm);
  EXPECT_EQ(c.reg_tokens, 1);
  EXPECT_EQ(c.act, Activation::Gelu);
  EXPECT_EQ(c.pool.kind, Pool::Avg);
  EXPECT_EQ(c.rope.ref_h, 16);
  EXPECT_EQ(c.tokens(), 16 * 16 + 1);
}
// At 168 px the position table is resampled and the rotary grid rebuilt at 12x12, rescaled to the 16x16
// it was trained at (ref_feat_shape), as timm's model made at that size computes it.
// At 256 px BEiT's 14x14 relative position tables are resized for 16x16 (timm's resize_rel_pos_bias_table:
// the source offsets on a geometric progression, then linear interpolation between them).
TEST_F(Families, BEiTAt256LikeTimm) { expect_like_timm("beit", "reference_256.safetensors", 256); }
TEST_F(Families, EVA02At168LikeTimm) {
  expect_like_timm("eva02", "reference_168.safetensors", 168);
  expect_like_timm("eva02_base", "reference_168.safetensors", 168);
}

// DINOv3 (eva.py's vit_*_dinov3): its own rotary embedding (patch centres normalised to the grid, temperature
// 100, rotate-half pairs) and no position table, class and 4 register tokens, layer scale, LayerNorm eps 1e-5;
// without q/k/v biases, with q and v biases (_qkvb), with a SwiGLU MLP (S+). Pooled as timm's config says
// (global_pool 'avg': the mean of the patch tokens).
TEST_F(Families, DINOv3LikeTimm) {
  expect_like_timm("dinov3");
  expect_like_timm("dinov3_qkvb");
  expect_like_timm("dinov3_plus");
}
// DINOv3 takes any input size (dynamic_img_size): the rotary grid follows the input, as timm's same model
// computes it for a 224-px (14x14) and a 192-px (12x12) input.
TEST_F(Families, DINOv3AtOtherSizesLikeTimm) {
  expect_like_timm("dinov3", "reference_224.safetensors", 224);
  expect_like_timm("dinov3_plus", "reference_192.safetensors", 192);
}
// Upstream's and Hugging Face's DINOv3 embedding is the class token (`--pool cls`): timm's normed tokens at 0.
TEST_F(Families, DINOv3ClassTokenPoolLikeTimm) {
  const SafeTensors ref(model("dinov3") + "/reference.safetensors");
  ViT m = ViT::load(model("dinov3"));
  EXPECT_EQ(m.config().pool.kind, Pool::Avg);
  m.set_pool(Pool::Token);
  const int64_t B = ref.get("input").shape[0], T = m.config().tokens(), D = m.config().width;
  auto plan = m.make_plan(B);
  const auto input = ref.to_f32("input"), tokens = ref.to_f32("tokens");
  std::memcpy(plan->input(), input.data(), input.size() * sizeof(float));
  plan->run();
  float worst = 0;
  for (int64_t b = 0; b < B; ++b)
    worst = std::max(worst, max_abs_diff(plan->features() + b * D, tokens.data() + b * T * D, size_t(D)));
  EXPECT_LT(worst, 1e-4f);
  std::printf("dinov3 --pool cls: max |difference| from timm's class token %.2e\n", double(worst));
}

// int8 and bf16 linear layers in the new blocks (SwiGLU's fused fc1, the folded q/v biases, BEiT's and DINOv3's
// scaled proj and fc2, DINOv3's unbiased qkv): the embeddings stay close to f32's.
TEST_F(Families, BEiTAndEVA02InLowerPrecision) {
  for (const std::string name : {"beit", "eva02", "eva02_base", "dinov3", "dinov3_plus", "aimv2", "eva02_clip"}) {
    const SafeTensors r(model(name) + "/reference.safetensors");
    const auto x = r.to_f32("input");
    std::vector<float> f32;
    for (const Precision p : {Precision::F32, Precision::Int8, Precision::BF16}) {
      if (p == Precision::BF16 && !cpu_isa().bf16) continue;
      ViT m = ViT::load(model(name), "", 0, p);
      auto plan = m.make_plan(3);
      std::memcpy(plan->input(), x.data(), x.size() * sizeof(float));
      plan->run();
      const int64_t D = m.config().width;
      std::vector<float> e(plan->features(), plan->features() + 3 * D);
      if (p == Precision::F32) {
        f32 = e;
        continue;
      }
      for (int64_t i = 0; i < 3; ++i) {
        double dot = 0, na = 0, nb = 0;
        for (int64_t d = 0; d < D; ++d) {
          const double a = f32[size_t(i * D + d)], b = e[size_t(i * D + d)];
          dot += a * b, na += a * a, nb += b * b;
        }
        const double cosine = dot / std::sqrt(na * nb);
        EXPECT_GT(cosine, p == Precision::Int8 ? 0.99 : 0.999) << name << " " << precision_name(p) << " image " << i;
        std::printf("%s %s: image %lld, cosine to f32 %.5f\n", name.c_str(), precision_name(p), (long long)i, cosine);
      }
    }
  }
}

TEST_F(Families, FamilyNamed) {
  EXPECT_EQ(ViT::load(model("deit3")).config().family, Family::DeiT3);
  EXPECT_EQ(ViT::load(model("dinov2")).config().family, Family::DINOv2);
  const ViTConfig reg = ViT::load(model("dinov2_reg")).config();
  EXPECT_EQ(reg.family, Family::DINOv2);
  EXPECT_EQ(reg.reg_tokens, 4);
  EXPECT_TRUE(reg.layer_scale);
  EXPECT_EQ(reg.classes, 0);
  EXPECT_EQ(reg.tokens(), 37 * 37 + 5);
  const ViTConfig clip = ViT::load(model("clip")).config(), quick = ViT::load(model("clip_quickgelu")).config();
  EXPECT_EQ(clip.family, Family::Clip);
  EXPECT_TRUE(clip.norm_pre && !clip.patch_bias && clip.act != Activation::QuickGelu);
  EXPECT_EQ(clip.eps, 1e-5f);
  EXPECT_EQ(quick.act, Activation::QuickGelu);
  const ViTConfig siglip = ViT::load(model("siglip")).config();
  EXPECT_EQ(siglip.family, Family::SigLIP);
  EXPECT_EQ(siglip.pool.kind, Pool::Map);
  EXPECT_FALSE(siglip.class_token);
  const ViTConfig beit = ViT::load(model("beit")).config();
  EXPECT_EQ(beit.family, Family::BEiT);
  EXPECT_EQ(beit.attn.rel_pos_window, 14);
  EXPECT_TRUE(beit.layer_scale && beit.attn.qkv_bias && !beit.attn.k_bias && !beit.pos_embed && beit.pool.fc_norm && !beit.pool.final_norm);
  EXPECT_EQ(beit.pool.kind, Pool::Avg);
  EXPECT_EQ(beit.heads, 2);
  const ViTConfig tiny = ViT::load(model("eva02")).config(), base = ViT::load(model("eva02_base")).config();
  EXPECT_EQ(tiny.family, Family::EVA02);
  EXPECT_TRUE(tiny.rope.on && tiny.swiglu() && tiny.attn.qkv_fused && !tiny.mlp_norm && !tiny.attn.k_bias && tiny.pos_embed);
  EXPECT_EQ(tiny.rope.ref_h, 16);
  EXPECT_EQ(tiny.mlp, 170);  // int(64 * 4 * 2 / 3)
  EXPECT_EQ(tiny.classes, 0);
  EXPECT_EQ(base.family, Family::EVA02);
  EXPECT_TRUE(base.rope.on && base.swiglu() && !base.attn.qkv_fused && base.mlp_norm && !base.attn.k_bias);
  EXPECT_EQ(base.classes, 10);
}

// A copy of a family model whose config.json is changed by edit (the weights linked, not copied).
std::string with_config(const TempDir& d, const std::string& from, const std::string& name,
                        const std::function<void(nlohmann::json&)>& edit) {
  const std::string dir = d.file(name);
  EXPECT_EQ(run_shell("mkdir -p " + dir + " && ln -s " + from + "/model.safetensors " + dir + "/"), 0);
  std::ifstream in(from + "/config.json");
  nlohmann::json j = nlohmann::json::parse(in);
  edit(j);
  write_file(dir + "/config.json", j.dump());
  return dir;
}

// A copy of the family model in `from` with model_args[key] = value (in d, as <model>_<key>) is refused by name:
// "<who> with model_args <key> <value as JSON>: not supported yet" (without "<who> with " when who is empty).
void expect_model_arg_refused(const TempDir& d, const std::string& from, const char* key, const nlohmann::json& value,
                              const std::string& who) {
  const auto edit = [&](nlohmann::json& j) { j["model_args"][key] = value; };
  const std::string name = from.substr(from.rfind('/') + 1) + "_" + key;
  const std::string message = std::string("model_args ") + key + " " + value.dump() + ": not supported yet";
  expect_error([&] { ViT::load(with_config(d, from, name, edit)); }, who.empty() ? message : who + " with " + message);
}

// The variants of BEiT and EVA the engine does not run are refused by name, never loaded half-right.
TEST_F(Families, UnsupportedVariantsRefusedByName) {
  TempDir d;
  expect_model_arg_refused(d, model("eva02"), "rope_type", "mixed", "EVA-02");
  expect_model_arg_refused(d, model("eva02"), "rope_rotate_half", true, "EVA-02");
  expect_model_arg_refused(d, model("eva02_base"), "qk_norm", true, "EVA-02");
  expect_model_arg_refused(d, model("eva02_base"), "use_post_norm", true, "EVA-02");
  expect_model_arg_refused(d, model("beit"), "use_shared_rel_pos_bias", true, "BEiT");
  expect_error([&] {
    ViT::load(with_config(d, model("eva02_base"), "clip", [](nlohmann::json& j) {
      j["architecture"] = "eva02_enormous_patch14_clip_224";
    }));
  }, "EVA-02 CLIP tower with post-norm residual blocks (enormous) checkpoint: not supported yet "
     "(eva02_enormous_patch14_clip_224)");
  // An EVA-02 CLIP tower's name over EVA-02's tensors: no LayerNorm inside attention to run.
  expect_error([&] {
    ViT::load(with_config(d, model("eva02_base"), "clip_name", [](nlohmann::json& j) {
      j["architecture"] = "eva02_base_patch16_clip_224";
    }));
  }, "eva02_base_patch16_clip_224 has a LayerNorm inside attention (scale_attn_inner), but");
  expect_error([&] {
    ViT::load(with_config(d, model("eva02"), "giant", [](nlohmann::json& j) { j["architecture"] = "eva_giant_patch14_224"; }));
  }, "EVA checkpoint: not supported yet (eva_giant_patch14_224)");
  // EVA-02's rotary embedding is in no tensor: a config naming no architecture ("vit_custom") is refused.
  expect_error([&] {
    ViT::load(with_config(d, model("eva02"), "eva02_custom", [](nlohmann::json& j) { j["architecture"] = "vit_custom"; }));
  }, "without a timm config.json naming its architecture");
}

// A DINOv3 config.json that spells out its timm definition's rotary settings (rope_type 'dinov3', rope_rotate_half,
// dynamic_img_size) loads as without them; any other value of those keys is refused by name.
TEST_F(Families, DINOv3ConfigWithItsOwnDefaultsLoads) {
  TempDir d;
  const auto args = [](const char* key, nlohmann::json v) { return [=](nlohmann::json& j) { j["model_args"][key] = v; }; };
  expect_like_timm_at(with_config(d, model("dinov3"), "spelled", [](nlohmann::json& j) {
                        j["model_args"]["rope_type"] = "dinov3";
                        j["model_args"]["rope_rotate_half"] = true;
                        j["model_args"]["dynamic_img_size"] = true;
                        j["model_args"]["rope_grid_indexing"] = "ij";
                      }),
                      "dinov3");
  expect_model_arg_refused(d, model("dinov3"), "rope_type", "cat", "DINOv3");
  expect_model_arg_refused(d, model("dinov3"), "dynamic_img_size", false, "DINOv3");
  expect_model_arg_refused(d, model("dinov3"), "rope_rotate_half", false, "DINOv3");
  // EVA-02's own values are its defaults, DINOv3's are refused for it.
  expect_like_timm_at(with_config(d, model("eva02"), "eva_cat", args("rope_type", "cat")), "eva02");
  expect_model_arg_refused(d, model("eva02"), "dynamic_img_size", true, "EVA-02");
}

// An input size that is no multiple of the patch: timm's patch embedding reads the top-left grid * P pixels and
// leaves the rest unread, and so does the engine, for timm's VisionTransformer families without
// dynamic_img_size. The SigLIP tower made at 232 px (config.json's img_size; 14x14 patches of 16, as at 224)
// gives timm's answers at 224 for the same top-left 224 px, whatever the last 8 of each side hold. DINOv3
// (dynamic_img_size, whose patch embedding refuses such an input), a ViT whose config says dynamic_img_size, and
// an eva.py model (EVA-02) at such a size are refused by name.
TEST_F(Families, PartialPatchGridAsTimmReadsIt) {
  TempDir d;
  const auto size = [](int64_t s) {
    return [=](nlohmann::json& j) {
      j["model_args"]["img_size"] = {s, s};
      j["pretrained_cfg"]["input_size"] = {3, s, s};
    };
  };
  ViT m = ViT::load(with_config(d, model("siglip"), "siglip_232", size(232)));
  const ViTConfig& c = m.config();
  ASSERT_EQ(c.img_h(), 232);
  ASSERT_EQ(c.grid_h(), 14);
  const SafeTensors ref(model("siglip") + "/reference.safetensors");
  const auto input = ref.to_f32("input");
  const int64_t B = ref.get("input").shape[0], S = 224, P = 232;
  std::vector<float> padded(size_t(B * 3 * P * P));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> junk(-5.f, 5.f);
  for (float& v : padded) v = junk(rng);  // what the patch embedding must not read
  for (int64_t i = 0; i < B * 3; ++i)
    for (int64_t y = 0; y < S; ++y)
      std::memcpy(padded.data() + (i * P + y) * P, input.data() + (i * S + y) * S, size_t(S) * sizeof(float));
  auto plan = m.make_plan(B);
  std::memcpy(plan->input(), padded.data(), padded.size() * sizeof(float));
  plan->run();
  const int64_t T = c.tokens(), D = c.width;
  EXPECT_LT(max_abs_diff(plan->tokens(), ref.to_f32("tokens").data(), size_t(B * T * D)), 1e-4f);
  EXPECT_LT(max_abs_diff(plan->features(), ref.to_f32("embeddings").data(), size_t(B * D)), 1e-4f);
  // vit inspect says which pixels are read.
  const Result r = run_vit("inspect -m " + d.file("siglip_232"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("232x232 RGB (the patch embedding reads its top-left 224x224, as timm's)"), std::string::npos) << r.out;

  expect_error([&] { ViT::load(with_config(d, model("dinov3"), "dinov3_250", size(250))); },
               "input size 250x250 is not a multiple of the patch size 16: with dynamic_img_size timm's patch "
               "embedding refuses an input that is no multiple of its patch");
  expect_error([&] {
    ViT::load(with_config(d, model("siglip"), "siglip_dyn", [&](nlohmann::json& j) {
      size(232)(j);
      j["model_args"]["dynamic_img_size"] = true;
    }));
  }, "input size 232x232 is not a multiple of the patch size 16: with dynamic_img_size");
  expect_error([&] { ViT::load(with_config(d, model("eva02"), "eva02_230", size(230))); },
               "input size 230x230 is not a multiple of the patch size 14: a partial patch grid in a EVA-02 is not "
               "supported");
  // --img-size stays a multiple of the patch, but the model's own size is no change.
  expect_error([&] { ViT::load(model("siglip"), "", 232); }, "image size 232 is not a multiple of the model's patch size 16");
}

// The whole path: our decoding and preprocessing of the photos, then the model, against timm's pipeline.
TEST_F(Families, EmbedFromPhotosLikeTimm) {
  for (const std::string name : {"vit", "deit3", "dinov2_reg", "beit", "eva02_base", "aimv2", "eva02_clip"}) {
    const SafeTensors ref(model(name) + "/reference.safetensors");
    Classifier c(model(name));
    EmbedOptions o;
    o.tokens = true;
    const auto got = c.embed(reference_photos(), o);
    const auto want = ref.to_f32("embeddings"), want_tokens = ref.to_f32("tokens");
    const size_t E = size_t(c.embedding_size(o)), TD = size_t(c.tokens() * c.width());
    ASSERT_EQ(got.size(), 3u);
    float worst = 0, worst_tokens = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].error, "");
      worst = std::max(worst, max_abs_diff(got[i].embedding.data(), want.data() + i * E, E));
      worst_tokens = std::max(worst_tokens, max_abs_diff(got[i].tokens.data(), want_tokens.data() + i * TD, TD));
    }
    EXPECT_LT(worst, 1e-4f) << name;
    EXPECT_LT(worst_tokens, 1e-4f) << name;
    std::printf("%s from the photos: max |difference| from timm: embeddings %.2e, tokens %.2e\n", name.c_str(),
                double(worst), double(worst_tokens));
  }
}

TEST_F(Families, EmbedCommandLikeTimm) {
  TempDir out;
  const auto files = reference_photos();
  const std::string args = files[0] + " " + files[1] + " " + files[2];
  for (const std::string name : {"vit", "dinov2", "eva02"}) {
    const SafeTensors ref(model(name) + "/reference.safetensors");
    for (const std::string flags : {"", "--head", "--tokens"}) {
      const std::string file = out.file(name + flags + ".safetensors");
      const test::Result r = run_vit("embed -m " + model(name) + " " + flags + " -o " + file + " " + args);
      ASSERT_EQ(r.code, 0) << r.err;
      const SafeTensors got(file);
      const std::string want = flags == "--head" ? "outputs" : "embeddings";
      EXPECT_LT(max_abs_diff(got.to_f32("embeddings"), ref.to_f32(want)), 1e-4f) << name << " " << flags;
      EXPECT_EQ(got.get("embeddings").shape[0], 3);
      if (flags == "--tokens") EXPECT_LT(max_abs_diff(got.to_f32("tokens"), ref.to_f32("tokens")), 1e-4f) << name;
      else EXPECT_FALSE(got.has("tokens"));
      const auto listed = nlohmann::json::parse(got.metadata().at("files"));
      ASSERT_EQ(listed.size(), 3u);
      EXPECT_EQ(listed[2].get<std::string>(), files[2]);
    }
  }
  // JSON lines, --normalize: unit rows; a bad file is an error line, the others still embedded.
  TempDir d;
  write_file(d.file("bad.jpg"), "not an image");
  const test::Result r = run_vit("embed --normalize -m " + model("deit3") + " " + files[0] + " " + d.file("bad.jpg"));
  EXPECT_EQ(r.code, 1) << r.err;
  const auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  const auto &first = lines[0], &second = lines[1];
  double ss = 0;
  for (double v : first["embedding"]) ss += v * v;
  EXPECT_NEAR(ss, 1.0, 1e-5);
  EXPECT_TRUE(second.contains("error"));
}

TEST_F(Families, ClassifyEvalExplainRefuseAModelWithoutHead) {
  TempDir d;
  for (const std::string& cmd : std::vector<std::string>{"classify", "eval", "explain --out " + d.path()}) {
    const test::Result r = run_vit(cmd + " -m " + model("dinov2") + " " + reference_photos()[0]);
    EXPECT_EQ(r.code, 2) << cmd;
    EXPECT_NE(r.err.find("no classifier head (embeddings only): use vit embed"), std::string::npos) << cmd << ": " << r.err;
  }
}

// An architecture the engine does not run is refused by name, whatever its tensors look like (the engine
// runs an allow-list: docs/MODELS.md); so is a model_args option it does not run. A ViT of one's own, described
// by its tensors and model_args alone, is "vit_custom". (timm's ResPostBlock ViT has a classic ViT's tensors:
// it loaded, and answered wrongly.)
TEST_F(Families, ArchitecturesAndOptionsTheEngineDoesNotRunAreRefusedByName) {
  TempDir d;
  const auto arch = [](const char* name) { return [=](nlohmann::json& j) { j["architecture"] = name; }; };
  const auto args = [](const char* key, nlohmann::json v) { return [=](nlohmann::json& j) { j["model_args"][key] = v; }; };
  expect_error([&] { ViT::load(with_config(d, model("vit"), "rpn", arch("vit_base_patch16_rpn_224"))); },
               "ViT with post-norm residual blocks checkpoint: not supported yet (vit_base_patch16_rpn_224)");
  expect_error([&] { ViT::load(with_config(d, model("vit"), "unheard", arch("vit_unheard_of_224"))); },
               "architecture 'vit_unheard_of_224': not supported");
  expect_model_arg_refused(d, model("vit"), "qk_norm", true, "");
  expect_model_arg_refused(d, model("vit"), "pos_embed", "none", "");
  expect_model_arg_refused(d, model("vit"), "block_fn", "ResPostBlock", "");
  expect_error([&] { ViT::load(with_config(d, model("deit3"), "tbd", args("act_layer", "silu"))); },
               "act_layer 'silu' is not supported");
  // The values the engine runs are taken; "vit_custom" is the tensors and model_args alone.
  expect_like_timm_at(with_config(d, model("vit"), "default_args", args("qk_norm", false)), "vit");
  expect_like_timm_at(with_config(d, model("vit"), "custom", arch("vit_custom")), "vit");
  // TIPSv2 (a DINOv2-style ViT with one register) matched timm before the allow-list and stays allowed.
  EXPECT_NE(family_of_arch("vit_base_patch14_reg1_tipsv2"), nullptr);
}

// Perception Encoder (eva.py's vit_pe_core_*) runs from its config: a position table and a rotary embedding
// ('xy' grid, offset 1, ref_feat_shape its own 24x24), norm_pre, the attention pool with 8 heads of its own
// (the blocks have 2), the projection; at 384 px and at 224 (the table resampled, the rotary grid 14x14
// rescaled to 24x24). Without its config it is refused: its tensors look like a CLIP tower's with an attention
// pool (norm_pre, attn_pool, cls_token), as which it once loaded and answered off by 1.5; its rotary embedding
// and its pool's heads are in no tensor.
TEST_F(Families, PerceptionEncoderLikeTimm) {
  expect_like_timm("pe_core");
  expect_like_timm("pe_core", "reference_224.safetensors", 224);
  const ViTConfig c = ViT::load(model("pe_core")).config();
  EXPECT_EQ(c.family, Family::PE);
  EXPECT_EQ(c.pool_heads(), 8);
  EXPECT_EQ(c.pool.head, HeadKind::Projection);
}
TEST_F(Families, PerceptionEncoderRefusedWithoutItsConfig) {
  TempDir d;
  const std::string bare = d.file("bare");
  ASSERT_EQ(run_shell("mkdir -p " + bare + " && ln -s " + model("pe_core") + "/model.safetensors " + bare + "/"), 0);
  expect_error([&] { ViT::load(bare); }, "no config.json: the number of heads, the block order");
  expect_error([&] {
    ViT::load(with_config(d, model("pe_core"), "pe_custom", [](nlohmann::json& j) { j["architecture"] = "vit_custom"; }));
  }, "an attention-pool head (attn_pool) beside class or register tokens or after norm_pre (as Perception Encoder "
     "has), without a config naming its architecture");
  expect_error([&] { ViT::load(with_config(d, model("pe_core"), "lang", [](nlohmann::json& j) {
                 j["architecture"] = "vit_pe_lang_large_patch14_448";
               })); },
               "Perception Encoder (lang or spatial) checkpoint: not supported yet (vit_pe_lang_large_patch14_448)");
}

// AIMv2 (vision_transformer.py's aimv2_*): RMSNorm in every block, before the blocks' output pooling and right
// after the patch embedding (embed_norm_layer); a SwiGLU MLP; no q/k/v, attn.proj or MLP biases (the patch
// embedding has one); a position table and no class token; the mean of the tokens. At 224 px and at 168 (the
// position table resampled as timm's checkpoint filter does for the model made at that size).
TEST_F(Families, AIMv2LikeTimm) {
  expect_like_timm("aimv2");
  expect_like_timm("aimv2", "reference_168.safetensors", 168);
  const ViTConfig c = ViT::load(model("aimv2")).config();
  EXPECT_EQ(c.family, Family::AIMv2);
  EXPECT_EQ(c.norm, NormKind::Rms);
  EXPECT_TRUE(c.patch_norm && c.patch_bias && c.pos_embed && c.pool.final_norm && c.swiglu());
  EXPECT_FALSE(c.class_token || c.attn.qkv_bias || c.proj_bias || c.pool.fc_norm || c.rope.on);
  EXPECT_EQ(c.pool.kind, Pool::Avg);
  EXPECT_EQ(c.eps, 1e-5f);
  EXPECT_EQ(c.mlp, 176);  // int(64 * 2.75)
  EXPECT_EQ(c.classes, 0);
  // Described by its tensors and model_args alone ("vit_custom"), its tensors (patch_embed.norm) still say AIMv2;
  // RMSNorm is in no tensor but the missing biases.
  TempDir d;
  EXPECT_EQ(ViT::load(with_config(d, model("aimv2"), "aimv2_custom", [](nlohmann::json& j) {
              j["architecture"] = "vit_custom";
            })).config().family, Family::AIMv2);
  const test::Result r = run_vit("inspect " + model("aimv2"));
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* want : {"AIMv2, a norm right after the patch embedding (patch_embed.norm), RMSNorm for every norm",
                           "no q, k, v biases, no attn.proj or MLP biases", "mean of patch tokens, final norm, RMSNorm eps 1e-05"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  // A classic ViT's name over AIMv2's tensors is refused, not run with LayerNorms.
  expect_error([&] {
    ViT::load(with_config(d, model("aimv2"), "vit", [](nlohmann::json& j) { j["architecture"] = "vit_large_patch14_224"; }));
  }, "vit_large_patch14_224 is a ViT, but");
}

// EVA-02 CLIP (eva.py's eva02_*_clip_*): EVA-02 base/large with a LayerNorm on attention's output before attn.proj
// (scale_attn_inner), SwiGLU with its inner LayerNorm, rotary embedding (ref_feat_shape 16x16), the class token
// after the final norm, and the projection into the joint image-text space. At 224 px and at 160 (the position
// table resampled, the rotary grid 10x10 rescaled to 16x16).
TEST_F(Families, EVA02CLIPLikeTimm) {
  expect_like_timm("eva02_clip");
  expect_like_timm("eva02_clip", "reference_160.safetensors", 160);
  const ViTConfig c = ViT::load(model("eva02_clip")).config();
  EXPECT_EQ(c.family, Family::EVA02Clip);
  EXPECT_TRUE(c.attn.norm && c.mlp_norm && c.swiglu() && c.rope.on && !c.attn.qkv_fused && !c.attn.k_bias && c.class_token);
  EXPECT_TRUE(c.pool.final_norm && !c.pool.fc_norm);
  EXPECT_EQ(c.norm, NormKind::Layer);
  EXPECT_EQ(c.pool.kind, Pool::Token);
  EXPECT_EQ(c.rope.ref_h, 16);
  EXPECT_EQ(c.pool.head, HeadKind::Projection);
  EXPECT_EQ(Classifier(model("eva02_clip")).classes(), 0);
  const test::Result r = run_vit("inspect " + model("eva02_clip"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("LayerNorm on attention's output before attn.proj (attn.norm: scale_attn_inner)"), std::string::npos)
      << r.out;
}

// Naver's RoPE-Axial ViTs (eva.py's vit_*_patch16_rope_224, _ape): the rotary embedding of RotaryEmbeddingCat with
// temperature 100 and 'xy' indexing, no reference grid; no position table, or one over the patches only (_ape);
// the class token pooled after the final norm, layer scale, q/k/v biases. At 224 px and at 160 (10x10 patches:
// the rotary grid rebuilt, the _ape table resampled).
TEST_F(Families, NaverRopeViTsLikeTimm) {
  for (const std::string name : {"vit_rope_axial", "vit_rope_ape"}) {
    expect_like_timm(name);
    expect_like_timm(name, "reference_160.safetensors", 160);
    const ViTConfig c = ViT::load(model(name)).config();
    EXPECT_EQ(c.family, Family::RopeViT);
    EXPECT_TRUE(c.rope.on && c.rope.xy && c.class_token && c.layer_scale && c.attn.k_bias && c.pool.final_norm && !c.pool.fc_norm);
    EXPECT_EQ(c.rope.ref_h, 0);
    EXPECT_EQ(c.rope.temperature, 100.f);
    EXPECT_EQ(c.pool.kind, Pool::Token);
    EXPECT_EQ(c.pos_embed, name == "vit_rope_ape");
    EXPECT_EQ(c.no_embed_class, name == "vit_rope_ape");
  }
}

// Naver's RoPE-Mixed ViT (vit_base_patch16_rope_mixed_224): RotaryEmbeddingMixed's frequencies learned per block and
// head (rope.freqs, randomised near their initial values), each block's q and k heads turned by their own angles.
TEST_F(Families, NaverRopeMixedViTLikeTimm) {
  expect_like_timm("vit_rope_mixed");
  expect_like_timm("vit_rope_mixed", "reference_160.safetensors", 160);
  const ViTConfig c = ViT::load(model("vit_rope_mixed")).config();
  EXPECT_EQ(c.rope.kind, RopeKind::Mixed);
  EXPECT_TRUE(c.rope.on && c.rope.xy && c.class_token && !c.pos_embed);
  // Its frequencies are in the file: a config naming a RoPE-Axial architecture over them is refused, and the reverse.
  TempDir d;
  expect_error([&] {
    ViT::load(with_config(d, model("vit_rope_mixed"), "axial", [](nlohmann::json& j) {
      j["architecture"] = "vit_base_patch16_rope_224";
    }));
  }, "vit_base_patch16_rope_224 has no learned rotary frequencies, but");
  expect_error([&] {
    ViT::load(with_config(d, model("vit_rope_axial"), "mixed", [](nlohmann::json& j) {
      j["architecture"] = "vit_base_patch16_rope_mixed_224";
    }));
  }, "vit_base_patch16_rope_mixed_224 learns its rotary frequencies, but");
}

// docs/MODELS.md's reason for refusing an architecture ("" for one it runs).
std::string models_md_reason(const std::string& arch) {
  for (const ModelsMdRow& r : models_md())
    if (r.arch == arch && !r.runs) return r.why;
  return "";
}

// No guessed model. A checkpoint without its config.json is refused (exit 2), naming what its tensors do not say
// and the flags that say it: a post-norm ViT (timm's ResPostBlock, a classic ViT's tensors: once run as a pre-norm
// one, off by 1.9) and a Perception Encoder spatial tower (a CLIP tower's tensors, its rotary embedding in none:
// once off by 3.8), both made by timm. Named by --arch or by their own config.json, each is refused naming its
// family, as docs/MODELS.md gives it.
TEST_F(Families, CheckpointsWithoutTheirConfigAreRefused) {
  TempDir d;
  const std::string photo = reference_photos()[0];
  for (const auto& [name, arch] : {std::pair<std::string, std::string>{"rpn", "vit_base_patch16_rpn_224"},
                                   {"pe_spatial", "vit_pe_spatial_tiny_patch16_512"}}) {
    const std::string bare = d.file(name);
    ASSERT_EQ(run_shell("mkdir -p " + bare + " && ln -s " + model(name) + "/model.safetensors " + bare + "/"), 0);
    test::Result r = run_vit("embed -m " + bare + " " + photo);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find(bare + "/model.safetensors: no config.json: the number of heads, the block order (pre- or "
                         "post-norm), the MLP's activation, the norms' eps, the pooling, any rotary embedding and the "
                         "preprocessing are not in the tensors; name the architecture (--arch, e.g."),
              std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
    const std::string why = models_md_reason(arch);
    ASSERT_NE(why, "") << arch << " is not among docs/MODELS.md's refused names";
    for (const std::string flags : {"--arch " + arch, "--config " + model(name) + "/config.json"}) {
      r = run_vit("embed -m " + bare + " " + flags + " " + photo);
      EXPECT_EQ(r.code, 2) << flags << ": " << r.err;
      EXPECT_NE(r.err.find(why), std::string::npos) << flags << ": " << r.err;
    }
  }
}

// --arch NAME for a checkpoint without its config: timm's vit_small_patch16_224 shrunk in depth, from the photos
// through the engine's decoding and preprocessing (the name's default pretrained config: mean and std 0.5, crop
// 0.9; ImageNet's, the old generic default, put it off by 1.3) equal to timm's data pipeline and model. An --arch
// its tensors contradict is refused, naming both shapes.
TEST_F(Families, ArchNamesACheckpointWithoutItsConfig) {
  TempDir d;
  const std::string bare = d.file("bare"), out = d.file("out.safetensors");
  ASSERT_EQ(run_shell("mkdir -p " + bare + " && ln -s " + model("vit_small_depth2") + "/model.safetensors " + bare + "/"), 0);
  const auto files = reference_photos();
  const SafeTensors ref(model("vit_small_depth2") + "/reference.safetensors");
  for (const std::string flags : {"", "--head"}) {
    const test::Result r = run_vit("embed -m " + bare + " --arch vit_small_patch16_224 " + flags + " -o " + out + " " +
                                   files[0] + " " + files[1] + " " + files[2]);
    ASSERT_EQ(r.code, 0) << r.err;
    const float worst = max_abs_diff(SafeTensors(out).to_f32("embeddings"), ref.to_f32(flags.empty() ? "embeddings" : "outputs"));
    EXPECT_LT(worst, 1e-4f) << flags;
    std::printf("vit_small_patch16_224 (2 blocks) with --arch, from the photos%s: max |difference| from timm %.2e\n",
                flags.empty() ? "" : ", --head", double(worst));
  }
  const test::Result r = run_vit("embed -m " + bare + " --arch vit_base_patch16_224 " + files[0]);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--arch vit_base_patch16_224: timm's vit_base_patch16_224 is width 768, patch 16, MLP 3072, a "
                       "14x14 position table; " + bare + "/model.safetensors is width 384, patch 16, MLP 1536, a 14x14 "
                       "position table"), std::string::npos) << r.err;
}

// A timm CLIP tower's head is its projection into the joint image-text space, as OpenCLIP's and Hugging Face's
// are: no classes to label (a tower's 32 dimensions were classified as 32 classes), unless timm's pretrained tag
// says the weights were fine-tuned on labels (the clip model's default tag, laion2b_ft_in12k_in1k; the
// quickgelu one's is metaclip_2pt5b). vit inspect says which, and the embedding width vit embed gives; the
// library, `vit bench -m` and Python (python/tests/test_logits.py) count no classes for a projection.
TEST_F(Families, ACLIPTowersProjectionIsNoClassifier) {
  const std::string tower = model("clip_quickgelu");
  EXPECT_EQ(ViT::load(tower).config().pool.head, HeadKind::Projection);
  EXPECT_EQ(Classifier(tower).classes(), 0);
  test::Result r = run_vit("classify -m " + tower + " " + reference_photos()[0]);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no classifier head (embeddings only): use vit embed, or for a CLIP or SigLIP image tower vit "
                       "classify --text-embeddings"), std::string::npos) << r.err;
  r = run_vit("inspect " + tower);
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* want : {"MLP 256, a projection to 32 dimensions", "head           a projection into a joint image-text space",
                           "embedding      64 values per image from vit embed (the pooled features), 32 with --head (the projection)"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  EXPECT_EQ(r.out.find("\nlabels "), std::string::npos) << r.out;
  // One answer everywhere: no classes, no labels, in the library, `vit inspect` and `vit bench -m` alike.
  const Classifier c(tower);
  EXPECT_TRUE(c.labels().empty());
  EXPECT_EQ(c.info().classes, 0);
  EXPECT_EQ(c.info().projection, 32);
  r = run_vit("bench -m " + tower + " --iters 1 -b 1 --warmup 0");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(", classes 0, a projection to 32, "), std::string::npos) << r.out;
  // Fine-tuned on labels: a classifier.
  EXPECT_EQ(ViT::load(model("clip")).config().pool.head, HeadKind::Classifier);
  EXPECT_EQ(Classifier(model("clip")).classes(), 32);
  TempDir d;
  const std::string tuned = with_config(d, tower, "tuned", [](nlohmann::json& j) { j["pretrained_cfg"]["tag"] = "openai_ft_in1k"; });
  EXPECT_EQ(Classifier(tuned).classes(), 32);
  r = run_vit("inspect " + tuned);
  EXPECT_NE(r.out.find("MLP 256, 32 classes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("32 with --head (the logits)"), std::string::npos) << r.out;
  // No head: nothing to label, and no ImageNet line.
  r = run_vit("inspect " + model("dinov2"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("MLP 256, no head"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("embedding      64 values per image from vit embed (the pooled features)\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("ImageNet"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\nlabels "), std::string::npos) << r.out;
}

}  // namespace
}  // namespace vit::test

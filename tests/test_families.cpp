// The ViT families against timm itself: shrunk random-weight timm models (tests/make_timm_models.py, run at
// test time by the .venv's timm over Debian's torch) and timm's outputs on sample photos through its own data
// pipeline. Tokens (forward_features), embeddings (pre_logits) and outputs (model(x)) within 1e-4, from timm's
// input tensor and from the photos through our preprocessing; `vit embed` equal to them; the families not
// supported yet refused by name. Skipped without timm in .venv (scripts/setup.sh installs it), except under CI=true.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "models/vit.h"
#include "test_util.h"

namespace vit::test {
namespace {

const std::string kPython = VIT_SOURCE_DIR "/.venv/bin/python";

int run(const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::vector<std::string> photos() {
  const std::string dir = shared_data() + "/images/imagenet-samples/";
  return {dir + "n01440764_tench.JPEG", dir + "n02123597_Siamese_cat.JPEG", dir + "n02690373_airliner.JPEG"};
}

// The models, generated once per build tree and kept beside the vit binary (ctest runs every test in a
// process of its own; timm takes ~25 s): made again whenever the generator changes (the folder keeps
// the copy of it that made it), under a lock, so that tests running side by side wait for one another.
class Families : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!have_shared_data()) return;
    const std::string bin = VIT_BINARY, script = VIT_SOURCE_DIR "/tests/make_timm_models.py";
    const std::string dir = bin.substr(0, bin.find_last_of('/')) + "/timm_models";
    ready_ = run("cmp -s " + script + " " + dir + "/make_timm_models.py") == 0;
    if (ready_ || run(kPython + " -c 'import timm' >/dev/null 2>&1") == 0) dir_ = dir;
    if (ready_ || dir_.empty()) return;
    std::string make = "TIMM_FUSED_ATTN=0 " + kPython + " " + script + " " + dir_ + ".tmp";
    for (const auto& p : photos()) make += " " + p;
    const std::string cmd = "flock " + dir_ + ".lock sh -c 'cmp -s " + script + " " + dir_ +
                            "/make_timm_models.py || { rm -rf " + dir_ + ".tmp && " + make + " && cp " + script +
                            " " + dir_ + ".tmp/ && rm -rf " + dir_ + " && mv " + dir_ + ".tmp " + dir_ + "; }'";
    ready_ = run(cmd + " >/dev/null 2>&1") == 0;
  }
  void SetUp() override {
    REQUIRE_SHARED_DATA();
    if (dir_.empty()) {
      if (in_ci()) FAIL() << "CI=true but " << kPython << " has no timm (scripts/setup.sh installs tests/requirements.txt)";
      GTEST_SKIP() << kPython << " has no timm (pip install -r tests/requirements.txt into .venv); skipping";
    }
    ASSERT_TRUE(ready_) << "tests/make_timm_models.py failed";
  }
  static std::string model(const std::string& name) { return dir_ + "/" + name; }

  // Our forward pass on timm's own input tensor: tokens, embeddings and outputs against timm's.
  static void expect_like_timm(const std::string& name, const std::string& ref_name = "reference.safetensors",
                               int64_t img_size = 0) {
    const SafeTensors ref(model(name) + "/" + ref_name);
    ViT m = ViT::load(model(name), "", img_size);
    const ViTConfig& c = m.config();
    const auto input = ref.to_f32("input");
    const int64_t B = ref.get("input").shape[0];
    ASSERT_EQ(int64_t(input.size()), B * c.input_floats()) << name << ": " << c.summary();
    auto plan = m.make_plan(B);
    std::memcpy(plan->input(), input.data(), input.size() * sizeof(float));
    plan->run();
    const int64_t T = c.tokens(), D = c.width, C = c.classes;
    const float tokens = max_abs_diff(plan->tokens(), ref.to_f32("tokens").data(), size_t(B * T * D));
    const float emb = max_abs_diff(plan->features(), ref.to_f32("embeddings").data(), size_t(B * D));
    const float out = C ? max_abs_diff(plan->logits(), ref.to_f32("outputs").data(), size_t(B * C))
                        : max_abs_diff(plan->features(), ref.to_f32("outputs").data(), size_t(B * D));
    EXPECT_LT(tokens, 1e-4f) << name;
    EXPECT_LT(emb, 1e-4f) << name;
    EXPECT_LT(out, 1e-4f) << name;
    std::printf("%s (%s): max |difference| from timm: tokens %.2e, embeddings %.2e, outputs %.2e\n", name.c_str(),
                c.summary().c_str(), double(tokens), double(emb), double(out));
  }
  static std::string dir_;
  static bool ready_;
};
std::string Families::dir_;
bool Families::ready_ = false;

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

TEST_F(Families, FamilyNamed) {
  EXPECT_EQ(ViT::load(model("deit3")).config().family, "DeiT III");
  EXPECT_EQ(ViT::load(model("dinov2")).config().family, "DINOv2");
  const ViTConfig reg = ViT::load(model("dinov2_reg")).config();
  EXPECT_EQ(reg.family, "DINOv2");
  EXPECT_EQ(reg.reg_tokens, 4);
  EXPECT_TRUE(reg.layer_scale);
  EXPECT_EQ(reg.classes, 0);
  EXPECT_EQ(reg.tokens(), 37 * 37 + 5);
  const ViTConfig clip = ViT::load(model("clip")).config(), quick = ViT::load(model("clip_quickgelu")).config();
  EXPECT_EQ(clip.family, "CLIP image tower");
  EXPECT_TRUE(clip.norm_pre && !clip.patch_bias && !clip.quick_gelu);
  EXPECT_EQ(clip.eps, 1e-5f);
  EXPECT_TRUE(quick.quick_gelu);
  const ViTConfig siglip = ViT::load(model("siglip")).config();
  EXPECT_EQ(siglip.family, "SigLIP image tower");
  EXPECT_EQ(siglip.pool, Pool::Map);
  EXPECT_FALSE(siglip.class_token);
}

TEST_F(Families, UnsupportedFamiliesRefusedByName) {
  for (const auto& [name, family] : std::vector<std::pair<std::string, std::string>>{
           {"beit", "BEiT"}, {"eva02", "EVA-02"}})
    expect_error([&] { ViT::load(model(name)); }, family + " checkpoint: not supported yet");
}

// The whole path: our decoding and preprocessing of the photos, then the model, against timm's pipeline.
TEST_F(Families, EmbedFromPhotosLikeTimm) {
  for (const std::string name : {"vit", "deit3", "dinov2_reg"}) {
    const SafeTensors ref(model(name) + "/reference.safetensors");
    Classifier c(model(name));
    EmbedOptions o;
    o.tokens = true;
    const auto got = c.embed(photos(), o);
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
  const auto files = photos();
  const std::string args = files[0] + " " + files[1] + " " + files[2];
  for (const std::string name : {"vit", "dinov2"}) {
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
    const test::Result r = run_vit(cmd + " -m " + model("dinov2") + " " + photos()[0]);
    EXPECT_EQ(r.code, 2) << cmd;
    EXPECT_NE(r.err.find("no classifier head (embeddings only): use vit embed"), std::string::npos) << cmd << ": " << r.err;
  }
}

}  // namespace
}  // namespace vit::test

// weights/export.py and PyTorch references: random torchvision ViTs of other shapes (ViT-S/16, ViT-B/32,
// ViT-Ti/8) saved as .pth, exported (F32, F16, BF16) and run against PyTorch's own logits; and the real
// DeiT-Tiny saved by torch.save in timm's and torchvision's names, exported back, equal to the original.
// Needs Debian's /usr/bin/python3 with python3-torch (installed by scripts/setup.sh): skipped without it,
// except under CI=true.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "models/network.h"
#include "test_util.h"

namespace vit::test {
namespace {

const std::string kPython = "/usr/bin/python3";

bool have_torch() { return std::system((kPython + " -c 'import torch, torchvision' >/dev/null 2>&1").c_str()) == 0; }

int run(const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string export_cmd(const std::string& pth, const std::string& out, const std::string& extra = "") {
  return kPython + " " VIT_SOURCE_DIR "/weights/export.py " + pth + " " + out + " " + extra;
}

std::vector<float> forward(ViT& m, const std::vector<float>& input, int64_t B) {
  std::vector<float> out(size_t(B * m.config().classes));
  m.forward(input.data(), B, out.data());
  return out;
}

class Export : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_SHARED_DATA();
    if (!have_torch()) {
      if (in_ci()) FAIL() << "CI=true but " << kPython << " has no torch/torchvision (scripts/setup.sh installs them)";
      GTEST_SKIP() << kPython << " has no torch/torchvision (apt-get install python3-torch python3-torchvision); skipping";
    }
  }
  std::string deit() const { return shared_data() + "/models/deit_tiny_patch16_224.fb_in1k"; }
};

TEST_F(Export, RandomTorchvisionViTsMatchPyTorch) {
  TempDir d;
  ASSERT_EQ(run(kPython + " " VIT_SOURCE_DIR "/tests/make_torch_models.py " + d.path() + " " + deit() +
                "/model.safetensors >/dev/null"),
            0);
  for (const auto& [name, heads] : {std::pair<std::string, int>{"vit_small_patch16_224_depth4", 6},
                                    {"vit_base_patch32_224_depth2", 12}, {"vit_tiny_patch8_224_depth2", 3}}) {
    const std::string dir = d.file("random/" + name);
    const SafeTensors ref(dir + "/reference.safetensors");
    const auto input = ref.to_f32("input");
    // The heads are in no tensor (and these depths are none of torchvision's own ViTs'): refused without them.
    const std::string err = d.file("err");
    EXPECT_EQ(run(export_cmd(dir + "/model.pth", dir + "/guessed", "2>" + err)), 1);
    EXPECT_NE(read_file(err).find("error: the number of heads is not in the tensors: give --num-heads H, or --arch NAME"),
              std::string::npos) << read_file(err);
    EXPECT_FALSE(std::filesystem::exists(dir + "/guessed"));
    for (const std::string dtype : {"f32", "f16", "bf16"}) {
      const std::string out = dir + "/" + dtype;
      ASSERT_EQ(run(export_cmd(dir + "/model.pth", out, "--num-heads " + std::to_string(heads) + " --dtype " + dtype +
                                                           " >/dev/null 2>&1")),
                0) << name;
      ViT m = ViT::load(out);
      const float worst = max_abs_diff(forward(m, input, 2), ref.to_f32(dtype == "f32" ? "logits" : "logits_" + dtype));
      EXPECT_LT(worst, 1e-4f) << name << " " << dtype << ": " << m.config().summary();
      std::printf("%s, %s: max |logit difference| vs PyTorch %.2e (%s)\n", name.c_str(), dtype.c_str(), double(worst),
                  m.config().summary().c_str());
    }
  }
}

TEST_F(Export, DeitTinyRoundTripsThroughPth) {
  TempDir d;
  ASSERT_EQ(run(kPython + " " VIT_SOURCE_DIR "/tests/make_torch_models.py " + d.path() + " " + deit() +
                "/model.safetensors >/dev/null"),
            0);
  ViT original = ViT::load(deit());
  std::mt19937 rng(3);
  const auto input = random_vector(size_t(2 * 3 * 224 * 224), rng);
  const auto want = forward(original, input, 2);
  ASSERT_EQ(run(export_cmd(d.file("deit/deit_timm.pth"), d.file("timm"), "--arch deit_tiny_patch16_224")), 0);
  ASSERT_EQ(run(export_cmd(d.file("deit/deit_torchvision.pth"), d.file("tv"), "--num-heads 3")), 0);
  for (const std::string out : {"timm", "tv"}) {
    ViT m = ViT::load(d.file(out));
    EXPECT_EQ(forward(m, input, 2), want) << out;  // the same f32 weights: the same logits, bit for bit
  }
  EXPECT_EQ(ViT::load(d.file("timm")).config().pre.interpolation, Filter::Bicubic);
  EXPECT_EQ(ViT::load(d.file("tv")).config().pre.interpolation, Filter::Bilinear);
}

TEST_F(Export, BadInputIsOneErrorLine) {
  TempDir d;
  write_file(d.file("notes.pth"), "not a checkpoint");
  const std::string err = d.file("err");
  EXPECT_EQ(run(export_cmd(d.file("notes.pth"), d.file("out"), "2>" + err)), 1);
  const std::string msg = read_file(err);
  EXPECT_EQ(msg.rfind("error: " + d.file("notes.pth") + ": cannot read as a PyTorch checkpoint", 0), 0u) << msg;
  EXPECT_EQ(std::count(msg.begin(), msg.end(), '\n'), 1) << msg;
}

}  // namespace
}  // namespace vit::test

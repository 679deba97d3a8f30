// What the commands write and where: no output replaces a file the model is loaded from, an input, or a
// file this engine did not write (unless --force); `vit quantize` checks its output and calibration
// inputs before it calibrates and copies what loading reads; what the outputs record (labels, tokens).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cli_util.h"
#include "engine/io/safetensors.h"
#include "model_files.h"

namespace vit::test {
namespace {

namespace fs = std::filesystem;

// A tiny OpenCLIP image tower (open_clip_model.safetensors, open_clip_config.json): a projection of
// width 10 and no classifier, as test_model.cpp builds it.
void write_tiny_openclip(const std::string& dir) {
  TinySpec s;
  TensorMap t = tiny_vit_tensors(s, 21);
  for (const char* bias : {"patch_embed.proj.bias", "head.bias"}) std::fill(t[bias].second.begin(), t[bias].second.end(), 0.f);
  add_norm_pre(t, s.D, 11);
  write_tensors(dir + "/open_clip_model.safetensors", to_openclip_layout(t, s.depth));
  const nlohmann::json config = {{"model_cfg", {{"embed_dim", 10}, {"vision_cfg", {{"width", 32}, {"layers", 2}, {"head_width", 16},
                                                                                {"patch_size", 8}, {"image_size", 32}}}}}};
  write_file(dir + "/open_clip_config.json", config.dump());
}

// vit quantize copies what loading reads, found as loading finds it: an OpenCLIP tower's own names (its
// config would be lost as config.json) and a checkpoint not named model.safetensors, which the folder
// keeps, as its "run it with" line says; each runs at int8 from its rounded weights.
TEST_F(Cli, QuantizeCopiesWhatLoadingReads) {
  TempDir oc, out;
  write_tiny_openclip(oc.path());
  Result r = run_vit("quantize -m " + oc.path() + " --calib " + images_.file("a.jpg") + " -o " + out.file("q"));
  ASSERT_EQ(r.code, 0) << r.err;
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(out.file("q"))) names.insert(e.path().filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"open_clip_model.safetensors", "open_clip_config.json", "int8.safetensors"}));
  r = run_vit("embed -m " + out.file("q") + " --precision int8 " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 0) << r.err;

  fs::copy_file(model_.file("model.safetensors"), oc.file("tiny.safetensors"));
  fs::copy_file(model_.file("config.json"), oc.file("config.json"));
  r = run_vit("quantize -m " + oc.file("tiny.safetensors") + " --calib " + images_.file("a.jpg") + " -o " + out.file("t"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("run it with: --model " + out.file("t/tiny.safetensors") + " --precision int8"), std::string::npos)
      << r.out;
  r = run_vit("inspect -m " + out.file("t/tiny.safetensors") + " --precision int8");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(out.file("t/int8.safetensors") + ": rounded by vit quantize (GPTQ), used"), std::string::npos)
      << r.out;
}

// A model folder named with a trailing slash: its files are found as without one, and named with one
// slash ("DIR//config.json" before).
TEST_F(Cli, AFolderWithATrailingSlashNamesItsFilesOnce) {
  const Result r = run_vit("inspect " + model_.path() + "/");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(model_.path() + "/config.json"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("//"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace vit::test

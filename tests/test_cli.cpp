// The `vit` binary as a user runs it: output forms, exit codes, and one clear error per bad input.
// Uses a tiny random model and images written at test time, so it needs nothing from ../shared.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <map>
#include <set>
#include <sstream>

#include "cli_util.h"
#include "model_files.h"
#include "models/families.h"
#include "models/network.h"
#include "engine/io/safetensors.h"
#include "engine/io/text.h"

namespace vit::test {
namespace {

TEST_F(Cli, ClassifiesAFolderAndReportsTheBadImage) {
  const Result r = run_vit("classify " + model() + " --json --topk 3 " + images_.path());
  EXPECT_EQ(r.code, 1) << r.err;
  const auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 4u) << r.out;  // a.jpg, b.PNG, c.bmp, d_broken.jpg in sorted order; notes.txt skipped
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(lines[size_t(i)].contains("top")) << lines[size_t(i)];
    EXPECT_EQ(lines[size_t(i)]["top"].size(), 3u);
    EXPECT_EQ(lines[size_t(i)]["top"][0]["label"].get<std::string>().rfind("class_", 0), 0u);
    EXPECT_GE(lines[size_t(i)]["top"][0]["prob"].get<double>(), lines[size_t(i)]["top"][1]["prob"].get<double>());
  }
  EXPECT_NE(lines[0]["file"].get<std::string>().find("a.jpg"), std::string::npos);
  EXPECT_NE(lines[3]["file"].get<std::string>().find("d_broken.jpg"), std::string::npos);
  EXPECT_NE(lines[3]["error"].get<std::string>().find("not a supported image"), std::string::npos);
}

TEST_F(Cli, AllGoodExitsZeroWithTextOutput) {
  const Result r = run_vit("classify " + model() + " " + images_.file("a.jpg") + " " + images_.file("c.bmp"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(images_.file("a.jpg")), std::string::npos);
  EXPECT_NE(r.out.find("class_"), std::string::npos);
  EXPECT_EQ(r.err, "");  // quiet by default
}

TEST_F(Cli, BadImageInTextModeIsOneErrorLine) {
  const Result r = run_vit("classify " + model() + " " + images_.file("d_broken.jpg"));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "error: " + images_.file("d_broken.jpg") +
                       ": not a supported image (JPEG, PNG, BMP, GIF, TGA, PNM, WebP, TIFF, JPEG 2000)\n");
}

TEST_F(Cli, SaveLogitsKeepsOutputOrder) {
  TempDir out;
  const Result r = run_vit("classify " + model() + " --batch 2 --save-logits " + out.file("l.safetensors") + " " +
                           images_.file("c.bmp") + " " + images_.path());
  EXPECT_EQ(r.code, 1) << r.err;  // the broken image is in the folder
  SafeTensors st(out.file("l.safetensors"));
  EXPECT_EQ(st.get("logits").shape, (std::vector<int64_t>{4, 10}));
  const auto files = nlohmann::json::parse(st.metadata().at("files"));
  ASSERT_EQ(files.size(), 4u);
  EXPECT_EQ(files[0], images_.file("c.bmp"));
  EXPECT_NE(files[1].get<std::string>().find("a.jpg"), std::string::npos);
  // c.bmp twice, at rows 0 and 1 of two batches: the same logits (to the last few bits: AVX2's f32 gemm
  // sums a batch's last rows in another order).
  const auto l = st.to_f32("logits");
  for (int c = 0; c < 10; ++c) EXPECT_NEAR(l[size_t(c)], l[size_t(30 + c)], 1e-5);
}

TEST_F(Cli, FoldersAreWalkedRecursivelyInSortedOrder) {
  TempDir tree;
  std::filesystem::create_directories(tree.file("b/inner"));
  std::filesystem::create_directories(tree.file("a"));
  std::filesystem::copy_file(images_.file("a.jpg"), tree.file("b/inner/z.JPG"));
  std::filesystem::copy_file(images_.file("c.bmp"), tree.file("a/y.bmp"));
  std::filesystem::copy_file(images_.file("b.PNG"), tree.file("x.png"));
  const Result r = run_vit("classify " + model() + " --json " + tree.path());
  EXPECT_EQ(r.code, 0) << r.err;
  const auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["file"], tree.file("a/y.bmp"));
  EXPECT_EQ(lines[1]["file"], tree.file("b/inner/z.JPG"));
  EXPECT_EQ(lines[2]["file"], tree.file("x.png"));
}

TEST_F(Cli, FolderWithoutImagesWarns) {
  TempDir empty;
  const Result r = run_vit("classify " + model() + " " + empty.path());
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find(empty.path() + ": no image files (.jpg .jpeg .png .bmp .webp .tif .tiff .jp2 .j2k) in this folder"), std::string::npos) << r.err;
}

TEST_F(Cli, UnwritableLogitsFileIsRefusedBeforeAnyWork) {
  const Result r = run_vit("classify " + model() + " --save-logits /nonexistent/dir/l.safetensors " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("/nonexistent/dir/l.safetensors: cannot create a file in its folder"), std::string::npos) << r.err;
}

// A PATH that does not exist, or a broken symbolic link named on the command line, is one input that
// failed, as in a folder and as --stdin must have it (it cannot check before the work): its error line,
// the others done, exit 1. The same in classify, eval and explain.
TEST_F(Cli, MissingPathIsOneFailedInput) {
  TempDir links;
  std::filesystem::create_symlink(links.file("gone.jpg"), links.file("broken.jpg"));
  const std::string bad = " /nonexistent/cat.jpg " + links.file("broken.jpg") + " ";
  const auto expect_errors = [&](const Result& r, const std::string& what) {
    EXPECT_EQ(r.code, 1) << what << ": " << r.err;
    EXPECT_NE(r.err.find("/nonexistent/cat.jpg: no such file or directory"), std::string::npos) << what << ": " << r.err;
    EXPECT_NE(r.err.find(links.file("broken.jpg") + ": broken symbolic link"), std::string::npos) << what << ": " << r.err;
  };
  Result r = run_vit("classify " + model() + bad + images_.file("a.jpg"));
  expect_errors(r, "classify");
  EXPECT_NE(r.out.find("a.jpg"), std::string::npos);  // the good image is classified
  r = run_vit("classify " + model() + " --json" + bad + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 1);
  const auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  EXPECT_EQ(lines[1]["error"], "broken symbolic link");
  EXPECT_TRUE(lines[2].contains("top"));
  write_file(links.file("list"), links.file("broken.jpg") + "\n");
  r = run_vit("classify " + model() + " --stdin --json < " + links.file("list"));
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.out.find("broken symbolic link"), std::string::npos) << r.out;
  TempDir out;
  r = run_vit("explain " + model() + " --out " + out.path() + bad + images_.file("a.jpg"));
  expect_errors(r, "explain");
  EXPECT_TRUE(std::filesystem::is_regular_file(out.file("a.attention.png")));
  write_file(out.file("labels.csv"), "a.jpg,0\n");
  r = run_vit("eval " + model() + " --labels-csv " + out.file("labels.csv") + bad + images_.file("a.jpg"));
  expect_errors(r, "eval");
  EXPECT_NE(r.out.find("1 of 3 images evaluated"), std::string::npos) << r.out;
}

// Text output lines the probabilities up by terminal columns, not bytes (CJK labels take two a
// character), and escapes a tab in a label as file names are escaped.
TEST_F(Cli, TextOutputPadsByDisplayWidthAndEscapesTabs) {
  std::string labels;
  const char* names[] = {"\xe9\x87\x91\xe9\xad\x9a", "tench", "with\ttab", "x", "caf\xc3\xa9",
                         "\xe3\x82\xb3\xe3\x82\xa4", "a", "b", "c", "d"};
  for (const char* n : names) labels += std::string(n) + "\n";
  write_file(model_.file("wide.txt"), labels);
  const Result r = run_vit("classify " + model() + " --labels " + model_.file("wide.txt") + " -k 10 " + images_.file("a.jpg"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("with\\x09tab"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\t'), std::string::npos) << r.out;
  std::istringstream lines(r.out);
  std::string line;
  std::getline(lines, line);  // the file name
  std::set<size_t> columns;
  while (std::getline(lines, line)) columns.insert(display_width(line.substr(0, line.rfind("  ") + 2)));
  EXPECT_EQ(columns.size(), 1u) << r.out;
}

// A model with a NaN weight loads (with a warning naming the tensor), and its answers say they are not
// numbers: an error per image and exit 1, never a label ranked among NaNs.
TEST_F(Cli, NanWeightIsNamedAtLoadAndAnswersAreErrors) {
  TempDir nan_model;
  TensorMap t = tiny_vit_tensors(TinySpec{}, 1);
  t.at("blocks.1.mlp.fc2.weight").second[5] = std::nanf("");
  write_tensors(nan_model.file("model.safetensors"), t);
  std::filesystem::copy_file(model_.file("config.json"), nan_model.file("config.json"));
  const Result r = run_vit("classify --model " + nan_model.path() + " --json " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("warning: " + nan_model.file("model.safetensors") +
                       ": tensor blocks.1.mlp.fc2.weight holds 1 value(s) that are not finite"), std::string::npos) << r.err;
  const auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  EXPECT_FALSE(lines[0].contains("top")) << lines[0];
  EXPECT_NE(lines[0]["error"].get<std::string>().find("logits are not numbers"), std::string::npos) << lines[0];
}

TEST_F(Cli, UnusableModelIsUsageError) {
  Result r = run_vit("classify --model /nonexistent/m.safetensors " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error: /nonexistent/m.safetensors: no such file or directory\n");
  write_file(model_.file("junk.safetensors"), "garbage");
  r = run_vit("classify --model " + model_.file("junk.safetensors") + " " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("junk.safetensors: not a safetensors file"), std::string::npos) << r.err;
}

TEST_F(Cli, BadFlagsAreUsageErrors) {
  EXPECT_EQ(run_vit("classify " + model() + " --topk 0 " + images_.file("a.jpg")).code, 2);
  EXPECT_EQ(run_vit("classify " + model() + " --batch abc " + images_.file("a.jpg")).code, 2);
  EXPECT_EQ(run_vit("classify " + model()).code, 2);  // no PATH
  EXPECT_EQ(run_vit("frobnicate").code, 2);
  const Result r = run_vit("classify " + model() + " --labels /nonexistent/labels.txt " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error: /nonexistent/labels.txt: cannot open: No such file or directory\n");
}

// --max-patches on a square model, for every command that takes it: one usage error naming the models that
// take it (timm's naflexvit_*, SigLIP towers made with use_naflex) and the model's fixed input.
TEST_F(Cli, MaxPatchesOnASquareModelNamesTheModelsThatTakeIt) {
  const std::string photo = images_.file("a.jpg");
  for (const std::string& command : std::vector<std::string>{"classify", "embed", "eval", "inspect",
                                                               "explain --out " + images_.path() + "/pictures"}) {
    const Result r = run_vit(command + " " + model() + " --max-patches 64" +
                             (command == "inspect" ? std::string() : " " + photo));
    EXPECT_EQ(r.code, 2) << command << ": " << r.err;
    for (const char* part : {"--max-patches applies to NaFlex models", "timm's naflexvit_*",
                                   "made with use_naflex=True", "model_args use_naflex true", "with a fixed"})
      EXPECT_NE(r.err.find(part), std::string::npos) << command << ": " << part << "\n" << r.err;
  }
}

// A tiny SigLIP 2 NaFlex tower in the names of timm's naflexvit.py: the tiny model's tensors without class token
// and head, its patch embedding a linear layer over channels-last patches (random, so the order of its columns
// does not matter), its position table [1, h, w, D], and an attention pool.
void write_tiny_naflex(const std::string& dir) {
  TinySpec s;
  s.class_token = false;
  TensorMap t = tiny_vit_tensors(s, 3);
  add_attn_pool(t, s.D, s.mlp, 4);
  const int64_t side = s.img / s.patch;
  t["embeds.proj.weight"] = {{s.D, 3 * s.patch * s.patch}, t.at("patch_embed.proj.weight").second};
  t["embeds.proj.bias"] = t.at("patch_embed.proj.bias");
  t["embeds.pos_embed"] = {{1, side, side, s.D}, t.at("pos_embed").second};
  for (const char* old : {"patch_embed.proj.weight", "patch_embed.proj.bias", "pos_embed", "head.weight", "head.bias"})
    t.erase(old);
  write_tensors(dir + "/model.safetensors", t);
  const nlohmann::json cfg = {
      {"architecture", "naflexvit_base_patch16_siglip"}, {"num_classes", 0}, {"global_pool", "map"},
      {"model_args", {{"embed_dim", s.D}, {"depth", s.depth}, {"num_heads", s.heads}, {"patch_size", s.patch},
                      {"pos_embed_grid_size", {side, side}}}},
      {"pretrained_cfg", {{"interpolation", "bicubic"}, {"mean", {0.5, 0.5, 0.5}}, {"std", {0.5, 0.5, 0.5}}}}};
  write_file(dir + "/config.json", cfg.dump(2));
}

// --tokens of a NaFlex model, whose images each have a grid of their own, is not given yet: a usage error
// before any work (exit 2, naming the flag), not a run that failed (exit 4); without it the model embeds.
TEST_F(Cli, NaflexTokensAreAUsageError) {
  TempDir naflex;
  write_tiny_naflex(naflex.path());
  Result r = run_vit("embed -m " + naflex.path() + " --tokens " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("error: --tokens: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" is a NaFlex model (SigLIP 2 NaFlex image tower): its token sequences are not given yet (each "
                       "image has a grid of its own); embed it without --tokens\n"),
            std::string::npos) << r.err;
  r = run_vit("embed -m " + naflex.path() + " " + images_.file("a.jpg"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json_lines(r.out).at(0)["embedding"].size(), 32u) << r.out;
}

TEST_F(Cli, LabelsFileNamesClasses) {
  std::string labels;
  for (int i = 0; i < 10; ++i) labels += "thing " + std::to_string(i) + "\n";
  write_file(model_.file("labels.txt"), labels);
  Result r = run_vit("classify " + model() + " --json --labels " + model_.file("labels.txt") + " " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(json_lines(r.out)[0]["top"][0]["label"].get<std::string>().rfind("thing ", 0), 0u);
  write_file(model_.file("short.txt"), "one\ntwo\n");
  r = run_vit("classify " + model() + " --labels " + model_.file("short.txt") + " " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("2 labels, but the model has 10 classes"), std::string::npos) << r.err;
}

TEST_F(Cli, BenchJsonLinesHoldTheFields) {
  const Result r = run_vit("bench " + model() + " --batch 1,3 --iters 2 --warmup 1 --json");
  EXPECT_EQ(r.code, 0) << r.err;
  const auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 2u);
  for (const auto& j : lines)
    for (const char* k : {"engine", "model", "batch", "threads", "images_per_sec", "ms_p50", "ms_p90", "ms_p99",
                          "gflops", "peak_rss_mb"})
      EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(lines[1]["batch"], 3);
  EXPECT_GT(lines[0]["images_per_sec"].get<double>(), 0);
}

TEST_F(Cli, BenchWritesCsvAndPlot) {
  TempDir out;
  const Result r = run_vit("bench " + model() + " --batch 1,2 --iters 2 --csv " + out.file("b.csv") + " --plot " +
                           out.file("b.svg"));
  EXPECT_EQ(r.code, 0) << r.err;
  const std::string csv = read_file(out.file("b.csv"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  EXPECT_NE(read_file(out.file("b.svg")).find("<polyline"), std::string::npos);
}

// --peak measures a matmul ceiling per precision (or says none can be made: bf16 under the AVX2 cap), and
// --profile sets each oneDNN matmul step against its own precision's ceiling, host steps against none.
TEST(CliBench, PeakAndProfileMeasureEachPrecision) {
  for (const std::string cap : {"", "ONEDNN_MAX_CPU_ISA=AVX2 "}) {
    const Result r = run_vit_env(cap, "bench --arch vit_tiny_patch16_224 --img-size 64 --precision int8 --batch 2 "
                                      "--iters 1 --warmup 0 --peak --profile");
    ASSERT_EQ(r.code, 0) << cap << r.err;
    std::map<std::string, std::string> rows;  // the first word of each stderr line -> the line
    std::istringstream lines(r.err);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream words(line);
      std::string first;
      if (words >> first) rows.emplace(first, line);
    }
    ASSERT_TRUE(rows.count("matmul")) << r.err;
    for (const std::string p : {"f32", "bf16", "int8"}) {
      ASSERT_TRUE(rows.count(p)) << cap << p << ": " << r.err;
      double gops = -1;
      std::sscanf(rows[p].c_str(), "%*s %lf", &gops);
      if (p == "bf16" && rows[p].find("none") != std::string::npos) EXPECT_EQ(gops, 0) << rows[p];
      else EXPECT_GT(gops, 0) << cap << rows[p];
    }
    if (!cap.empty()) EXPECT_NE(rows["int8"].find("no VNNI here (avx2)"), std::string::npos) << rows["int8"];
    EXPECT_NE(rows["attn.qkv"].find("% int8 "), std::string::npos) << cap << r.err;
    EXPECT_NE(rows["mlp.fc2"].find("% int8 "), std::string::npos) << cap << r.err;
    EXPECT_NE(rows["patch_embed.proj"].find("% f32 "), std::string::npos) << cap << r.err;
    for (const std::string host : {"attn.attend", "norm1", "mlp.fc1.dequantize"}) {
      ASSERT_TRUE(rows.count(host)) << host << ": " << r.err;
      EXPECT_EQ(rows[host].find('%', rows[host].find('%') + 1), std::string::npos) << rows[host];
    }
    EXPECT_TRUE(rows.count("oneDNN")) << r.err;
  }
}

// `vit bench --arch` takes every name docs/MODELS.md lists as running (one list: test_model.cpp builds each,
// shrunk; tests/test_arch_walk.cpp, label walk, left out of scripts/test.sh, benches each at full size): here the
// smallest of each family row's names, through the command at two patches a side. A name MODELS.md refuses gets its reason there, as `vit embed`
// gives it for a checkpoint naming it, not "unknown architecture".
TEST(CliBench, ArchTakesEveryFamilysNamesAndRefusesWithModelsMdsReason) {
  std::map<const FamilyRow*, std::pair<int64_t, std::string>> smallest;  // per row: (parameters, name)
  for (const ModelsMdRow& row : models_md()) {
    if (!row.runs) {
      if (row.why.rfind("timm itself cannot", 0) == 0) continue;
      const Result r = run_vit("bench --arch " + row.arch + " --iters 1 -b 1");
      EXPECT_EQ(r.code, 2) << row.arch;
      EXPECT_EQ(r.err, "error: --arch: " + row.why + "\n") << row.arch;
      continue;
    }
    const int64_t parameters = ViT::parameters(config_for_arch(row.arch));
    auto [it, added] = smallest.try_emplace(family_of_arch(row.arch), parameters, row.arch);
    if (!added && parameters < it->second.first) it->second = {parameters, row.arch};
  }
  EXPECT_GT(smallest.size(), 20u);
  for (const auto& [family, small] : smallest) {
    const std::string& arch = small.second;
    const Result r = run_vit("bench --arch " + arch + " --img-size " + std::to_string(2 * config_for_arch(arch).patch) +
                             " -b 1 --iters 1 --warmup 0 --json");
    ASSERT_EQ(r.code, 0) << arch << ": " << r.err;
    const auto lines = json_lines(r.out);
    ASSERT_EQ(lines.size(), 1u) << r.out;
    EXPECT_EQ(lines[0]["model"], arch);
  }
}

// The families beyond the classic ViT by their timm names, at --img-size 56 to stay quick.
TEST(CliBench, ArchTakesTheNewFamiliesAndImgSize) {
  for (const std::string arch : {"vit_small_patch14_reg4_dinov2", "eva02_tiny_patch14_224"}) {
    const Result r = run_vit("bench --arch " + arch + " --img-size 56 --batch 1 --iters 1 --json");
    ASSERT_EQ(r.code, 0) << arch << ": " << r.err;
    const auto lines = json_lines(r.out);
    ASSERT_EQ(lines.size(), 1u) << r.out;
    EXPECT_EQ(lines[0]["model"], arch);
    EXPECT_GT(lines[0]["images_per_sec"].get<double>(), 0);
  }
}

TEST(CliBench, ArgumentErrors) {
  const std::pair<std::string, std::string> cases[] = {
      {"--arch vit_gigantic_patch3_999", "--arch: architecture 'vit_gigantic_patch3_999': not supported (docs/MODELS.md "
                                         "lists the timm architectures the engine runs"},
      {"--arch vit_tiny_patch16_224 --config " VIT_SOURCE_DIR "/README.md",
       "--config describes a checkpoint: give --model too, or drop it"},
      {"--arch vit_small_patch14_dinov2 --img-size 100", "image size 100 is not a multiple of the model's patch size 14"},
      {"--arch vit_tiny_patch16_224 --batch 0", "batch size 0 is out of range"},
      {"--arch vit_tiny_patch16_224 --batch 1,x", "'x' is not a number"},
      {"--arch vit_tiny_patch16_224 --seconds 1", "--seconds excludes --iters"}};
  for (const auto& [args, message] : cases) {
    const Result r = run_vit("bench " + args + " --iters 1");
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
  }
}


TEST_F(Cli, MaxPixelsRefusesLargeImagesBeforeDecoding) {
  const Result r = run_vit("classify " + model() + " --json --max-pixels 1000 " + images_.file("a.jpg") + " " +
                           images_.file("c.bmp"));
  EXPECT_EQ(r.code, 1);
  const auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0]["error"].get<std::string>().find("1200 pixels is over the limit of 1000"), std::string::npos)
      << lines[0];
  EXPECT_EQ(run_vit("classify " + model() + " --max-pixels 1200 " + images_.file("a.jpg")).code, 0);
  EXPECT_EQ(run_vit("classify " + model() + " --max-pixels 0 " + images_.file("a.jpg")).code, 2);
}


// A folder named with a trailing slash: its config is folder/config.json, not folder//config.json.
TEST_F(Cli, InspectNamesAFoldersFilesOnceSlashed) {
  const Result r = run_vit("inspect " + model_.path() + "/");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(model_.file("config.json") + "\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("//"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("embedding      32 values per image from vit embed (the pooled features), 10 with --head (the logits)"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("labels         none in the files"), std::string::npos) << r.out;
}

TEST_F(Cli, InspectSaysWhatItUnderstoodAndWhereFrom) {
  Result r = run_vit("inspect " + model_.path() + " --img-size 48");
  EXPECT_EQ(r.code, 0) << r.err;
  for (const char* want : {"layout         timm names, F32", "patch 8, width 32, depth 2, heads 2, MLP 64, 10 classes",
                           "tokens         37 = 36 patches (6x6) + class token", "resampled to 6x6",
                           "input size     --img-size", "FLOPs/image"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  EXPECT_NE(r.out.find("  heads          " + model_.file("config.json") + "\n"), std::string::npos) << r.out;
  r = run_vit("inspect " + model_.path() + " --precision int8");  // the weights as int8 keeps them
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("precision      int8, weights"), std::string::npos) << r.out;
  r = run_vit("inspect " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(images_.file("a.jpg") + ": "), std::string::npos) << r.err;
  // -m as the other commands take it, says the same; the path twice is refused.
  const Result bare = run_vit("inspect " + model_.path()), flag = run_vit("inspect -m " + model_.path());
  EXPECT_EQ(flag.code, 0) << flag.err;
  EXPECT_EQ(flag.out, bare.out);
  r = run_vit("inspect -m " + model_.path() + " " + model_.path());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("excludes"), std::string::npos) << r.err;
}

TEST_F(Cli, BadPrecisionIsAUsageError) {
  Result r = run_vit("classify " + model() + " --precision int4 " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--precision: int4 not in {f32,bf16,int8}"), std::string::npos) << r.err;
  r = run_vit("bench " + model() + " --precision f16 --iters 1");
  EXPECT_EQ(r.code, 2);
}

// An ISA cap oneDNN honours (AVX2, which every CPU of this kind has) takes effect, and under it and
// without it no forward pass of any precision runs one of oneDNN's reference kernels.
TEST_F(Cli, NoReferenceKernelsUnderEachIsaCap) {
  for (const std::string cap : {"", "ONEDNN_MAX_CPU_ISA=AVX2 "}) {
    const Result isa = run_vit_env(cap, "inspect " + model_.path());
    ASSERT_EQ(isa.code, 0) << isa.err;
    if (!cap.empty()) EXPECT_NE(isa.out.find("oneDNN runs it as avx2"), std::string::npos) << isa.out;
    const bool bf16 = isa.out.find(", bf16") != std::string::npos;
    for (const std::string p : {"f32", "int8", "bf16"}) {
      if (p == "bf16" && !bf16) continue;
      const Result r = run_vit_env(cap + "ONEDNN_VERBOSE=1 ", "bench " + model() + " --batch 1,3 --iters 1 --warmup 0 --precision " + p);
      ASSERT_EQ(r.code, 0) << cap << p << ": " << r.err;
      size_t execs = 0;
      bool running = false;  // the forward passes: after the table header (loading reorders weights once)
      std::istringstream lines(r.out);
      for (std::string line; std::getline(lines, line);) {
        running = running || line.find("img/s") != std::string::npos;
        if (!running || line.rfind("onednn_verbose,exec,", 0) != 0) continue;
        ++execs;
        const std::string impl = line.substr(line.find(',', line.find(',', 20) + 1) + 1);
        EXPECT_NE(impl.rfind("ref", 0), 0u) << cap << p << ": " << line;
      }
      EXPECT_GT(execs, 10u) << cap << p;
    }
  }
}

// The logits of `classify --save-logits` for the three good images, one row per image.
std::vector<float> saved_logits(const std::string& args, const std::string& images) {
  TempDir out;
  const Result r = run_vit("classify " + args + " --save-logits " + out.file("l.safetensors") + " " + images);
  EXPECT_EQ(r.code, 0) << args << ": " << r.err;
  return r.code == 0 ? SafeTensors(out.file("l.safetensors")).to_f32("logits") : std::vector<float>{};
}

// vit quantize: a folder that runs at --precision int8 from its rounded weights (not those rounded at load),
// still runs f32 exactly as the checkpoint it copied, and says so in vit inspect; a calibration image
// that does not decode is reported and left out (exit 1), the folder still written.
TEST_F(Cli, QuantizeWritesAFolderThatRunsItsRoundedWeights) {
  TempDir out;
  const std::string q = out.file("q");
  Result r = run_vit("quantize " + model() + " --calib " + images_.path() + " -o " + q);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("d_broken.jpg"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("8 layers rounded on both int8 grids from 3 calibration images"), std::string::npos) << r.out;
  SafeTensors st(q + "/int8.safetensors");
  EXPECT_EQ(st.metadata().at("calibration_images"), "3");
  for (const char* t : {"blocks.1.mlp.fc2.q127", "blocks.1.mlp.fc2.q64"}) {
    EXPECT_EQ(st.get(t).dtype, DType::I8) << t;
    EXPECT_EQ(st.get(t).shape, (std::vector<int64_t>{32, 64})) << t;
  }
  EXPECT_TRUE(std::filesystem::exists(q + "/model.safetensors"));
  EXPECT_TRUE(std::filesystem::exists(q + "/config.json"));

  const std::string images = images_.file("a.jpg") + " " + images_.file("b.PNG") + " " + images_.file("c.bmp");
  const auto f32 = saved_logits(model(), images), f32_q = saved_logits("--model " + q, images);
  const auto dynamic = saved_logits(model() + " --precision int8", images);
  const auto rounded = saved_logits("--model " + q + " --precision int8", images);
  ASSERT_EQ(f32.size(), 30u);
  ASSERT_EQ(rounded.size(), 30u);
  EXPECT_EQ(f32_q, f32);
  EXPECT_NE(rounded, dynamic);
  float scale = 0.f, worst = 0.f;
  for (size_t i = 0; i < f32.size(); ++i) scale = std::max(scale, std::fabs(f32[i])), worst = std::max(worst, std::fabs(rounded[i] - f32[i]));
  EXPECT_LT(worst, 0.05f * scale);
  r = run_vit("inspect " + q + " --precision int8");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("int8 weights   " + q + "/int8.safetensors: rounded by vit quantize (GPTQ), used"), std::string::npos) << r.out;
}

TEST_F(Cli, QuantizeRefusesBadCalibrationOutputsAndMismatchedFolders) {
  TempDir empty, broken, out, other;
  Result r = run_vit("quantize " + model() + " --calib " + empty.path() + " -o " + out.file("q"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no calibration images in " + empty.path()), std::string::npos) << r.err;
  std::filesystem::copy_file(images_.file("d_broken.jpg"), broken.file("x.jpg"));
  r = run_vit("quantize " + model() + " --calib " + broken.path() + " -o " + out.file("q"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("none of the 1 calibration images could be read"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out.file("q")));
  r = run_vit("quantize " + model() + " --calib " + images_.file("a.jpg") + " -o " + images_.path());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: " + images_.path() + ": exists as a folder that is not empty: pick a new folder for the "
                       "quantized model"), std::string::npos) << r.err;
  r = run_vit("quantize " + model() + " --calib " + images_.file("a.jpg") + " -o " + images_.file("notes.txt"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: " + images_.file("notes.txt") + ": exists as a file, not a folder: pick a new folder for the "
                       "quantized model"), std::string::npos) << r.err;
  r = run_vit("quantize " + model() + " --calib " + images_.file("a.jpg") + " -o /nonexistent/q");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("its folder /nonexistent does not exist"), std::string::npos) << r.err;
  // Rounded weights beside a checkpoint they were not made from: refused at load, naming the file.
  r = run_vit("quantize " + model() + " --calib " + images_.file("a.jpg") + " -o " + out.file("q"));
  ASSERT_EQ(r.code, 0) << r.err;
  TinySpec wider;
  wider.D = 48;
  write_tiny_model(other.path(), wider);
  std::filesystem::copy_file(out.file("q") + "/int8.safetensors", other.file("int8.safetensors"));
  r = run_vit("classify --model " + other.path() + " --precision int8 " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(other.file("int8.safetensors") + ": was not made from"), std::string::npos) << r.err;
  // ... or holding a layer the model does not have (on either grid: each CPU checks its own).
  const std::string rounded = out.file("q") + "/int8.safetensors";
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<TensorToWrite> tensors;
  std::map<std::string, std::string> metadata;
  {
    SafeTensors st(rounded);
    metadata = st.metadata();
    std::vector<std::pair<std::string, TensorView>> entries(st.tensors().begin(), st.tensors().end());
    const std::string fc2 = "blocks.1.mlp.fc2.";
    for (const auto& [name, t] : st.tensors())  // block 1's fc2 once more, as a block 2 the model lacks
      if (name.rfind(fc2, 0) == 0) entries.push_back({"blocks.2.mlp.fc2." + name.substr(fc2.size()), t});
    bytes.reserve(entries.size());
    for (const auto& [name, t] : entries) {
      bytes.push_back(st.bytes(name.rfind("blocks.2.", 0) == 0 ? "blocks.1." + name.substr(9) : name));
      tensors.push_back({name, t.shape, bytes.back().data(), t.dtype});
    }
  }
  ASSERT_EQ(tensors.size(), 8u * 4 + 4);  // 8 layers x (q, scale) x 2 grids, and block 2's fc2
  write_safetensors(rounded, tensors, metadata);
  r = run_vit("classify --model " + out.file("q") + " --precision int8 " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("holds blocks.2.mlp.fc2."), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("a layer this model does not have"), std::string::npos) << r.err;
}

TEST_F(Cli, Bf16IsRefusedByNameWhereTheCpuLacksIt) {
  const Result r = run_vit_env("ONEDNN_MAX_CPU_ISA=AVX2 ", "classify " + model() + " --precision bf16 " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bf16 needs a CPU with avx512_bf16 or AMX; oneDNN runs this one as avx2"), std::string::npos) << r.err;
}

// A folder whose labels are the model's own f32 answers: f32 scores 1.0, int8 agrees with it closely,
// and an unlabelled file is counted and listed, not fatal.
TEST_F(Cli, EvalScoresALabelledFolder) {
  const Result c = run_vit("classify " + model() + " --json " + images_.file("a.jpg") + " " + images_.file("b.PNG") +
                           " " + images_.file("c.bmp"));
  ASSERT_EQ(c.code, 0) << c.err;
  std::string csv = "file,index\n";
  for (const auto& j : json_lines(c.out))
    csv += std::filesystem::path(j["file"].get<std::string>()).filename().string() + "," +
           std::to_string(j["top"][0]["index"].get<int>()) + "\n";
  write_file(model_.file("labels.csv"), csv);
  Result r = run_vit("eval " + model() + " --json --labels-csv " + model_.file("labels.csv") + " " +
                     images_.file("a.jpg") + " " + images_.file("b.PNG") + " " + images_.file("c.bmp"));
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["images"], 3);
  EXPECT_EQ(j["top1"], 1.0);
  EXPECT_EQ(j["top5"], 1.0);
  EXPECT_TRUE(j["agreement"].is_null());
  r = run_vit("eval " + model() + " --json --precision int8 --reference f32 --labels-csv " + model_.file("labels.csv") +
              " " + images_.path());
  EXPECT_EQ(r.code, 1) << r.err;  // d_broken.jpg cannot be decoded
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["images"], 3);
  EXPECT_EQ(j["precision"], "int8");
  EXPECT_GE(j["agreement"].get<double>(), 2.0 / 3);
  EXPECT_LT(j["max_abs_logit_diff"].get<double>(), 0.5);
  ASSERT_EQ(j["failures"].size(), 1u);
  EXPECT_NE(j["failures"][0]["file"].get<std::string>().find("d_broken.jpg"), std::string::npos);
  write_file(model_.file("bad.csv"), "a.jpg,eleven\n");
  r = run_vit("eval " + model() + " --labels-csv " + model_.file("bad.csv") + " " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bad.csv: line 1: 'eleven' is not a class index (0 to 9)"), std::string::npos) << r.err;
}

// Without --labels-csv, a photo's class comes from what the model's classes are. Unnamed classes that are not
// ImageNet-1k's (the tiny model's class_0 ... class_9) are refused before any work, even for a photo named by an
// ImageNet synset (the tench is not class_0); classes with names of their own are read from the folder named
// as one of them; a 1000-class model's from the synset, a synset outside ImageNet-1k named as such.
TEST_F(Cli, EvalTakesEachPhotosClassFromWhatTheModelsClassesAre) {
  TempDir photos;
  std::filesystem::copy_file(images_.file("a.jpg"), photos.file("n01440764_tench.jpg"));
  Result r = run_vit("eval " + model() + " " + photos.file("n01440764_tench.jpg") + " " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("its 10 classes are not ImageNet-1k's and have no names (class_0 to class_9), so no file or "
                       "folder name can say a photo's class: give each photo's class index with --labels-csv"),
            std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("synset"), std::string::npos) << r.err;

  // Named classes: photos/<label>/..., each photo filed under the model's own answer for it.
  TempDir named;
  write_tiny_model(named.path(), TinySpec{});
  auto cfg = nlohmann::json::parse(read_file(named.file("config.json")));
  std::vector<std::string> labels;
  for (int i = 0; i < 10; ++i) labels.push_back("thing " + std::to_string(i));
  cfg["label_names"] = labels;
  write_file(named.file("config.json"), cfg.dump());
  const Result c = run_vit("classify -m " + named.path() + " --json " + images_.file("a.jpg") + " " +
                           images_.file("b.PNG") + " " + images_.file("c.bmp"));
  ASSERT_EQ(c.code, 0) << c.err;
  TempDir tree;
  for (const auto& j : json_lines(c.out)) {
    const std::filesystem::path file = j["file"].get<std::string>();
    std::filesystem::create_directories(tree.file(j["top"][0]["label"].get<std::string>() + "/inner"));
    std::filesystem::copy_file(file, tree.file(j["top"][0]["label"].get<std::string>() + "/inner/" + file.filename().string()));
  }
  std::filesystem::create_directories(tree.file("other"));
  std::filesystem::copy_file(images_.file("a.jpg"), tree.file("other/n01440764_tench.jpg"));
  r = run_vit("eval -m " + named.path() + " --json " + tree.path());
  EXPECT_EQ(r.code, 1) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["images"], 3) << r.out;
  EXPECT_EQ(j["top1"], 1.0) << r.out;
  ASSERT_EQ(j["failures"].size(), 1u) << r.out;
  EXPECT_EQ(j["failures"][0]["file"], tree.file("other/n01440764_tench.jpg"));
  EXPECT_EQ(j["failures"][0]["error"], "no folder named as one of the model's classes (thing 0, thing 1, ...), and no "
                                       "--labels-csv");

  // 1000 classes: ImageNet-1k's, by synset; one of ImageNet-21k's alone is not among them.
  TempDir imagenet;
  TinySpec wide;
  wide.classes = 1000;
  write_tiny_model(imagenet.path(), wide);
  std::filesystem::copy_file(images_.file("a.jpg"), photos.file("n00004475_organism.jpg"));
  r = run_vit("eval -m " + imagenet.path() + " --json " + photos.path());
  EXPECT_EQ(r.code, 1) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["images"], 1) << r.out;
  ASSERT_EQ(j["failures"].size(), 1u) << r.out;
  EXPECT_EQ(j["failures"][0]["error"], "its synset n00004475 is not one of ImageNet-1k's 1000 classes");
}

// --labels-csv is CSV as spreadsheets write it: quoted fields (a comma or a quote inside one), CRLF
// lines, a header; a file listed twice with two classes, a record that is not two fields or broken
// quoting is refused before any work, naming the line.
TEST_F(Cli, EvalLabelsCsvIsRealCsvAndRefusesContradictions) {
  TempDir dir;
  std::filesystem::copy_file(images_.file("a.jpg"), dir.file("we,ird \"one\".jpg"));
  write_file(dir.file("quoted.csv"), "\"file\",\"index\"\r\n\"we,ird \"\"one\"\".jpg\",\"3\"\r\nc.bmp,3\r\n\"c.bmp\",3\r\n");
  Result r = run_vit("eval " + model() + " --json --labels-csv " + dir.file("quoted.csv") + " '" +
                     dir.file("we,ird \"one\".jpg") + "' " + images_.file("c.bmp"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["images"], 2) << r.out;
  const std::vector<std::pair<std::string, std::string>> bad{
      {"a.jpg,1\nb.PNG,2\na.jpg,4\n", "line 3: a.jpg is class 4 here, but class 1 on line 1"},
      {"a.jpg,1,2\n", "line 1 is not file,index (3 fields)"},
      {"a.jpg,1\n\"b.PNG,2\n", "line 2: not CSV"},
  };
  for (const auto& [csv, want] : bad) {
    write_file(dir.file("bad.csv"), csv);
    r = run_vit("eval " + model() + " --labels-csv " + dir.file("bad.csv") + " " + images_.file("a.jpg"));
    EXPECT_EQ(r.code, 2) << csv;
    EXPECT_NE(r.err.find("bad.csv: " + want), std::string::npos) << csv << ": " << r.err;
    EXPECT_EQ(r.out, "");
  }
}

// vit explain on the tiny model: one picture per image explained (a stem met twice gets -2), the broken
// file an error line and exit 1, --save-attention rows for the explained images only, in order, and the
// shapes its help promises; a PNG as large as the photo allows and readable.
TEST_F(Cli, ExplainDrawsOnePicturePerImage) {
  TempDir out, twin;
  std::filesystem::copy_file(images_.file("a.jpg"), twin.file("a.jpg"));
  const Result r = run_vit("explain " + model() + " --out " + out.file("pics") + " --heads --json --save-attention " +
                           out.file("att.safetensors") + " " + images_.path() + " " + twin.file("a.jpg"));
  EXPECT_EQ(r.code, 1) << r.err;  // d_broken.jpg
  const auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 5u) << r.out;
  EXPECT_TRUE(lines[3].contains("error"));
  for (const std::string& name : {"a.attention.png", "a.heads.png", "b.attention.png", "c.attention.png",
                                  "a-2.attention.png", "a-2.heads.png"})
    EXPECT_TRUE(std::filesystem::is_regular_file(out.file("pics/" + name))) << name;
  EXPECT_FALSE(std::filesystem::exists(out.file("pics/d_broken.attention.png")));
  EXPECT_EQ(lines[4]["attention"], out.file("pics/a-2.attention.png"));
  const std::string png = read_file(out.file("pics/b.attention.png"));
  ASSERT_EQ(png.substr(1, 3), "PNG");
  const auto be32 = [&](size_t at) { return int(uint8_t(png[at])) << 24 | int(uint8_t(png[at + 1])) << 16 |
                                            int(uint8_t(png[at + 2])) << 8 | int(uint8_t(png[at + 3])); };
  const int w = be32(16), h = be32(20);  // IHDR
  EXPECT_EQ(w * 40, h * 30) << w << "x" << h;  // the photo's own proportions (30x40), enlarged to be read
  SafeTensors st(out.file("att.safetensors"));
  EXPECT_EQ(st.get("rollout").shape, (std::vector<int64_t>{4, 4, 4}));  // 32 px, patch 8: a 4x4 grid
  EXPECT_EQ(st.get("last_cls").shape[0], 4);
  EXPECT_EQ(st.get("logits").shape[0], 4);
  const auto files = nlohmann::json::parse(st.metadata().at("files"));
  EXPECT_EQ(files.back(), twin.file("a.jpg"));
  for (float v : st.to_f32("rollout")) EXPECT_TRUE(v >= 0 && v <= 1.0f) << v;
}

TEST_F(Cli, ExplainRefusesBadOptionsBeforeWork) {
  TempDir out;
  write_file(out.file("file"), "x");
  const Result r = run_vit("explain " + model() + " --out " + out.file("file") + " " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("cannot create the output folder"), std::string::npos) << r.err;
  const Result m = run_vit("explain " + model() + " --method mean " + images_.file("a.jpg"));
  EXPECT_EQ(m.code, 2);
  const Result s = run_vit("explain " + model() + " --save-attention " + images_.file("a.jpg") + " " + images_.file("a.jpg"));
  EXPECT_EQ(s.code, 2) << s.err;
  EXPECT_NE(s.err.find("--save-attention"), std::string::npos) << s.err;
}

}  // namespace
}  // namespace vit::test

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
#include <sstream>

#include "engine/safetensors.h"
#include "test_util.h"

#include <stb/stb_image_write.h>  // implementation compiled in test_preprocess.cpp

namespace vit::test {
namespace {

struct Result {
  int code;
  std::string out, err;
};

Result run_vit(const std::string& args) {
  TempDir d;
  const std::string cmd = std::string(VIT_BINARY) + " " + args + " >" + d.file("out") + " 2>" + d.file("err");
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(d.file("out")), read_file(d.file("err"))};
}

std::vector<nlohmann::json> json_lines(const std::string& s) {
  std::vector<nlohmann::json> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    write_tiny_model(model_.path(), TinySpec{});
    std::vector<uint8_t> px(size_t(40) * 30 * 3);
    for (size_t i = 0; i < px.size(); ++i) px[i] = uint8_t(i * 13 % 256);
    ASSERT_TRUE(stbi_write_jpg(images_.file("a.jpg").c_str(), 40, 30, 3, px.data(), 90));
    ASSERT_TRUE(stbi_write_png(images_.file("b.PNG").c_str(), 30, 40, 3, px.data(), 30 * 3));
    ASSERT_TRUE(stbi_write_bmp(images_.file("c.bmp").c_str(), 40, 30, 3, px.data()));
    write_file(images_.file("d_broken.jpg"), "not a jpeg at all");
    write_file(images_.file("notes.txt"), "ignored: not an image extension");
  }
  std::string model() const { return "--model " + model_.path(); }
  TempDir model_, images_;
};

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
                       ": not a supported image (JPEG, PNG, BMP, GIF, TGA, PNM)\n");
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
  const auto l = st.to_f32("logits");
  for (int c = 0; c < 10; ++c) EXPECT_EQ(l[size_t(c)], l[size_t(30 + c)]);  // c.bmp twice: same row
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
  EXPECT_NE(r.err.find(empty.path() + ": no .jpg, .jpeg, .png or .bmp files"), std::string::npos) << r.err;
}

TEST_F(Cli, UnwritableLogitsFileIsRefusedBeforeAnyWork) {
  const Result r = run_vit("classify " + model() + " --save-logits /nonexistent/dir/l.safetensors " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("/nonexistent/dir/l.safetensors: cannot open for writing"), std::string::npos) << r.err;
}

TEST_F(Cli, MissingPathIsUsageError) {
  const Result r = run_vit("classify " + model() + " /nonexistent/cat.jpg " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("/nonexistent/cat.jpg: no such file or directory"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("a.jpg"), std::string::npos);  // the good image is still classified
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
  EXPECT_EQ(r.err, "error: /nonexistent/labels.txt: cannot open labels file\n");
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

TEST(CliBench, ArgumentErrors) {
  Result r = run_vit("bench --arch vit_gigantic_patch3_999 --iters 1");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown architecture 'vit_gigantic_patch3_999'"), std::string::npos) << r.err;
  r = run_vit("bench --arch vit_tiny_patch16_224 --batch 0 --iters 1");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("batch size 0 is out of range"), std::string::npos) << r.err;
  r = run_vit("bench --arch vit_tiny_patch16_224 --batch 1,x --iters 1");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("'x' is not a number"), std::string::npos) << r.err;
  r = run_vit("bench --arch vit_tiny_patch16_224 --seconds 1 --iters 3");
  EXPECT_EQ(r.code, 2);
}

// A download folder of 1,000 files named like images, some of them hostile or broken: every file gets
// exactly one line, in sorted order, each bad one an "error"; the logits file holds the good rows only.
TEST_F(Cli, ThousandFileFolderLosesNothing) {
  namespace fs = std::filesystem;
  TempDir dir;
  const bool root = ::geteuid() == 0;
  const std::string jpeg = read_file(images_.file("a.jpg")), png = read_file(images_.file("b.PNG"));
  std::map<std::string, std::string> bad;  // file name -> expected error fragment
  for (int i = 0; i < 1000; ++i) {
    char name[32];
    std::snprintf(name, sizeof(name), "img%04d", i);
    const std::string base = dir.file(name);
    switch (i % 100) {
      case 7: write_file(base + ".jpg", ""), bad[base + ".jpg"] = "empty file"; break;
      case 19: write_file(base + ".jpg", jpeg.substr(0, jpeg.size() / 3)), bad[base + ".jpg"] = "truncated JPEG"; break;
      case 23: {  // a Huffman table's code counts overwritten: more codes than the table can hold
        std::string c = jpeg;
        const size_t dht = c.find("\xFF\xC4");
        for (size_t k = dht + 5; k < dht + 21; ++k) c[k] = char(0xFF);
        write_file(base + ".jpg", c), bad[base + ".jpg"] = "cannot decode JPEG";
        break;
      }
      case 42: write_file(base + ".png", "<html>a web page saved as .png</html>"), bad[base + ".png"] = "not a supported image"; break;
      case 55: fs::create_symlink(dir.file("gone.jpg"), base + ".jpg"), bad[base + ".jpg"] = "broken symbolic link"; break;
      case 61: fs::create_directory(base + ".jpeg"), bad[base + ".jpeg"] = "is a directory"; break;
      case 88:
        write_file(base + ".jpg", jpeg);
        fs::permissions(base + ".jpg", fs::perms::none);
        if (!root) bad[base + ".jpg"] = "Permission denied";  // root reads it anyway: a good image then
        break;
      default: write_file(base + (i % 2 ? ".png" : ".jpg"), i % 2 ? png : jpeg);
    }
  }
  TempDir out;
  const Result r = run_vit("classify " + model() + " --json --batch 16 --save-logits " + out.file("l.safetensors") +
                           " " + dir.path());
  EXPECT_EQ(r.code, 1) << r.err;
  const auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 1000u);
  const size_t n_bad = bad.size(), n_good = 1000 - n_bad;
  EXPECT_EQ(n_bad, root ? 60u : 70u);
  std::vector<std::string> good_files;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string file = lines[i]["file"];
    if (i) EXPECT_LT(lines[i - 1]["file"].get<std::string>(), file);  // sorted, each file once
    const auto it = bad.find(file);
    if (it == bad.end()) {
      EXPECT_TRUE(lines[i].contains("top")) << lines[i];
      good_files.push_back(file);
    } else {
      ASSERT_TRUE(lines[i].contains("error")) << lines[i];
      EXPECT_FALSE(lines[i].contains("top"));
      EXPECT_NE(lines[i]["error"].get<std::string>().find(it->second), std::string::npos) << lines[i];
    }
  }
  EXPECT_NE(r.err.find(std::to_string(n_good) + " of 1000 images classified, " + std::to_string(n_bad) + " failed"),
            std::string::npos) << r.err;
  SafeTensors st(out.file("l.safetensors"));
  EXPECT_EQ(st.get("logits").shape, (std::vector<int64_t>{int64_t(n_good), 10}));
  EXPECT_EQ(nlohmann::json::parse(st.metadata().at("files")).get<std::vector<std::string>>(), good_files);
  // Same bytes, same logits: rows stay with their files across batches.
  const auto l = st.to_f32("logits");
  for (size_t i = 2; i < good_files.size(); ++i)
    if (good_files[i].substr(good_files[i].size() - 4) == good_files[0].substr(good_files[0].size() - 4))
      for (int c = 0; c < 10; ++c) ASSERT_NEAR(l[i * 10 + size_t(c)], l[size_t(c)], 1e-5) << good_files[i];
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

std::vector<float> saved_logits(const std::string& path) { return SafeTensors(path).to_f32("logits"); }

// One thread or all, one process or two at once on the same (read-only, mapped) model file: the same
// logits. Uses the real DeiT-Tiny, where oneDNN splits work differently by thread count.
TEST(CliConcurrency, ThreadCountsAndTwoProcessesAgree) {
  REQUIRE_SHARED_DATA();
  const std::string model = "--model " + shared_data() + "/models/deit_tiny_patch16_224.fb_in1k";
  const std::string images = shared_data() + "/images/preprocessing";
  TempDir out;
  const auto classify = [&](const std::string& threads, const std::string& file) {
    return "classify " + model + " --batch 4 --threads " + threads + " --save-logits " + out.file(file) + " " + images;
  };
  ASSERT_EQ(run_vit(classify("1", "t1.safetensors")).code, 0);
  // Two processes started together, each with both threads.
  const std::string both = std::string(VIT_BINARY) + " " + classify("2", "p1.safetensors") + " >/dev/null & " +
                           VIT_BINARY + " " + classify("2", "p2.safetensors") + " >/dev/null; s2=$?; wait $!; s1=$?; " +
                           "exit $((s1 | s2))";
  const int status = std::system(("bash -c '" + both + "'").c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << both;
  const auto t1 = saved_logits(out.file("t1.safetensors")), p1 = saved_logits(out.file("p1.safetensors")),
             p2 = saved_logits(out.file("p2.safetensors"));
  ASSERT_EQ(t1.size(), size_t(6 * 1000));
  double worst = 0;
  for (size_t i = 0; i < t1.size(); ++i) worst = std::max(worst, double(std::fabs(t1[i] - p1[i])));
  std::printf("max |logit difference|, 1 thread vs 2: %.3g\n", worst);
  EXPECT_LE(worst, 1e-5);
  EXPECT_EQ(p1, p2);
  for (size_t img = 0; img < 6; ++img) {  // same top-1 too
    const auto top = [&](const std::vector<float>& l) {
      return std::max_element(l.begin() + long(img * 1000), l.begin() + long(img * 1000 + 1000)) - l.begin();
    };
    EXPECT_EQ(top(t1), top(p1));
  }
}

TEST_F(Cli, InspectSaysWhatItUnderstoodAndWhereFrom) {
  Result r = run_vit("inspect " + model_.path() + " --img-size 48");
  EXPECT_EQ(r.code, 0) << r.err;
  for (const char* want : {"layout         timm names, F32", "patch 8, width 32, depth 2, heads 2, MLP 64, 10 classes",
                           "tokens         37 = 36 patches (6x6) + class token", "resampled to 6x6",
                           "heads          " /* from the config */, "input size     --img-size", "FLOPs/image"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  EXPECT_NE(r.out.find(model_.file("config.json")), std::string::npos) << r.out;
  r = run_vit("inspect " + images_.file("a.jpg"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(images_.file("a.jpg") + ": "), std::string::npos) << r.err;
}

}  // namespace
}  // namespace vit::test

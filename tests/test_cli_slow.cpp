// The `vit` binary on large or real inputs: a 1,000-file folder with broken entries among good ones,
// and thread counts and concurrent processes on the real DeiT-Tiny (../shared/data).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "engine/io/safetensors.h"

namespace vit::test {
namespace {

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

// vit explain against timm: rollout and the last block's class-token attention computed from timm's own
// attention probabilities for the first 8 sample photos (../shared/data/reference, its README says how),
// and the logits, within 1e-3; one picture per photo.
TEST(ExplainGolden, RolloutAndLastBlockMatchTimm) {
  REQUIRE_SHARED_DATA();
  const std::string photos = shared_data() + "/images/imagenet-samples/";
  SafeTensors ref(shared_data() + "/reference/deit_tiny_attention.safetensors");
  const auto names = nlohmann::json::parse(ref.metadata().at("files"));
  ASSERT_EQ(names.size(), 8u);
  std::string paths;
  for (const auto& n : names) paths += " " + photos + n.get<std::string>();
  TempDir out;
  const Result r = run_vit("explain --model " + shared_data() + "/models/deit_tiny_patch16_224.fb_in1k --out " +
                           out.path() + " --save-attention " + out.file("a.safetensors") + " --json" + paths);
  ASSERT_EQ(r.code, 0) << r.err;
  SafeTensors ours(out.file("a.safetensors"));
  for (const char* t : {"rollout", "last_cls", "logits"}) {
    EXPECT_EQ(ours.get(t).shape, ref.get(t).shape) << t;
    const float d = max_abs_diff(ours.to_f32(t), ref.to_f32(t));
    EXPECT_LE(d, 1e-3f) << t;
    std::printf("%s: largest |ours - timm| %.3g\n", t, double(d));
  }
  const auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    const std::string stem = std::filesystem::path(names[i].get<std::string>()).stem().string();
    EXPECT_EQ(lines[i]["attention"], out.file(stem + ".attention.png"));
    EXPECT_TRUE(std::filesystem::is_regular_file(out.file(stem + ".attention.png"))) << stem;
  }
  EXPECT_EQ(lines[0]["top"][0]["label"], "tench");
}

}  // namespace
}  // namespace vit::test

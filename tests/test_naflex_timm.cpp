// NaFlex preprocessing and per-grid position tables against timm's own code (tests/make_naflex_reference.py,
// run at test time by the .venv's timm over Debian's torch) on photos of very different shapes: a 3000x600
// panorama, a portrait, a square, strips one pixel wide and tall, an image smaller than any budget, a single
// pixel; at budgets of 256 and 64 patches. Patches equal timm's eval transform's, coordinates and validity
// equal, padded as its collator pads; position rows as NaFlexEmbeds resizes its table for each grid.
// Skipped without timm in .venv (scripts/setup.sh installs it) or ../shared/data, except under CI=true.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/image/image.h"
#include "engine/preprocess/naflex.h"
#include "engine/preprocess/position_tables.h"
#include "reference_models.h"
#include "test_util.h"

namespace vit::test {
namespace {

class NaflexTimm : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!have_shared_data()) return;
    const GeneratedModels g = generated_models("naflex_reference", {VIT_SOURCE_DIR "/tests/make_naflex_reference.py"},
                                               "timm");
    dir_ = g.dir;
    ready_ = g.ready;
  }
  void SetUp() override {
    REQUIRE_SHARED_DATA();
    if (dir_.empty()) {
      if (in_ci()) FAIL() << "CI=true but " << kVenvPython << " has no timm (scripts/setup.sh installs tests/requirements.txt)";
      GTEST_SKIP() << kVenvPython << " has no timm (pip install -r tests/requirements.txt into .venv); skipping";
    }
    ASSERT_TRUE(ready_) << "tests/make_naflex_reference.py failed";
    ref_ = std::make_unique<SafeTensors>(dir_ + "/reference.safetensors");
    names_ = nlohmann::json::parse(ref_->metadata().at("names")).get<std::vector<std::string>>();
    budgets_ = nlohmann::json::parse(ref_->metadata().at("budgets")).get<std::vector<int>>();
    ASSERT_EQ(names_.size(), 9u);
    ASSERT_EQ(budgets_, (std::vector<int>{256, 64}));
  }
  Image image(const std::string& name) const { return decode_image_file(dir_ + "/images/" + name + ".png"); }

  static inline std::string dir_;
  static inline bool ready_ = false;
  std::unique_ptr<SafeTensors> ref_;
  std::vector<std::string> names_;
  std::vector<int> budgets_;
};

// Each image alone through timm's transform: the same patches, coordinates and validity, bit for bit
// (PIL's resize, ToTensor and Normalize have the same arithmetic here); then padded to the budget.
TEST_F(NaflexTimm, PatchesCoordinatesAndValidityEqualTimms) {
  NaflexConfig cfg;  // SigLIP's mean and std, bicubic
  for (const int n : budgets_)
    for (const std::string& name : names_) {
      SCOPED_TRACE(name + " at " + std::to_string(n) + " patches");
      cfg.max_patches = n;
      const Image img = image(name);
      const std::string key = name + "." + std::to_string(n);
      const Golden patches = read_golden(*ref_, key + ".patches"), coord = read_golden(*ref_, key + ".coord"),
                   valid = read_golden(*ref_, key + ".valid");
      const int64_t count = patches.shape[0], per = cfg.patch_floats();
      ASSERT_EQ(patches.shape, (std::vector<int64_t>{count, per}));
      std::vector<float> got(size_t(n * per), -1.f);
      std::vector<int32_t> coords(size_t(2 * n), -1);
      std::vector<uint8_t> flags(size_t(n), 9);
      const PatchGrid g = naflex_patches(img, cfg, n, got.data(), coords.data(), flags.data());
      ASSERT_EQ(g.count(), count) << "grid " << g.rows << "x" << g.cols;
      size_t differ = 0;
      for (size_t i = 0; i < patches.f32.size(); ++i) differ += got[i] != patches.f32[i];
      EXPECT_EQ(differ, 0u) << "values differ from timm's, by up to " << max_abs_diff(got.data(), patches.f32.data(), patches.f32.size());
      for (int64_t i = 0; i < count; ++i) {
        ASSERT_EQ(float(coords[size_t(2 * i)]), coord.f32[size_t(2 * i)]) << i;
        ASSERT_EQ(float(coords[size_t(2 * i + 1)]), coord.f32[size_t(2 * i + 1)]) << i;
        ASSERT_EQ(flags[size_t(i)], valid.u8[size_t(i)]) << i;
      }
      EXPECT_EQ(coord.f32[size_t(2 * count - 2)] + 1, g.rows);
      EXPECT_EQ(coord.f32[size_t(2 * count - 1)] + 1, g.cols);
      std::printf("%-9s %5dx%-5d -> %3dx%-3d patches at a budget of %d\n", name.c_str(), img.width, img.height, g.rows,
                  g.cols, n);
    }
}

// The batch as NaFlexCollator pads it to the budget: our padding's coordinates and validity equal its,
// padded patches zero; and the position rows timm's NaFlexEmbeds adds to each image (its 16 x 16 table
// resized to the image's grid, bilinear as SigLIP 2's or bicubic, antialiased) are our cached tables'.
TEST_F(NaflexTimm, CollatedBatchAndPositionTablesAsTimms) {
  const Golden table = read_golden(*ref_, "pos_table");
  ASSERT_EQ(table.shape, (std::vector<int64_t>{16, 16, 64}));
  PositionTables bilinear(table.f32, 16, 16, 64, Filter::Bilinear), bicubic(table.f32, 16, 16, 64, Filter::Bicubic);
  NaflexConfig cfg;
  for (const int n : budgets_) {
    cfg.max_patches = n;
    const std::string key = "batch." + std::to_string(n);
    const Golden coord = read_golden(*ref_, key + ".coord"), valid = read_golden(*ref_, key + ".valid");
    const int64_t B = int64_t(names_.size());
    ASSERT_EQ(valid.shape, (std::vector<int64_t>{B, n}));
    for (int64_t b = 0; b < B; ++b) {
      SCOPED_TRACE(names_[size_t(b)] + " at " + std::to_string(n) + " patches");
      std::vector<float> got(size_t(n * cfg.patch_floats()));
      std::vector<int32_t> coords(size_t(2 * n));
      std::vector<uint8_t> flags(static_cast<size_t>(n));
      const PatchGrid g = naflex_patches(image(names_[size_t(b)]), cfg, n, got.data(), coords.data(), flags.data());
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(flags[size_t(i)], valid.u8[size_t(b * n + i)]) << i;
        ASSERT_EQ(float(coords[size_t(2 * i)]), coord.f32[size_t((b * n + i) * 2)]) << i;
        ASSERT_EQ(float(coords[size_t(2 * i + 1)]), coord.f32[size_t((b * n + i) * 2 + 1)]) << i;
      }
      for (size_t i = size_t(g.count() * cfg.patch_floats()); i < got.size(); ++i) ASSERT_EQ(got[i], 0.f);
      for (auto [mode, cache] : {std::pair{"bilinear", &bilinear}, std::pair{"bicubic", &bicubic}}) {
        const Golden pos = read_golden(*ref_, key + ".pos_" + mode);
        const auto mine = cache->get(g);
        ASSERT_EQ(int64_t(mine->size()), g.count() * 64);
        const float* theirs = pos.f32.data() + b * n * 64;
        EXPECT_LT(max_abs_diff(mine->data(), theirs, mine->size()), 1e-6f) << mode;
        for (int64_t i = g.count() * 64; i < n * 64; ++i) ASSERT_EQ(theirs[i], 0.f) << "timm adds none to padding";
      }
    }
  }
}

}  // namespace
}  // namespace vit::test

// `vit quantize`'s calibration road: run_batches with RunOptions::taps reports every forward pass's
// intermediate tensors (the {layer}.input taps GPTQ reads) for the images that decoded, exactly as
// ViT::forward_with_taps reports them for those images alone; the ones that failed are left out.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/image/image.h"
#include "engine/preprocess/preprocess.h"
#include "library/runner.h"
#include "models/network.h"
#include "test_util.h"
#include "vit/error.h"

namespace vit::test {
namespace {

TEST(Calibration, RunBatchesReportsTheTapsOfTheImagesThatDecoded) {
  TempDir d;
  write_tiny_model(d.path(), TinySpec{});
  ViT model = ViT::load(d.path());
  std::mt19937 rng(3);
  std::vector<Image> images(5);
  for (Image& im : images) {
    im.width = 40, im.height = 30;
    for (int i = 0; i < im.width * im.height * 3; ++i) im.rgb.push_back(uint8_t(rng() % 256));
  }
  const std::vector<bool> fails = {false, true, false, false, true};  // holes in both batches of 3
  const std::string tap = "blocks.1.mlp.fc1.input";

  std::map<std::string, std::vector<float>> got;
  RunOptions o;
  o.batch = 3;
  o.taps = [&](const std::string& name, const float* data, int64_t count) {
    got[name].insert(got[name].end(), data, data + count);
  };
  size_t ran = 0;
  run_batches(PlanPool(model), images.size(), o,
              [&](size_t i) {
                if (fails[i]) throw Error("image " + std::to_string(i), "does not decode");
                return images[i];
              },
              [&](const ViT::Plan&, std::vector<BatchItem>& items) {
                for (const BatchItem& item : items) {
                  EXPECT_EQ(item.row < 0, bool(fails[item.index])) << item.index;
                  ran += item.row >= 0;
                }
              });
  ASSERT_EQ(ran, 3u);

  // The same images through forward_with_taps, in the Plan sizes run_batches ran them in: the first
  // batch's two good images together, then the second's one.
  const auto input = [&](std::vector<size_t> which) {
    const int64_t per_image = model.config().input_floats();
    std::vector<float> x(which.size() * size_t(per_image));
    for (size_t k = 0; k < which.size(); ++k) preprocess(images[which[k]], model.config().pre, x.data() + k * size_t(per_image));
    return x;
  };
  std::vector<float> want;
  for (const std::vector<size_t>& batch : {std::vector<size_t>{0, 2}, std::vector<size_t>{3}}) {
    const std::vector<float> x = input(batch);
    model.forward_with_taps(x.data(), int64_t(batch.size()), [&](const std::string& name, const float* data, int64_t count) {
      if (name == tap) want.insert(want.end(), data, data + count);
    });
  }
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(got[tap], want);
  EXPECT_EQ(got["input"].size(), 3 * size_t(model.config().input_floats()));
}

}  // namespace
}  // namespace vit::test

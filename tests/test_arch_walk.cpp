// Every timm name docs/MODELS.md lists as running, through `vit bench --arch NAME --iters 1 -b 1` at full size
// (random weights; two patches a side, as --img-size allows every one of them): the walk the normal suite
// shrinks (tests/test_cli.cpp, tests/test_model.cpp). Label walk (~20 minutes, left out of scripts/test.sh): the
// largest take minutes and gigabytes.
#include <gtest/gtest.h>

#include "cli_util.h"
#include "models/network.h"

namespace vit::test {
namespace {

// f32 up to 1.2 billion parameters (about 5 GB of weights), int8 beyond: vit_7b_patch16_dinov3's f32 weights
// would not fit beside the rest of a shared machine's work.
constexpr int64_t kLargestInF32 = 1'200'000'000;

TEST(ArchWalk, EveryRunningNameOfDocsModelsMdBenches) {
  int walked = 0;
  for (const ModelsMdRow& row : models_md()) {
    if (!row.runs) continue;
    const ViTConfig c = config_for_arch(row.arch);
    const std::string precision = ViT::parameters(c) > kLargestInF32 ? "int8" : "f32";
    const Result r = run_vit("bench --arch " + row.arch + " --img-size " + std::to_string(2 * c.patch) +
                             " --precision " + precision + " -b 1 --iters 1 --warmup 0 --json");
    EXPECT_EQ(r.code, 0) << row.arch << ": " << r.err;
    const auto lines = json_lines(r.out);
    if (lines.size() == 1) EXPECT_EQ(lines[0]["model"], row.arch);
    std::printf("%-44s %s, %.0f M parameters: exit %d\n", row.arch.c_str(), precision.c_str(),
                double(ViT::parameters(c)) / 1e6, r.code);
    ++walked;
  }
  EXPECT_GT(walked, 200);
}

}  // namespace
}  // namespace vit::test

// The rotary angle tables of models/positions.h (EVA-02's, Perception Encoder's, DINOv3's) against timm's own
// rotary modules (tests/make_rope_tables.py, run at test time by the .venv's timm): each case's sin and cos, in
// the module's channel layout, from the table our rotary step reads. Skipped without timm in .venv (scripts/setup.sh installs it), except under CI=true.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/io/safetensors.h"
#include "models/positions.h"
#include "reference_models.h"
#include "test_util.h"

namespace vit::test {
namespace {

struct RopeTableSpec {
  static GeneratorSpec get() {
    return {"rope_tables", {VIT_SOURCE_DIR "/tests/make_rope_tables.py"}, "timm", "", "has no timm", false};
  }
};
using RopeTables = GeneratedSuite<RopeTableSpec>;

// timm's table ([N, 2 Dh]: sin, then cos) against ours ([N, Dh / 2] angles' sin and cos), timm's channel j
// reading our angle pair(j), within 2e-6.
template <class Pair>
void expect_table_like_timm(const std::string& name, const std::vector<float>& want, const std::vector<float>& sin,
                            const std::vector<float>& cos, int64_t N, int64_t Dh, Pair pair) {
  const int64_t half = Dh / 2;
  ASSERT_EQ(int64_t(want.size()), N * 2 * Dh) << name;
  ASSERT_EQ(int64_t(sin.size()), N * half) << name;
  float worst = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < Dh; ++j) {
      const float* row = want.data() + n * 2 * Dh;
      worst = std::max({worst, std::fabs(row[j] - sin[size_t(n * half + pair(j))]),
                        std::fabs(row[Dh + j] - cos[size_t(n * half + pair(j))])});
    }
  EXPECT_LT(worst, 2e-6f) << name;
  std::printf("%s: max |difference| from timm %.2e\n", name.c_str(), double(worst));
}

// check(st, name, settings) on each case of rope_tables.safetensors (st) that timm's `module` made, stopping at the
// first fatal failure; at least 4 of them.
template <class Check>
void for_each_case(const std::string& dir, const std::string& module, Check check) {
  const SafeTensors st(dir + "/rope_tables.safetensors");
  const auto cases = nlohmann::json::parse(st.metadata().at("cases"));
  int tested = 0;
  for (const auto& [name, c] : cases.items()) {
    if (c["module"] != module) continue;
    check(st, name, c);
    if (::testing::Test::HasFatalFailure()) return;
    ++tested;
  }
  EXPECT_GE(tested, 4) << module;
}

// RotaryEmbeddingDinoV3.get_embed(shape): [N, 2 Dh], sin then cos, each [angles, angles] (rotate-half);
// ours: [N, Dh / 2], the angles once, read by the Half rotary step for both halves of a head.
TEST_F(RopeTables, DINOv3LikeTimm) {
  for_each_case(dir_, "RotaryEmbeddingDinoV3", [](const SafeTensors& st, const std::string& name, const nlohmann::json& c) {
    ASSERT_EQ(c["rotate_half"], true) << name;
    const int64_t Dh = c["head_dim"], gh = c["grid"][0], gw = c["grid"][1], half = Dh / 2;
    std::vector<float> sin, cos;
    dinov3_rotary_tables(gh, gw, Dh, c["temperature"].get<float>(), 0.f, &sin, &cos);
    expect_table_like_timm(name, st.to_f32(name + ".embed"), sin, cos, gh * gw, Dh, [&](int64_t j) { return j % half; });
  });
}

// RotaryEmbeddingCat.get_embed() of EVA-02 ('ij', at its own grid and a smaller one, rescaled to ref_feat_shape)
// and of Perception Encoder ('xy', grid offset 1, ref_feat_shape 24): [N, 2 Dh], sin then cos, each angle
// repeated for its interleaved pair; ours: [N, Dh / 2] from the ViTConfig the model's settings make.
TEST_F(RopeTables, RotaryEmbeddingCatLikeTimm) {
  for_each_case(dir_, "RotaryEmbeddingCat", [](const SafeTensors& st, const std::string& name, const nlohmann::json& k) {
    ASSERT_EQ(k["rotate_half"], false) << name;
    ViTConfig c;
    const int64_t Dh = k["head_dim"], gh = k["grid"][0], gw = k["grid"][1];
    c.width = Dh;
    c.heads = 1;
    c.patch = k["patch"];
    c.pre.height = int(gh * c.patch);
    c.pre.width = int(gw * c.patch);
    c.rope.on = true;
    c.rope.temperature = k["temperature"].get<float>();
    c.rope.grid_offset = k["grid_offset"].get<float>();
    c.rope.xy = k["grid_indexing"] == "xy";
    if (!k["ref_feat_shape"].is_null()) c.rope.ref_h = k["ref_feat_shape"][0], c.rope.ref_w = k["ref_feat_shape"][1];
    std::vector<float> sin, cos;
    rotary_tables(c, &sin, &cos);
    expect_table_like_timm(name, st.to_f32(name + ".embed"), sin, cos, gh * gw, Dh, [](int64_t j) { return j / 2; });
  });
}

}  // namespace
}  // namespace vit::test

// NaFlex preprocessing and per-grid position tables against timm's own code (tests/make_naflex_reference.py,
// run at test time by the .venv's timm over Debian's torch) on photos of very different shapes: a 3000x600
// panorama, a portrait, a square, strips one pixel wide and tall, an image smaller than any budget, a single
// pixel; at budgets of 256 and 64 patches. Patches equal timm's eval transform's, coordinates and validity
// equal, padded as its collator pads; position rows as NaFlexEmbeds resizes its table for each grid.
// Then a shrunk random-weight naflexvit_base_patch16_siglip made by timm (tests/make_naflex_model.py): its
// embeddings through the engine (the library's Plans, and `vit embed --max-patches`) against timm's NaFlex
// pipeline on those images, alone and collated into one batch; and each image of a mixed batch bit for bit
// as alone at f32, bf16 and int8.
// Skipped without timm in .venv (scripts/setup.sh installs it) or ../shared/data, except under CI=true.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>

#include "cli_util.h"
#include "model_files.h"
#include "engine/image/image.h"
#include "engine/preprocess/naflex.h"
#include "engine/preprocess/position_tables.h"
#include "models/network.h"
#include "vit/cpu.h"
#include "vit/explain.h"
#include "vit/vit.h"
#include "reference_models.h"
#include "test_util.h"

namespace vit::test {
namespace {

struct NaflexReference {
  static GeneratorSpec get() {
    return {"naflex_reference", {VIT_SOURCE_DIR "/tests/make_naflex_reference.py"}, "timm", "", "has no timm"};
  }
};
struct NaflexModelFiles {
  static GeneratorSpec get() {
    return {"naflex_model",
            {VIT_SOURCE_DIR "/tests/make_naflex_model.py", VIT_SOURCE_DIR "/tests/make_naflex_reference.py"},
            "timm", "", "has no timm"};
  }
};

// Either generator's reference.safetensors: the image names (9) and budgets it was made with.
template <class Spec>
class NaflexSuite : public GeneratedSuite<Spec> {
 protected:
  void SetUp() override {
    GeneratedSuite<Spec>::SetUp();
    if (this->IsSkipped() || this->HasFatalFailure()) return;
    ref_ = std::make_unique<SafeTensors>(this->dir_ + "/reference.safetensors");
    names_ = nlohmann::json::parse(ref_->metadata().at("names")).get<std::vector<std::string>>();
    budgets_ = nlohmann::json::parse(ref_->metadata().at("budgets")).get<std::vector<int>>();
    ASSERT_EQ(names_.size(), 9u);
  }
  std::unique_ptr<SafeTensors> ref_;
  std::vector<std::string> names_;
  std::vector<int> budgets_;
};

class NaflexTimm : public NaflexSuite<NaflexReference> {
 protected:
  void SetUp() override {
    NaflexSuite::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_EQ(budgets_, (std::vector<int>{256, 64}));
  }
  Image image(const std::string& name) const { return decode_image_file(dir_ + "/images/" + name + ".png"); }
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


class NaflexModel : public NaflexSuite<NaflexModelFiles> {
 protected:
  std::string image_path(const std::string& name) const { return dir_ + "/images/" + name + ".png"; }
  // The pooled features (timm's forward_head(pre_logits=True); the model has no head) of `names` run as one
  // batch of a Plan, each image's row.
  // tokens: each image's own rows of forward_features, when not null.
  std::vector<std::vector<float>> features(const ViT& m, const std::vector<std::string>& names,
                                           std::vector<std::vector<float>>* tokens = nullptr) const {
    auto plan = m.make_plan(int64_t(names.size()));
    EXPECT_EQ(m.flops(int64_t(names.size())), plan->program().flops());  // masked attention counted whole, as the plan does
    const int64_t per = m.config().input_floats(), D = m.config().width, T = m.config().tokens();
    for (size_t b = 0; b < names.size(); ++b)
      plan->set_grid(int64_t(b), m.prepare_input(decode_image_file(image_path(names[b])), plan->input() + b * per));
    plan->run();
    std::vector<std::vector<float>> out;
    for (size_t b = 0; b < names.size(); ++b) {
      out.emplace_back(plan->features() + b * D, plan->features() + (b + 1) * D);
      const float* rows = plan->tokens() + int64_t(b) * T * D;
      if (tokens) tokens->emplace_back(rows, rows + plan->tokens_of(int64_t(b)) * D);
    }
    return out;
  }

  // At every budget: each image alone against timm's NaFlexVit on it alone ("<prefix><image>.<n>"; with
  // `tokens`, forward_features too), all of them in one batch against timm's batch ("<prefix>batch.<n>"),
  // within 1e-4; each image of the mixed batch bit for bit as alone. Prints the worst per budget after `label`.
  void expect_like_timms_naflex(ViT& m, const std::string& prefix, bool tokens, const char* label) const {
    for (const int n : budgets_) {
      m.set_max_patches(n);
      const auto batch = features(m, names_);
      const Golden together = read_golden(*ref_, prefix + "batch." + std::to_string(n));
      float worst = 0.f;
      for (size_t b = 0; b < names_.size(); ++b) {
        SCOPED_TRACE(names_[b] + " at " + std::to_string(n) + " patches");
        const std::string key = prefix + names_[b] + "." + std::to_string(n);
        const Golden alone = read_golden(*ref_, key);
        std::vector<std::vector<float>> rows;
        const auto mine = features(m, {names_[b]}, tokens ? &rows : nullptr)[0];
        ASSERT_EQ(alone.f32.size(), mine.size());
        float d = max_abs_diff(mine.data(), alone.f32.data(), mine.size());
        if (tokens) {
          const Golden want_tokens = read_golden(*ref_, key + ".tokens");
          ASSERT_EQ(rows[0].size(), want_tokens.f32.size()) << "tokens of its own grid";
          const float dt = max_abs_diff(rows[0].data(), want_tokens.f32.data(), rows[0].size());
          EXPECT_LT(dt, 1e-4f) << "forward_features";
          d = std::max(d, dt);
        }
        EXPECT_LT(d, 1e-4f);
        EXPECT_LT(max_abs_diff(batch[b].data(), together.f32.data() + b * mine.size(), mine.size()), 1e-4f);
        EXPECT_EQ(batch[b], mine) << "in a batch of different shapes, not as alone";
        worst = std::max(worst, d);
      }
      std::printf("%s, budget %3d: max |diff| against timm %.3g over %zu images\n", label, n, worst, names_.size());
    }
  }
};

// Each image alone (its tokens and its pooled features) and the nine collated into one batch (padded to the
// budget, attention and the attention pool masked), against timm's NaFlexVit on the same images through its
// own transform and collator.
TEST_F(NaflexModel, EmbeddingsMatchTimmsNaflexPipeline) {
  ViT m = ViT::load(dir_ + "/model");
  EXPECT_TRUE(m.config().naflex.on);
  EXPECT_EQ(m.config().family, Family::NaFlex);
  EXPECT_STREQ(family_name(m.config().family), "SigLIP 2 NaFlex image tower");
  expect_like_timms_naflex(m, "", true, "NaFlex tower");
}

// A mixed batch's images bit for bit as each alone, with every precision this CPU runs (int8 on its own
// grids per row, bf16 where the CPU has avx512_bf16).
TEST_F(NaflexModel, EachImageOfAMixedBatchAsAloneAtEveryPrecision) {
  for (const Precision p : {Precision::F32, Precision::BF16, Precision::Int8}) {
    if (p == Precision::BF16 && !cpu_isa().bf16) continue;
    SCOPED_TRACE(precision_name(p));
    ViT m = ViT::load(dir_ + "/model", "", 0, p);
    m.set_max_patches(64);
    const auto batch = features(m, names_);
    for (size_t b = 0; b < names_.size(); ++b) EXPECT_EQ(batch[b], features(m, {names_[b]})[0]) << names_[b];
  }
}

// A classic SigLIP tower made by timm with use_naflex=True (vit_base_patch16_siglip_224, its config.json saying
// model_args use_naflex true): the same masked path, its table resized bicubically as NaFlexVitCfg's default;
// each image alone and the nine in one batch against timm's NaFlexVit, every budget, and each image of the
// batch bit for bit as alone.
TEST_F(NaflexModel, SiglipTowerWithUseNaflexMatchesTimm) {
  ViT m = ViT::load(dir_ + "/siglip");
  EXPECT_TRUE(m.config().naflex.on);
  EXPECT_EQ(m.config().family, Family::SigLIP);
  expect_like_timms_naflex(m, "siglip.", false, "SigLIP with use_naflex");
}

// The families whose NaFlexVit form (use_naflex) the engine does not run, refused by name; NaFlex tensors under a
// SigLIP architecture whose config does not say use_naflex; and use_naflex without NaFlex tensors.
TEST_F(NaflexModel, UseNaflexOfOtherFamiliesIsRefusedByName) {
  TempDir t;
  const std::pair<const char*, const char*> refused[] = {
      {"vit_base_patch16_224", "vit_base_patch16_224 with model_args use_naflex true (timm's NaFlexVit form of a ViT): "
                               "not supported yet"},
      {"vit_small_patch16_dinov3", "vit_small_patch16_dinov3 with model_args use_naflex true (timm's NaFlexVit form of a "
                                   "DINOv3"},
      {"vit_base_patch16_siglip_gap_224", "vit_base_patch16_siglip_gap_224 with model_args use_naflex true"}};
  for (const auto& [arch, why] : refused) {
    write_file(t.file("config.json"), std::string("{\"architecture\": \"") + arch +
                                          "\", \"model_args\": {\"use_naflex\": true}}");
    expect_error([&] { ViT::load(dir_ + "/model", t.file("config.json")); }, why);
  }
  write_file(t.file("config.json"), "{\"architecture\": \"vit_base_patch16_siglip_224\", \"num_classes\": 0}");
  expect_error([&] { ViT::load(dir_ + "/siglip", t.file("config.json")); },
               "a model made with use_naflex=True needs model_args use_naflex true");
  write_file(t.file("config.json"), "{\"architecture\": \"deit_tiny_patch16_224\", \"model_args\": {\"use_naflex\": true}}");
  expect_error([&] { ViT::load(shared_data() + "/models/deit_tiny_patch16_224.fb_in1k", t.file("config.json")); },
               "with model_args use_naflex true");
}

// What a NaFlex model refuses: --img-size, a budget out of range, --tokens; the NaFlex variants the engine does
// not run, by name (register tokens, aspect-preserving or factorized tables, C-RADIO); NaFlex tensors under
// another architecture's name; and --max-patches for a square model.
TEST_F(NaflexModel, RefusalsNameTheProblem) {
  expect_error([&] { ViT::load(dir_ + "/model", "", 224); }, "--img-size does not apply");
  TempDir t;
  const std::pair<const char*, const char*> named[] = {
      {"naflexvit_base_patch16_gap", "NaFlex ViT with class or register tokens checkpoint: not supported yet"},
      {"naflexvit_base_patch16_par_gap", "NaFlex ViT with an aspect-preserving position table checkpoint"},
      {"naflexvit_base_patch16_parfac_gap", "NaFlex ViT with a factorized, aspect-preserving position table"},
      {"naflexvit_so400m_patch16_radio_v4", "NaFlex ViT with a rotary embedding (C-RADIO)"},
      {"vit_base_patch16_siglip_256", "vit_base_patch16_siglip_256 is not a NaFlex ViT, but"}};
  for (const auto& [arch, why] : named) {
    write_file(t.file("config.json"), std::string("{\"architecture\": \"") + arch + "\", \"num_classes\": 0}");
    expect_error([&] { ViT::load(dir_ + "/model", t.file("config.json")); }, why);
  }
  write_file(t.file("config.json"),
             "{\"architecture\": \"naflexvit_base_patch16_siglip\", \"model_args\": {\"num_heads\": 2, "
             "\"pos_embed_ar_preserving\": true}}");
  expect_error([&] { ViT::load(dir_ + "/model", t.file("config.json")); }, "model_args pos_embed_ar_preserving true");
  ViT m = ViT::load(dir_ + "/model");
  expect_error([&] { m.set_max_patches(0); }, "max patches 0 is out of range");
  const auto r = run_vit("embed --model " + dir_ + "/model --max-patches 64 --tokens " + image_path("square"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("its token sequences are not given yet (each image has a grid of its own)"), std::string::npos)
      << r.err;
}

// The library: Classifier::embed on the image files at a budget of 64 (ClassifierOptions::max_patches), in
// batches of 4 that mix shapes, timm's embeddings; a fixed [B, 3, H, W] tensor refused by name.
TEST_F(NaflexModel, LibraryEmbedsAndRefusesFixedTensors) {
  ClassifierOptions o;
  o.max_patches = 64;
  o.batch = 4;
  const Classifier c(dir_ + "/model", o);
  EXPECT_EQ(c.info().max_patches, 64);
  std::vector<std::string> paths;
  for (const auto& name : names_) paths.push_back(image_path(name));
  const auto got = c.embed(paths, EmbedOptions{});
  ASSERT_EQ(got.size(), names_.size());
  for (size_t b = 0; b < names_.size(); ++b) {
    ASSERT_EQ(got[b].error, "") << names_[b];
    const Golden want = read_golden(*ref_, names_[b] + ".64");
    ASSERT_EQ(got[b].embedding.size(), want.f32.size());
    EXPECT_LT(max_abs_diff(got[b].embedding.data(), want.f32.data(), want.f32.size()), 1e-4f) << names_[b];
  }
  std::vector<float> pixels(size_t(3 * 256 * 256));
  expect_error([&] { c.logits(pixels.data(), 1); }, "is a NaFlex model");
  expect_error([&] { c.preprocess(paths[0]); }, "is a NaFlex model");
}

// `vit embed --max-patches` on the image files: timm's embeddings, one JSON line each.
TEST_F(NaflexModel, VitEmbedWithMaxPatches) {
  std::string files;
  for (const auto& name : names_) files += " " + image_path(name);
  const auto r = run_vit("embed --model " + dir_ + "/model --max-patches 64 -b 4" + files);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), names_.size());
  for (size_t b = 0; b < names_.size(); ++b) {
    const Golden want = read_golden(*ref_, names_[b] + ".64");
    const auto got = lines[b]["embedding"].get<std::vector<float>>();
    ASSERT_EQ(got.size(), want.f32.size());
    EXPECT_LT(max_abs_diff(got.data(), want.f32.data(), got.size()), 1e-4f) << names_[b];
  }
}

// `vit inspect --image`: the budget and the grid each image gets (timm's get_image_size_for_seq, its count
// the rows of timm's tokens for it), at the default budget and at --max-patches; the activation's origin.
TEST_F(NaflexModel, InspectPrintsTheBudgetAndAnImagesGrid) {
  for (const int n : budgets_)
    for (const std::string name : {"panorama", "portrait", "column", "pixel"}) {
      SCOPED_TRACE(name + " at " + std::to_string(n));
      const Image img = decode_image_file(image_path(name));
      const PatchGrid g = naflex_grid(img.width, img.height, 16, n);
      ASSERT_EQ(g.count(), read_golden(*ref_, name + "." + std::to_string(n) + ".tokens").shape[0]);
      const auto r = run_vit("inspect -m " + dir_ + "/model --image " + image_path(name) +
                             (n == 256 ? std::string() : " --max-patches " + std::to_string(n)));
      ASSERT_EQ(r.code, 0) << r.err;
      const std::string want = std::to_string(img.width) + "x" + std::to_string(img.height) + " (" + image_path(name) +
                               "): resized to " + std::to_string(g.cols * 16) + "x" + std::to_string(g.rows * 16) +
                               " at its own aspect ratio, a grid of " + std::to_string(g.rows) + "x" +
                               std::to_string(g.cols) + " = " + std::to_string(g.count()) +
                               " patches within the budget of " + std::to_string(n);
      EXPECT_NE(r.out.find("image          " + want), std::string::npos) << r.out;
      EXPECT_NE(r.out.find("within " + std::to_string(n) + " patches of 16 pixels (--max-patches)"), std::string::npos);
      EXPECT_NE(r.out.find("activation     the architecture naflexvit_base_patch16_siglip (GELU (tanh))"),
                std::string::npos) << r.out;
    }
  const auto bad = run_vit("inspect -m " + dir_ + "/model --image " + dir_ + "/model/config.json");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("config.json"), std::string::npos) << bad.err;
}

// The library's Explainer on the shrunk tower with a 5-class head, at its default budget (256) and at 64: each
// photo's maps over its own grid (a 3000x600 panorama 7x35 at 256, a portrait taller than wide), equal to
// rollout and the last block's attention computed from timm's own attention probabilities of the image alone
// (tests/make_naflex_model.py), in one batch of three shapes; the picture the whole photo at its own aspect
// ratio. The embeddings-only tower has no class to explain.
TEST_F(NaflexModel, ExplainsOverEachImagesOwnGrid) {
  const SafeTensors want(dir_ + "/explain.safetensors");
  const auto explained = nlohmann::json::parse(want.metadata().at("names")).get<std::vector<std::string>>();
  ASSERT_EQ(explained, (std::vector<std::string>{"panorama", "portrait", "square"}));
  std::vector<ImagePath> inputs;
  for (const auto& name : explained) inputs.push_back({image_path(name), ""});
  for (const int n : budgets_) {
    ExplainOptions o;
    o.max_patches = n == 256 ? 0 : n;
    o.picture_size = 512;
    const Explainer e(dir_ + "/classifier", o);
    EXPECT_EQ(e.grid_h(), 0) << "each image has its own grid";
    EXPECT_EQ(e.info().max_patches, n);
    std::vector<Explanation> got;
    e.explain(inputs, [&](std::vector<Explanation>& batch) {
      for (auto& x : batch) got.push_back(std::move(x));
    });
    ASSERT_EQ(got.size(), explained.size());
    for (size_t i = 0; i < explained.size(); ++i) {
      const std::string key = explained[i] + "." + std::to_string(n);
      SCOPED_TRACE(key);
      const Explanation& x = got[i];
      ASSERT_EQ(x.error, "");
      const Golden rollout = read_golden(want, key + ".rollout"), last = read_golden(want, key + ".last"),
                   logits = read_golden(want, key + ".logits");
      const Image photo = decode_image_file(image_path(explained[i]));
      const PatchGrid g = naflex_grid(photo.width, photo.height, 16, n);
      ASSERT_EQ(rollout.shape, (std::vector<int64_t>{g.rows, g.cols}));
      EXPECT_EQ(x.grid_rows, g.rows);
      EXPECT_EQ(x.grid_cols, g.cols);
      ASSERT_EQ(x.rollout.size(), rollout.f32.size());
      ASSERT_EQ(x.last.size(), last.f32.size());
      ASSERT_EQ(x.logits.size(), logits.f32.size());
      EXPECT_LT(max_abs_diff(x.rollout.data(), rollout.f32.data(), x.rollout.size()), 1e-4f);
      EXPECT_LT(max_abs_diff(x.last.data(), last.f32.data(), x.last.size()), 1e-5f);
      EXPECT_LT(max_abs_diff(x.logits.data(), logits.f32.data(), x.logits.size()), 1e-4f);
      const Image pic = decode_image(reinterpret_cast<const uint8_t*>(x.picture.data()), x.picture.size(), "picture");
      // The whole photo scaled to 512 on its longer side (a small one enlarged to 448), centred on at least
      // 320x96 for the caption (picture.h).
      const int longer = std::max(photo.width, photo.height), side = longer > 512 ? 512 : std::max(longer, 448);
      const double scale = double(side) / longer;
      EXPECT_NEAR(pic.width, std::max(320.0, photo.width * scale), 1.0) << "the whole photo";
      EXPECT_NEAR(pic.height, std::max(96.0, photo.height * scale), 1.0) << "the whole photo";
    }
    EXPECT_GE(got[0].grid_cols, 4 * got[0].grid_rows) << "the panorama's grid is as wide as it is";
    EXPECT_GT(got[1].grid_rows, got[1].grid_cols) << "the portrait's is taller than wide";
  }
  expect_error([&] { Explainer(dir_ + "/model", ExplainOptions{}).explain(inputs, [](auto&) {}); },
               "the model has no classifier head");
}

// `vit explain --max-patches 64 --save-attention`: one picture per photo, and each photo's maps over its own
// grid as rollout.<i> and last_cls.<i>, timm's values; the logits [N, 5].
TEST_F(NaflexModel, VitExplainSavesEachImagesOwnGrid) {
  const SafeTensors want(dir_ + "/explain.safetensors");
  TempDir out;
  const auto r = run_vit("explain -m " + dir_ + "/classifier --max-patches 64 --json --out " + out.path() +
                         " --save-attention " + out.file("a.safetensors") + " " + image_path("panorama") + " " +
                         image_path("portrait"));
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(json_lines(r.out).size(), 2u);
  const SafeTensors got(out.file("a.safetensors"));
  for (const auto& [i, name] : {std::pair{0, "panorama"}, std::pair{1, "portrait"}}) {
    SCOPED_TRACE(name);
    const std::string key = std::string(name) + ".64";
    for (const auto& [mine, theirs] : {std::pair{"rollout.", ".rollout"}, std::pair{"last_cls.", ".last"}}) {
      const std::string t = mine + std::to_string(i);
      ASSERT_EQ(got.get(t).shape, want.get(key + theirs).shape) << t;
      EXPECT_LT(max_abs_diff(got.to_f32(t), want.to_f32(key + theirs)), 1e-4f) << t;
    }
    EXPECT_TRUE(std::filesystem::is_regular_file(out.file(std::string(name) + ".attention.png")));
  }
  EXPECT_EQ(got.get("logits").shape, (std::vector<int64_t>{2, 5}));
  EXPECT_FALSE(got.has("rollout")) << "no tensor over a square grid";
}

// Bad budgets for explain: out of range (the library and the flag), and --max-patches for a square model.
TEST_F(NaflexModel, ExplainRefusesBadBudgets) {
  ExplainOptions o;
  o.max_patches = -1;
  expect_error([&] { Explainer(dir_ + "/classifier", o); }, "max patches -1 is out of range");
  TempDir out;
  auto r = run_vit("explain -m " + dir_ + "/classifier --max-patches 0x --out " + out.path() + " " + image_path("square"));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--max-patches"), std::string::npos) << r.err;
  r = run_vit("explain -m " + shared_data() + "/models/deit_tiny_patch16_224.fb_in1k --max-patches 64 --out " +
              out.path() + " " + image_path("square"));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--max-patches applies to NaFlex models"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace vit::test

// Every architecture timm 1.0.31 lists from vision_transformer.py, eva.py, beit.py and deit.py, as a shrunk
// random-weight model made by timm (tests/make_sweep_models.py): the engine either runs it within 1e-4 of
// timm (tokens, embeddings and outputs on three photos, through our own decoding and preprocessing against
// timm's data pipeline) or refuses it by name, never answers wrongly. The same weights with a config naming no
// timm architecture ("vit_custom", the heads and the preprocessing): what the tensors alone describe, run
// exactly or refused. The
// result per name is docs/MODELS.md (VIT_UPDATE_MODELS_MD=1 rewrites it); every name the README's families
// table shows must run. Not under the sanitizers (CI runs it once); skipped without timm in .venv, except
// under CI=true.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "engine/image/image.h"
#include "engine/preprocess/preprocess.h"
#include "models/families.h"
#include "models/network.h"
#include "reference_models.h"
#include "test_util.h"
#include "vit/vit.h"

namespace vit::test {
namespace {

constexpr float kTolerance = 1e-4f;

// What the engine does with one architecture.
struct Outcome {
  bool timm_failed = false;  // timm itself could not build or run it here (sweep.json says why)
  bool runs = false;
  std::string family;        // when it runs
  std::string refusal;       // when it does not: the engine's reason
  std::string wrong;         // a wrong answer or an error that is no refusal: the test fails
  float worst = 0;           // when it runs: the largest difference from timm
};

float diff(const float* got, const SafeTensors& ref, const char* name, size_t n) {
  const auto want = ref.to_f32(name);
  return want.size() == n ? max_abs_diff(got, want.data(), n) : INFINITY;
}

// The photos through our decoding and preprocessing, then our forward pass: the largest difference from
// timm's tokens, embeddings and outputs.
float run_on_photos(ViT& m, const SafeTensors& ref) {
  const ViTConfig& c = m.config();
  const auto photos = reference_photos();
  const int64_t B = int64_t(photos.size());
  auto plan = m.make_plan(B);
  for (int64_t i = 0; i < B; ++i)
    preprocess(decode_image_file(photos[size_t(i)], kDefaultMaxPixels, false), c.pre, plan->input() + i * c.input_floats());
  plan->run();
  const int64_t T = c.tokens(), D = c.width, C = c.classes;
  return std::max({diff(plan->tokens(), ref, "tokens", size_t(B * T * D)),
                   diff(plan->features(), ref, "embeddings", size_t(B * D)),
                   C ? diff(plan->logits(), ref, "outputs", size_t(B * C)) : diff(plan->features(), ref, "outputs", size_t(B * D))});
}

// Loads dir and compares; a vit::Error while loading is a refusal, anything else (or an answer off by
// more than the tolerance) is wrong.
Outcome try_model(const std::string& dir, const SafeTensors& ref) {
  Outcome o;
  try {
    ViT m = ViT::load(dir);
    o.family = family_name(m.config().family);
    o.worst = run_on_photos(m, ref);
    o.runs = o.worst < kTolerance;
    if (!o.runs) o.wrong = "answers differ from timm's by " + std::to_string(o.worst);
  } catch (const Error& e) {
    o.refusal = e.problem();
  } catch (const std::exception& e) {
    o.wrong = std::string("not a vit::Error: ") + e.what();
  }
  return o;
}

struct SweepModels {
  static GeneratorSpec get() {
    return {"sweep_models", {VIT_SOURCE_DIR "/tests/make_sweep_models.py", VIT_SOURCE_DIR "/tests/timm_references.py"},
            "timm", "TIMM_FUSED_ATTN=0 ", "has no timm"};
  }
};
class Sweep : public GeneratedSuite<SweepModels> {
 protected:
  // sweep.json, read once.
  static const nlohmann::json& index() {
    static const nlohmann::json j = [] {
      std::ifstream in(dir_ + "/sweep.json");
      return nlohmann::json::parse(in);
    }();
    return j;
  }

  // Every architecture's outcome, computed once for the tests below.
  static const std::map<std::string, Outcome>& outcomes() {
    static std::map<std::string, Outcome> all;
    if (!all.empty()) return all;
    for (const auto& [name, entry] : index()["architectures"].items()) {
      Outcome o;
      if (entry.contains("timm_error")) {
        o.timm_failed = true;
        o.refusal = entry["timm_error"].get<std::string>();
      } else {
        o = try_model(dir_ + "/" + name, SafeTensors(dir_ + "/" + name + "/reference.safetensors"));
      }
      all[name] = o;
    }
    return all;
  }

  // docs/MODELS.md as the sweep makes it.
  static std::string models_md() {
    const nlohmann::json& j = index();
    std::ostringstream md;
    md << "# Which models run\n\n"
          "Every architecture timm " << j["timm"].get<std::string>() << " lists from `vision_transformer.py`, `eva.py`, "
          "`beit.py` and `deit.py`, as a shrunk random-weight model made by timm (`tests/make_sweep_models.py`: width 64, depth 2, "
          "the architecture's own image size and settings), run by the engine on three photos and compared with timm's "
          "own outputs: it runs within 1e-4 of timm (tokens, embeddings and outputs, through "
          "the engine's own decoding and preprocessing of the photos against timm's data pipeline), or the engine refuses it by name. Generated by "
          "`tests/test_sweep.cpp` (`ctest -L sweep`); `VIT_UPDATE_MODELS_MD=1 ctest -L sweep` rewrites it.\n\n";
    int runs = 0, refused = 0;
    for (const auto& [name, o] : outcomes()) (o.runs ? runs : refused)++;
    md << runs << " run, " << refused << " are refused.\n\n| architecture | runs | family, or why not |\n|---|---|---|\n";
    for (const auto& [name, o] : outcomes()) {
      std::string why = o.runs ? o.family : o.timm_failed ? "timm itself cannot build it here: " + o.refusal : o.refusal;
      for (char& ch : why)
        if (ch == '|' || ch == '\n') ch = ' ';
      md << "| `" << name << "` | " << (o.runs ? "yes" : "no") << " | " << why << " |\n";
    }
    return md.str();
  }

};

TEST_F(Sweep, EveryArchitectureRunsLikeTimmOrIsRefusedByName) {
  int runs = 0;
  for (const auto& [name, o] : outcomes()) {
    EXPECT_EQ(o.wrong, "") << name;
    if (!o.runs && !o.timm_failed)
      EXPECT_NE(o.refusal.find("not supported"), std::string::npos) << name << " is refused, but not by name: " << o.refusal;
    runs += o.runs;
    std::printf("%-44s %s\n", name.c_str(),
                o.runs ? ("runs, max |difference| from timm " + std::to_string(o.worst)).c_str()
                       : ("refused: " + o.refusal).c_str());
  }
  std::printf("%d of %zu run\n", runs, outcomes().size());
  EXPECT_GT(outcomes().size(), 200u);

  // docs/MODELS.md is what this sweep finds (VIT_UPDATE_MODELS_MD=1 writes it instead of comparing).
  const std::string path = VIT_SOURCE_DIR "/docs/MODELS.md", md = models_md();
  if (std::getenv("VIT_UPDATE_MODELS_MD")) {
    write_file(path, md);
    std::printf("wrote %s\n", path.c_str());
  }
  EXPECT_EQ(read_file(path), md) << "docs/MODELS.md is not what the sweep finds: VIT_UPDATE_MODELS_MD=1 ctest -L sweep";

  // Every timm name the README's families table shows runs: refusing everything cannot pass.
  const std::string readme = read_file(VIT_SOURCE_DIR "/README.md");
  const auto table = readme.find("| family | timm names |");
  ASSERT_NE(table, std::string::npos) << "the README's families table";
  const std::string rows = readme.substr(table, readme.find("\n\n", table) - table);
  const std::regex arch_name(R"(`([a-z0-9]+_[a-z0-9_]+)`)");
  int named = 0;
  for (auto it = std::sregex_iterator(rows.begin(), rows.end(), arch_name); it != std::sregex_iterator(); ++it) {
    const std::string arch = (*it)[1];
    if (!outcomes().count(arch)) continue;  // a name of another module (none today)
    ++named;
    EXPECT_TRUE(outcomes().at(arch).runs) << "the README names " << arch << ", which the engine refuses: "
                                          << outcomes().at(arch).refusal;
  }
  EXPECT_GT(named, 5);
}

// The heads of a config that names an architecture without model_args.num_heads, and `vit bench --arch`:
// every architecture the engine runs has timm's full-size heads and shape (parameters apart from the head, whose
// width the preset picks); no other name has either.
TEST_F(Sweep, PresetsAreTimmsShapes) {
  int presets = 0, heads = 0;
  for (const auto& [name, entry] : index()["architectures"].items()) {
    ViTConfig c;
    if (!family_of_arch(name)) {
      EXPECT_EQ(arch_heads(name), 0) << name;
      EXPECT_FALSE(arch_preset(name, &c)) << name;
      continue;
    }
    ASSERT_TRUE(entry.contains("full")) << name;
    const nlohmann::json& t = entry["full"];
    EXPECT_EQ(arch_heads(name), t["heads"].get<int64_t>()) << name;
    ++heads;
    ASSERT_NO_THROW(c = config_for_arch(name)) << name;
    ++presets;
    EXPECT_EQ(c.width, t["width"].get<int64_t>()) << name;
    EXPECT_EQ(c.depth, t["depth"].get<int64_t>()) << name;
    EXPECT_EQ(c.heads, t["heads"].get<int64_t>()) << name;
    EXPECT_EQ(c.mlp, t["mlp"].get<int64_t>()) << name;
    EXPECT_EQ(c.patch, t["patch"].get<int64_t>()) << name;
    EXPECT_EQ(c.img_h(), t["img_size"][0].get<int64_t>()) << name;
    EXPECT_FLOAT_EQ(c.eps, t["eps"].get<float>()) << name;
    const std::string act = t["act"];
    EXPECT_EQ(c.act, act == "QuickGELU" ? Activation::QuickGelu
                     : act == "GELUTanh" ? Activation::GeluTanh
                     : act == "SiLU"     ? Activation::SwiGLU
                                         : Activation::Gelu) << name;
    const auto head = [&](int64_t classes) { return (c.dist_token ? 2 : 1) * classes * (c.width + 1); };
    EXPECT_EQ(ViT::parameters(c) - head(c.classes), t["parameters"].get<int64_t>() - head(t["classes"].get<int64_t>()))
        << name;
  }
  std::printf("heads of %d architectures and %d presets checked against timm's full-size models\n", heads, presets);
  EXPECT_EQ(presets, heads);
  EXPECT_GT(presets, 200);
}

// What an architecture's name brings (models/timm_archs.inc, what --arch and `vit bench --arch` take) is timm's:
// the table is what the generator finds in timm now (VIT_UPDATE_MODELS_MD=1 rewrites it), and for every model the
// engine runs, the structure its timm-made tensors show, its global_pool and its default pretrained config's
// preprocessing (in its config.json) are the table's. Without its config each is refused, naming what its tensors
// do not say; with --arch its own name it is refused too, naming both shapes, where it is shrunk to another width
// than timm's create_model(name).
TEST_F(Sweep, ArchitectureNamesBringTimmsOwnSettings) {
  const std::string path = VIT_SOURCE_DIR "/models/timm_archs.inc", table = read_file(dir_ + "/timm_archs.inc");
  if (std::getenv("VIT_UPDATE_MODELS_MD")) write_file(path, table);
  EXPECT_EQ(read_file(path), table) << "models/timm_archs.inc is not what timm says: VIT_UPDATE_MODELS_MD=1 ctest -L sweep";
  TempDir d;
  int checked = 0;
  for (const auto& [name, entry] : index()["architectures"].items()) {
    if (!family_of_arch(name)) continue;  // the ones that run (the first test shows they do)
    const std::string bare = d.file("model_" + std::to_string(checked++));
    ASSERT_EQ(run_shell("mkdir -p " + bare + " && ln -s " + dir_ + "/" + name + "/model.safetensors " + bare + "/"), 0);
    const ViTConfig named = ViT::load(dir_ + "/" + name).config(), timm = config_for_arch(name);
    EXPECT_EQ(structure_words(named), structure_words(timm)) << name;
    EXPECT_EQ(named.pool.kind, timm.pool.kind) << name;
    const PreprocessConfig &a = named.pre, &b = timm.pre;
    EXPECT_TRUE(a.height == b.height && a.width == b.width && a.crop_pct == b.crop_pct && a.crop_mode == b.crop_mode &&
                a.interpolation == b.interpolation && a.mean == b.mean && a.std == b.std)
        << name << ": its pretrained config says " << a.height << " crop_pct " << a.crop_pct << ", the table " << b.height
        << " crop_pct " << b.crop_pct;
    expect_error([&] { ViT::load(bare); }, "no config.json: the number of heads, the block order");
    if (shape_description(named) == shape_description(timm))  // test_vit*: timm's own width is 64
      EXPECT_EQ(ViT::load(bare, "", 0, Precision::F32, name).config().heads, timm.heads) << name;
    else
      expect_error([&] { ViT::load(bare, "", 0, Precision::F32, name); }, "--arch " + name + ": timm's " + name + " is width ");
  }
  std::printf("%d architectures' structure, pooling and preprocessing checked against timm's\n", checked);
  EXPECT_GT(checked, 200);
}

}  // namespace
}  // namespace vit::test

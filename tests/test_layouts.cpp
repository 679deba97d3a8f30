// The checkpoint layouts other than timm's against their own code: shrunk random-weight Hugging Face Dinov2Model,
// Dinov2WithRegistersModel, CLIPVisionModelWithProjection, SiglipVisionModel, OpenCLIP CLIP models and OpenCLIP's
// towers on timm trunks (ViT-B-16-SigLIP, EVA02-B-16, ViT-SO400M-14-SigLIP-384, ViT-B-32-SigLIP2-256)
// (tests/make_layout_models.py, run at test time by the .venv's transformers and open_clip over Debian's torch)
// and those libraries' outputs on sample photos through their own image processors. Tokens, embeddings and
// outputs within 1e-4 from the reference's input tensor (DINOv2 at the processor's 224 px, its 518-px position
// table resampled as each model's code does it, and at 518 px), and from the photos through our preprocessing
// where the pipelines are the same; zero-shot labels equal to open_clip's own; bad text-embeddings files named.
// Skipped without transformers and open_clip in .venv (scripts/setup.sh installs them), except under CI=true.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "engine/io/safetensors.h"
#include "models/families.h"
#include "vit/topk.h"
#include "models/network.h"
#include "library/zero_shot.h"
#include "reference_models.h"
#include "test_util.h"
#include "vit/vit.h"

namespace vit::test {
namespace {

// The models, generated once per build tree beside the vit binary (~20 s), again whenever the generator or
// the text-embeddings script changes (the folder keeps copies of both), under a lock, as Families does.
struct LayoutModels {
  static GeneratorSpec get() {
    return {"layout_models",
            {VIT_SOURCE_DIR "/tests/make_layout_models.py", VIT_SOURCE_DIR "/scripts/export_text_embeddings.py"},
            "transformers, open_clip", "", "lacks transformers or open_clip"};
  }
};
class Layouts : public GeneratedSuite<LayoutModels> {
 protected:
  // Our forward pass on the reference's own input tensor: tokens, embeddings and outputs against its.
  static void expect_like_reference(const std::string& name, const std::string& ref_name = "reference.safetensors",
                                    int64_t img_size = 0) {
    expect_model_like_reference(name, ref_name, img_size,
                                [&](const ViT& m) { return name + " " + ref_name + " (" + m.config().stored_as + ")"; });
  }

  // The whole path: our decoding and preprocessing of the photos, then the model (embed, and with --head
  // semantics the outputs), against the reference library's pipeline.
  static void expect_photos_like_reference(const std::string& name) {
    const SafeTensors ref(model(name) + "/reference.safetensors");
    Classifier c(model(name));
    for (const bool head : {false, true}) {
      EmbedOptions o;
      o.head = head;
      const auto got = c.embed(reference_photos(), o);
      const auto want = ref.to_f32(head ? "outputs" : "embeddings");
      const size_t E = size_t(c.embedding_size(o));
      ASSERT_EQ(want.size(), 3 * E) << name;
      float worst = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].error, "");
        worst = std::max(worst, max_abs_diff(got[i].embedding.data(), want.data() + i * E, E));
      }
      EXPECT_LT(worst, 1e-4f) << name << (head ? " --head" : "");
      std::printf("%s from the photos%s: max |difference| from its reference %.2e\n", name.c_str(),
                  head ? " (--head)" : "", double(worst));
    }
  }
};

TEST_F(Layouts, HfDinov2LikeTransformers) {
  expect_like_reference("hf_dinov2");  // at its processor's 224 px: torch's bicubic, no antialiasing
  expect_like_reference("hf_dinov2", "reference_518.safetensors", 518);
}
TEST_F(Layouts, HfDinov2WithRegistersLikeTransformers) {
  expect_like_reference("hf_dinov2_reg");  // antialiased, as its own code resamples
  expect_like_reference("hf_dinov2_reg", "reference_518.safetensors", 518);
}
TEST_F(Layouts, HfClipLikeTransformers) {
  expect_like_reference("hf_clip");
  expect_like_reference("hf_clip", "reference_288.safetensors", 288);  // interpolate_pos_encoding=True
  expect_like_reference("hf_clip_full");  // the image tower of a whole CLIPModel
}
TEST_F(Layouts, HfSiglipLikeTransformers) {
  expect_like_reference("hf_siglip");
  expect_like_reference("hf_siglip", "reference_288.safetensors", 288);
  expect_like_reference("hf_siglip_full");  // the image tower of a whole SiglipModel, its text tower left alone
}
TEST_F(Layouts, OpenClipLikeOpenClip) {
  expect_like_reference("openclip");
  expect_like_reference("openclip", "reference_288.safetensors", 288);  // through open_clip's resize_pos_embed
}
TEST_F(Layouts, OpenClipQuickGeluLikeOpenClip) { expect_like_reference("openclip_quickgelu"); }

// OpenCLIP towers on timm trunks (visual.trunk.*): the trunk's architecture from open_clip_config.json, its
// pool and head as open_clip's TimmModel makes them; at another size, against timm's own model there.
TEST_F(Layouts, OpenClipTimmTrunksLikeOpenClip) {
  expect_like_reference("oc_siglip_b16");  // SigLIP: the trunk's attention pool, no projection (timm_proj 'none')
  expect_like_reference("oc_siglip_b16", "reference_288.safetensors", 288);
  expect_like_reference("oc_eva02_b16");  // EVA-02 CLIP: class-token pool, the trunk's head the projection
  expect_like_reference("oc_eva02_b16", "reference_256.safetensors", 256);
}

// ViT-SO400M-14-SigLIP-384's trunk (vit_so400m_patch14_siglip_384): 384 px in patches of 14, a 27x27 grid over
// the top-left 378 px (timm's patch embedding leaves the last 6 pixels of each side unread, and so does the
// engine); at 336 px a 24x24 grid, its table resampled. SigLIP 2's ViT-B-32-SigLIP2-256: a trunk with GELU's
// tanh form.
TEST_F(Layouts, OpenClipSo400m384AndSigLIP2LikeOpenClip) {
  const SafeTensors ref(model("oc_so400m") + "/reference.safetensors");
  EXPECT_EQ(ref.get("input").shape, (std::vector<int64_t>{3, 3, 384, 384}));
  EXPECT_EQ(ref.get("tokens").shape, (std::vector<int64_t>{3, 729, 64}));  // the shape the reference ran
  const ViTConfig c = ViT::load(model("oc_so400m")).config();
  EXPECT_EQ(c.img_h(), 384);
  EXPECT_EQ(c.grid_h(), 27);
  EXPECT_EQ(c.heads, 16);
  expect_like_reference("oc_so400m");
  expect_like_reference("oc_so400m", "reference_336.safetensors", 336);
  expect_like_reference("oc_so400m", "reference.safetensors", 384);  // --img-size of its own size: the same
  const ViTConfig s2 = ViT::load(model("oc_siglip2_b32")).config();
  EXPECT_EQ(s2.arch, "vit_base_patch32_siglip_256");
  EXPECT_EQ(s2.act, Activation::GeluTanh);
  expect_like_reference("oc_siglip2_b32");
  expect_like_reference("oc_siglip2_b32", "reference_320.safetensors", 320);
  // Another size that is no multiple of the patch stays refused (timm would make the model there; the engine
  // reads a partial grid only at a model's own size).
  expect_error([] { ViT::load(model("oc_so400m"), "", 300); }, "image size 300 is not a multiple of the model's patch size 14");
}

// open_clip 2.32's SigLIP 2 and EVA-02-L configs: each one's trunk is an architecture the engine runs, with the
// pool and projection of the tower checked against open_clip above of the same structure (its family row's
// activation): SigLIP with GELU (oc_siglip_b16, oc_so400m), SigLIP with GELU's tanh form (oc_siglip2_b32),
// EVA-02 CLIP (oc_eva02_b16).
TEST_F(Layouts, OpenClipSigLIP2AndEva02LConfigsRun) {
  const auto read_json = [](const std::string& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in);
  };
  const nlohmann::json configs = read_json(model("open_clip_configs.json"));
  const std::map<std::pair<Family, Activation>, std::string> checked = {
      {{Family::SigLIP, Activation::Gelu}, "oc_siglip_b16"},
      {{Family::SigLIP, Activation::GeluTanh}, "oc_siglip2_b32"},
      {{Family::EVA02Clip, Activation::SwiGLU}, "oc_eva02_b16"}};
  int siglip2 = 0, eva02_l = 0;
  for (const auto& [name, v] : configs.items()) {
    const std::string arch = v["timm_model_name"];
    const FamilyRow* row = family_of_arch(arch);
    ASSERT_NE(row, nullptr) << name << ": " << arch << " " << refusal_of_arch(arch);
    const auto it = checked.find({row->family, row->defaults.act});
    ASSERT_NE(it, checked.end()) << name << ": " << arch << " is no structure checked against open_clip here";
    const nlohmann::json rep = read_json(model(it->second) + "/open_clip_config.json")["model_cfg"]["vision_cfg"];
    EXPECT_EQ(v["timm_pool"], rep["timm_pool"]) << name;
    EXPECT_EQ(v["timm_proj"], rep["timm_proj"]) << name;
    const ViTConfig c = config_for_arch(arch);
    EXPECT_EQ(c.img_h(), v["image_size"].get<int64_t>()) << name;  // open_clip's transform: the trunk's own size
    (name.find("SigLIP2") != std::string::npos ? siglip2 : eva02_l)++;
  }
  EXPECT_EQ(siglip2, 15);
  EXPECT_EQ(eva02_l, 2);
}

TEST_F(Layouts, FromPhotosLikeReference) {
  expect_photos_like_reference("openclip");
  expect_photos_like_reference("hf_siglip");
  expect_photos_like_reference("oc_siglip_b16");  // open_clip's squash resize, mean and std 0.5
  expect_photos_like_reference("oc_eva02_b16");
  expect_photos_like_reference("oc_so400m");  // 384 px, the last 6 of each side unread
  expect_photos_like_reference("oc_siglip2_b32");
}

TEST_F(Layouts, SettingsFromEachLayout) {
  const ViTConfig dino = ViT::load(model("hf_dinov2")).config();
  EXPECT_EQ(dino.family, Family::DINOv2);
  EXPECT_EQ(dino.stored_as, "Hugging Face Dinov2Model names, F32");
  EXPECT_EQ(dino.img_h(), 224);  // preprocessor_config.json's crop
  EXPECT_EQ(dino.pos_grid_h, 37);
  EXPECT_FALSE(dino.pos_antialias);
  const ViTConfig reg = ViT::load(model("hf_dinov2_reg")).config();
  EXPECT_EQ(reg.reg_tokens, 4);
  EXPECT_TRUE(reg.no_embed_class && reg.pos_antialias);
  const ViTConfig clip = ViT::load(model("hf_clip")).config();
  EXPECT_EQ(clip.family, Family::Clip);
  EXPECT_TRUE(clip.act == Activation::QuickGelu && clip.norm_pre && clip.pool.fc_norm && !clip.pool.final_norm);
  EXPECT_EQ(clip.classes, 32);
  const ViTConfig siglip = ViT::load(model("hf_siglip")).config();
  EXPECT_EQ(siglip.family, Family::SigLIP);
  EXPECT_TRUE(siglip.act == Activation::GeluTanh && !siglip.class_token);
  EXPECT_EQ(siglip.pool.kind, Pool::Map);
  EXPECT_EQ(ViT::load(model("hf_siglip_full")).config().family, Family::SigLIP);
  const ViTConfig oc = ViT::load(model("openclip")).config(), quick = ViT::load(model("openclip_quickgelu")).config();
  EXPECT_EQ(oc.stored_as, "OpenCLIP names, F32");
  EXPECT_EQ(oc.eps, 1e-5f);
  EXPECT_NE(oc.act, Activation::QuickGelu);
  EXPECT_EQ(quick.act, Activation::QuickGelu);
  EXPECT_EQ(oc.heads, 2);  // width 64 / head_width 32
  const ViTConfig sig = ViT::load(model("oc_siglip_b16")).config(), eva = ViT::load(model("oc_eva02_b16")).config();
  EXPECT_EQ(sig.stored_as, "OpenCLIP timm trunk names, F32");
  EXPECT_EQ(sig.arch, "vit_base_patch16_siglip_224");
  EXPECT_EQ(sig.family, Family::SigLIP);
  EXPECT_EQ(sig.pool.kind, Pool::Map);
  EXPECT_EQ(sig.classes, 0);
  EXPECT_EQ(sig.heads, 12);  // the architecture's
  EXPECT_EQ(sig.pre.crop_mode, CropMode::Squash);  // preprocess_cfg
  EXPECT_EQ(eva.arch, "eva02_base_patch16_clip_224");
  EXPECT_EQ(eva.family, Family::EVA02Clip);
  EXPECT_EQ(eva.pool.kind, Pool::Token);
  EXPECT_EQ(eva.classes, 32);
  EXPECT_EQ(eva.pool.head, HeadKind::Projection);
  EXPECT_TRUE(eva.rope.on);
}

// Hugging Face's SiglipVisionModel at 384 px in patches of 14 (google/siglip-so400m-patch14-384): its convolution
// reads the top-left 378 px, as timm's, and so does the engine; at 336 px as interpolate_pos_encoding=True. In a
// layout where that is not checked (Hugging Face's CLIP, which would read it alike) such a size is refused by name.
TEST_F(Layouts, HfSiglip384LikeTransformers) {
  EXPECT_EQ(ViT::load(model("hf_siglip_384")).config().grid_h(), 27);
  expect_like_reference("hf_siglip_384");
  expect_like_reference("hf_siglip_384", "reference_336.safetensors", 336);
  expect_photos_like_reference("hf_siglip_384");
  TempDir d;
  const std::string src = model("hf_clip");
  ASSERT_EQ(run_shell("ln -s " + src + "/model.safetensors " + src + "/config.json " + d.path() + "/"), 0);
  nlohmann::json p;
  std::ifstream(src + "/preprocessor_config.json") >> p;
  p["size"] = {{"shortest_edge", 232}};
  p["crop_size"] = {{"height", 232}, {"width", 232}};
  write_file(d.file("preprocessor_config.json"), p.dump());
  expect_error([&] { ViT::load(d.path()); },
               "input size 232x232 is not a multiple of the patch size 16: a partial patch grid in Hugging Face "
               "CLIP vision layout is not supported");
}

// A malformed OpenCLIP config or a missing trunk tensor: one error naming it.
TEST_F(Layouts, OpenClipTimmBadInputNamed) {
  const std::string src = model("oc_siglip_b16");
  nlohmann::json good;
  std::ifstream(src + "/open_clip_config.json") >> good;
  struct Case {
    std::string what;
    std::function<void(nlohmann::json&)> edit;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"no timm_model_name", [](auto& j) { j["model_cfg"]["vision_cfg"].erase("timm_model_name"); },
       "vision_cfg.timm_model_name is missing"},
      {"an unknown trunk", [](auto& j) { j["model_cfg"]["vision_cfg"]["timm_model_name"] = "vit_nonesuch_patch16"; },
       "vision_cfg.timm_model_name: architecture 'vit_nonesuch_patch16'"},
      {"a trunk the engine refuses", [](auto& j) { j["model_cfg"]["vision_cfg"]["timm_model_name"] = "vit_base_patch16_rpn_224"; },
       "not supported yet (vit_base_patch16_rpn_224)"},
      {"open_clip's own projection", [](auto& j) { j["model_cfg"]["vision_cfg"]["timm_proj"] = "linear"; },
       "vision_cfg.timm_proj 'linear'"},
      {"open_clip's own pool", [](auto& j) { j["model_cfg"]["vision_cfg"]["timm_pool"] = "abs_attn"; },
       "vision_cfg.timm_pool 'abs_attn'"},
      {"a pool timm has not", [](auto& j) { j["model_cfg"]["vision_cfg"]["timm_pool"] = "max"; },
       "vision_cfg.timm_pool: global_pool 'max' is not supported"},
      {"a classifier's trunk as the projection",
       [](auto& j) {
         j["model_cfg"]["vision_cfg"]["timm_model_name"] = "vit_base_patch16_224";
         j["model_cfg"]["vision_cfg"]["timm_proj"] = nullptr;
       },
       "vit_base_patch16_224 is a ViT, whose head is a classifier"},
      {"a wrong embed_dim", [](auto& j) { j["model_cfg"]["embed_dim"] = 512; }, "model_cfg.embed_dim is 512"},
      {"no vision_cfg", [](auto& j) { j["model_cfg"].erase("vision_cfg"); }, "no model_cfg.vision_cfg"},
      {"a string for a number", [](auto& j) { j["model_cfg"]["vision_cfg"]["image_size"] = "big"; }, "image_size"},
  };
  for (const Case& c : cases) {
    TempDir d;
    run_shell("ln -s " + src + "/open_clip_model.safetensors " + d.file("open_clip_model.safetensors"));
    nlohmann::json j = good;
    c.edit(j);
    write_file(d.file("open_clip_config.json"), j.dump());
    const std::string message = expect_error([&] { ViT::load(d.path()); }, c.message);
    EXPECT_NE(message.find("open_clip_config.json"), std::string::npos) << c.what << ": " << message;
  }
  {  // without its config the trunk's architecture is unknown
    TempDir d;
    run_shell("ln -s " + src + "/open_clip_model.safetensors " + d.file("open_clip_model.safetensors"));
    expect_error([&] { ViT::load(d.path()); }, "without its open_clip_config.json");
  }
  {  // a trunk tensor missing
    TempDir d;
    const SafeTensors st(src + "/open_clip_model.safetensors");
    std::vector<std::vector<float>> values;
    std::vector<TensorToWrite> kept;
    for (const auto& [name, t] : st.tensors()) values.push_back(st.to_f32(name));
    size_t i = 0;
    for (const auto& [name, t] : st.tensors()) {
      if (name != "visual.trunk.blocks.1.attn.proj.weight") kept.push_back({name, t.shape, values[i].data()});
      ++i;
    }
    write_safetensors(d.file("open_clip_model.safetensors"), kept);
    run_shell("cp " + src + "/open_clip_config.json " + d.path());
    expect_error([&] { ViT::load(d.path()); }, "missing tensor visual.trunk.blocks.1.attn.proj.weight");
  }
}

// vit classify --text-embeddings: open_clip's own zero-shot probabilities on the photos (softmax over the
// classes), and SiglipModel's (each class's sigmoid, with its logit bias).
TEST_F(Layouts, ZeroShotLikeReference) {
  for (const std::string name : {"openclip", "openclip_quickgelu", "hf_siglip_full", "oc_siglip_b16", "oc_eva02_b16", "oc_so400m",
                                 "oc_siglip2_b32"}) {
    const SafeTensors ref(model(name) + "/reference.safetensors");
    const auto want = ref.to_f32("zero_shot");
    const int64_t C = ref.get("zero_shot").shape[1];
    const auto files = reference_photos();
    const Result r = run_vit("classify --json -k " + std::to_string(C) + " -m " + model(name) + " --text-embeddings " +
                             model(name) + "/classes.safetensors " + files[0] + " " + files[1] + " " + files[2]);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto lines = json_lines(r.out);
    ASSERT_EQ(lines.size(), 3u) << r.out;
    float worst = 0;
    for (size_t i = 0; i < 3; ++i) {
      const auto& top = lines[i]["top"];
      ASSERT_EQ(int64_t(top.size()), C);
      const float* row = want.data() + i * size_t(C);
      EXPECT_EQ(top[0]["index"].get<int64_t>(), std::max_element(row, row + C) - row) << name << " " << files[i];
      for (const auto& p : top) worst = std::max(worst, std::fabs(p["prob"].get<float>() - row[p["index"].get<int>()]));
    }
    EXPECT_LT(worst, 1e-4f) << name;
    EXPECT_EQ(lines[0]["top"][0]["label"].get<std::string>().empty(), false);
    std::printf("%s zero-shot: max |probability difference| from its library %.2e\n", name.c_str(), double(worst));
  }
}

// A Hugging Face CLIPModel folder: scripts/export_text_embeddings.py's file for it against CLIPModel's own
// softmax(logits_per_image), from the reference's input tensor (CLIPImageProcessor crops a pixel apart from
// timm's pipeline), and `vit classify --text-embeddings` on the folder labels the photos with the file's names.
TEST_F(Layouts, ZeroShotHfClipLikeTransformers) {
  const SafeTensors ref(model("hf_clip_full") + "/reference.safetensors");
  const std::string classes = model("hf_clip_full") + "/classes.safetensors";
  ViT m = ViT::load(model("hf_clip_full"));
  const int64_t B = ref.get("input").shape[0], E = m.config().classes;
  const ZeroShot zero_shot = ZeroShot::load(classes, E);
  const int64_t C = zero_shot.classes();
  const auto input = ref.to_f32("input"), want = ref.to_f32("zero_shot");
  ASSERT_EQ(int64_t(want.size()), B * C);
  auto plan = m.make_plan(B);
  std::memcpy(plan->input(), input.data(), input.size() * sizeof(float));
  plan->run();
  float worst = 0;
  std::vector<float> scores(static_cast<size_t>(C));
  for (int64_t i = 0; i < B; ++i) {
    zero_shot.score(plan->logits() + i * E, scores.data());
    for (const Scored& s : zero_shot.top(scores.data(), int(C)))
      worst = std::max(worst, std::fabs(s.prob - want[size_t(i * C + s.index)]));
  }
  EXPECT_LT(worst, 1e-4f);
  std::printf("hf_clip_full zero-shot: max |probability difference| from CLIPModel's %.2e\n", double(worst));
  const Result r = run_vit("classify --json -m " + model("hf_clip_full") + " --text-embeddings " + classes + " " +
                           reference_photos()[0]);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json_lines(r.out).at(0)["top"][0]["label"].get<std::string>().empty(), false) << r.out;
}

TEST_F(Layouts, BadTextEmbeddingsNamed) {
  TempDir d;
  const std::string photo = reference_photos()[0], classes = model("openclip") + "/classes.safetensors";
  const float zeros[4] = {1, 0, 0, 0};
  write_safetensors(d.file("other.safetensors"), {{"embeddings", {1, 4}, zeros}}, {{"labels", "[\"a\"]"}});
  write_file(d.file("text.safetensors"), "tench\ngoldfish\n");
  struct Case {
    std::string args, message, command = "classify";
  };
  std::vector<Case> cases = {
      {"-m " + model("hf_siglip") + " --text-embeddings " + classes,
       "text embeddings of width 32, but the model's image embeddings have width 64"},
      {"-m " + model("openclip") + " --text-embeddings " + d.file("other.safetensors"), "no tensor text_embeddings"},
      {"-m " + model("openclip") + " --text-embeddings " + d.file("text.safetensors"), "not a text-embeddings file"},
      {"-m " + model("hf_dinov2") + " --text-embeddings " + classes, "with a CLIP or SigLIP image tower"},
      {"-m " + model("openclip") + " --text-embeddings " + classes + " --labels " + d.file("text.safetensors"),
       "excludes"},
  };
  // OpenCLIP's and Hugging Face's CLIP heads are projections, not classes: no labels without text embeddings,
  // nothing for vit eval or vit explain.
  const std::string no_head = "no classifier head (embeddings only): use vit embed, or for a CLIP or SigLIP image "
                              "tower vit classify --text-embeddings";
  for (const std::string name : {"openclip", "hf_clip"}) {
    cases.push_back({"-m " + model(name), no_head});
    cases.push_back({"-m " + model(name), no_head, "eval"});
    cases.push_back({"-m " + model(name) + " --out " + d.path(), no_head, "explain"});
  }
  for (const auto& [args, message, command] : cases) {
    const Result r = run_vit(command + " " + args + " " + photo);
    EXPECT_EQ(r.code, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
  }
}

// A generator that fails says why: the end of its error output, not only its name.
TEST(ReferenceModels, FailedGeneratorShowsItsErrors) {
  if (run_shell(kVenvPython + " -c pass") != 0) {
    if (in_ci()) FAIL() << "CI=true but there is no " << kVenvPython << " (scripts/setup.sh makes it)";
    GTEST_SKIP() << "no " << kVenvPython << " (scripts/setup.sh makes it); skipping";
  }
  TempDir d;
  const std::string script = d.file("make_nothing.py");
  write_file(script, "import sys\nprint('made nothing yet')\nsys.exit('make_nothing.py: no module named frobnicate')\n");
  const GeneratedModels g = generated_models("failing_generator_test", {script}, "sys");
  run_shell("rm -rf " + g.dir + ".tmp " + g.dir + ".lock " + g.dir + ".stderr");
  EXPECT_FALSE(g.ready);
  EXPECT_NE(g.error.find("make_nothing.py failed (exit 1)"), std::string::npos) << g.error;
  EXPECT_NE(g.error.find("make_nothing.py: no module named frobnicate"), std::string::npos) << g.error;
  EXPECT_EQ(g.error.find("made nothing yet"), std::string::npos) << g.error;  // its stdout is not its errors
}

}  // namespace
}  // namespace vit::test

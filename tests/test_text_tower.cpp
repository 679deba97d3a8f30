// The text towers against their own code on shrunk random-weight models (tests/make_text_models.py): open_clip's
// CLIP (GELU and QuickGELU), EVA02-B-16, ViT-B-16-SigLIP and ViT-B-32-SigLIP2-256 against encode_text; Hugging
// Face's CLIPModel (both poolings) and SiglipModel against get_text_features. Our tokenizer gives the reference's ids,
// the embeddings agree within 1e-5 whether the texts run together or one at a time; int8 (and bf16 where the CPU
// has it) agrees with f32 in cosine; towers and files the engine cannot run are refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "models/text_tower.h"
#include "test_util.h"
#include "text_models.h"
#include "vit/cpu.h"

namespace vit::test {
namespace {

double cosine(const float* a, const float* b, int64_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (int64_t i = 0; i < n; ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

class TextTowers : public GeneratedSuite<TextModels> {
 protected:
  // The reference's ids and embeddings; ours from the same strings, all at once and one at a time.
  static void expect_like_reference(const std::string& name) {
    const SafeTensors ref(model(name) + "/text_reference.safetensors");
    const std::vector<std::string> strings = nlohmann::json::parse(ref.metadata().at("strings"));
    TextTower tower = TextTower::load(model(name));
    const TextConfig& c = tower.config();
    const int64_t N = int64_t(strings.size()), E = c.embed;
    ASSERT_EQ(ref.get("ids").shape, (std::vector<int64_t>{N, c.context})) << name;
    const std::vector<float> ids = ref.to_f32("ids"), want = ref.to_f32("embeddings");
    ASSERT_EQ(int64_t(want.size()), N * E) << name << ": " << c.summary();
    const std::vector<Tokens> tokens = tower.tokenize(strings);
    for (int64_t i = 0; i < N; ++i)
      for (int64_t t = 0; t < c.context; ++t)
        ASSERT_EQ(tokens[size_t(i)].ids[size_t(t)], int32_t(ids[size_t(i * c.context + t)]))
            << name << ": string " << i << " token " << t;
    const std::vector<float> together = tower.embed(tokens);
    float alone = 0;
    for (int64_t i = 0; i < N; ++i) {
      const std::vector<float> one = tower.embed({tokens[size_t(i)]});
      alone = std::max(alone, max_abs_diff(one.data(), want.data() + i * E, size_t(E)));
    }
    const float all = max_abs_diff(together, want);
    EXPECT_LT(all, 1e-5f) << name << ": " << c.summary();
    EXPECT_LT(alone, 1e-5f) << name;
    std::printf("%s (%s): max |difference| from its reference %.2e together, %.2e one at a time\n", name.c_str(),
                c.summary().c_str(), double(all), double(alone));
  }

  // The same tower at a lower precision: each text's embedding against f32's, in cosine, at least `least`.
  static void expect_close_to_f32(const std::string& name, Precision p, double least) {
    TextTower f32 = TextTower::load(model(name));
    TextTower low = TextTower::load(model(name), p);
    const SafeTensors ref(model(name) + "/text_reference.safetensors");
    const std::vector<std::string> strings = nlohmann::json::parse(ref.metadata().at("strings"));
    const auto tokens = f32.tokenize(strings);
    const auto a = f32.embed(tokens), b = low.embed(tokens);
    const int64_t E = f32.embedding_size();
    double worst = 1;
    for (size_t i = 0; i < strings.size(); ++i) worst = std::min(worst, cosine(a.data() + i * E, b.data() + i * E, E));
    EXPECT_GE(worst, least) << name << " at " << precision_name(p);
    std::printf("%s at %s: the lowest cosine to f32 over %zu texts %.6f\n", name.c_str(), precision_name(p),
                strings.size(), worst);
  }
};

// open_clip's CLIP with GELU and with QuickGELU, EVA02-B-16, ViT-B-16-SigLIP, ViT-B-32-SigLIP2-256.
TEST_F(TextTowers, OpenClipTowersLikeEncodeText) {
  for (const char* name : {"oc_clip", "oc_clip_quickgelu", "oc_eva02", "oc_siglip", "oc_siglip2"})
    expect_like_reference(name);
}
// CLIPModel pooled at the first eos_token_id, and with the older configs' eos_token_id 2 at the largest id; SiglipModel.
TEST_F(TextTowers, HuggingFaceTowersLikeGetTextFeatures) {
  for (const char* name : {"hf_clip", "hf_clip_eos2", "hf_siglip"}) expect_like_reference(name);
}

TEST_F(TextTowers, RealShapesLikeEncodeText) {
  expect_like_reference("oc_clip_b32_shape");
  expect_like_reference("oc_siglip_b16_shape");
}

// int8 against f32 in cosine, on towers of real models' shapes (ViT-B-32's, ViT-B-16-SigLIP's: 12 blocks of width 512
// and 768) and on the shrunk ones, random weights: at least 0.999. Without VNNI the towers' layers take 8-bit weights
// and 7-bit inputs (Int8Split::SevenBitInputs), which reach about 0.9991; 7-bit weights would give 0.9985.
TEST_F(TextTowers, Int8AgreesWithF32) {
  for (const char* name : {"oc_clip_b32_shape", "oc_siglip_b16_shape", "oc_clip", "oc_siglip", "oc_siglip2", "hf_clip",
                           "hf_siglip", "oc_eva02"})
    expect_close_to_f32(name, Precision::Int8, 0.999);
}

TEST_F(TextTowers, Bf16AgreesWithF32WhereTheCpuHasIt) {
  if (!cpu_isa().bf16) GTEST_SKIP() << "this CPU (" << cpu_isa().name << ") has no bf16 products: the bf16 tower cannot run";
  for (const char* name : {"oc_clip_b32_shape", "oc_siglip_b16_shape"}) expect_close_to_f32(name, Precision::BF16, 0.999);
}

// A text's embedding does not depend on the texts beside it, nor on the Plan's rows past its own.
TEST_F(TextTowers, ClipTextsOfDifferentLengthsRunTogether) {
  TextTower tower = TextTower::load(model("oc_clip"));
  const auto tokens = tower.tokenize({"a dog", std::string(300, 'x') + " long", "a photo of a cat on a beach"});
  const auto together = tower.embed(tokens);
  const int64_t E = tower.embedding_size();
  for (size_t i = 0; i < tokens.size(); ++i) {
    auto plan = tower.make_plan(1, tower.config().context);  // all 77 rows, the padding run too
    const float* full = plan->run({tokens[i]});
    EXPECT_LT(max_abs_diff(full, together.data() + i * E, size_t(E)), 1e-6f) << "text " << i;
  }
}

// A token past the tower's vocabulary, a model without a text tower, and unsupported text settings are refused.
TEST_F(TextTowers, BadInputIsNamed) {
  TextTower tower = TextTower::load(model("oc_siglip"));
  Tokens t = tower.tokenize({"a dog"})[0];
  t.ids[3] = int32_t(tower.config().vocab);
  expect_error([&] { tower.embed({t}); }, "text 0: token " + std::to_string(tower.config().vocab) +
                                               " is outside the tower's vocabulary of " +
                                               std::to_string(tower.config().vocab));
  expect_error([&] { tower.tokenize({"a dog", "", "a cat \xff"}); }, "text 2: not valid UTF-8: byte 6 (0xff)");
  TempDir d;
  write_tiny_model(d.path(), TinySpec{});
  expect_error([&] { TextTower::load(d.path()); }, "has no text tower");
  // An OpenCLIP config with a text setting the engine does not run.
  TempDir oc;
  for (const char* f : {"open_clip_model.safetensors", "bpe_simple_vocab_16e6.txt.gz"})
    write_file(oc.file(f), read_file(model("oc_clip") + "/" + f));
  nlohmann::json cfg = nlohmann::json::parse(read_file(model("oc_clip") + "/open_clip_config.json"));
  cfg["model_cfg"]["text_cfg"]["embed_cls"] = true;
  write_file(oc.file("open_clip_config.json"), cfg.dump());
  expect_error([&] { TextTower::load(oc.path()); }, "text_cfg.embed_cls (CoCa's class token after the text): not supported");
  cfg["model_cfg"]["text_cfg"].erase("embed_cls");
  cfg["model_cfg"]["text_cfg"]["hf_model_name"] = "roberta-base";
  write_file(oc.file("open_clip_config.json"), cfg.dump());
  expect_error([&] { TextTower::load(oc.path()); }, "a text tower from Hugging Face (text_cfg.hf_model_name \"roberta-base\")");
  cfg["model_cfg"]["text_cfg"].erase("hf_model_name");
  cfg["model_cfg"]["text_cfg"]["layers"] = 3;
  write_file(oc.file("open_clip_config.json"), cfg.dump());
  expect_error([&] { TextTower::load(oc.path()); }, "layers is 3, but the checkpoint's text blocks is 2");
  // The tokenizer's files are the model's too: without its vocabulary, the tower is refused naming it.
  cfg["model_cfg"]["text_cfg"]["layers"] = 2;
  write_file(oc.file("open_clip_config.json"), cfg.dump());
  std::remove(oc.file("bpe_simple_vocab_16e6.txt.gz").c_str());
  expect_error([&] { TextTower::load(oc.path()); }, "has no bpe_simple_vocab_16e6.txt.gz");
}

// A Hugging Face config whose text settings the engine does not run, or that contradict the tensors, is refused.
TEST_F(TextTowers, HuggingFaceTextSettingsTheEngineCannotRunAreNamed) {
  TempDir d;
  for (const auto& e : std::filesystem::directory_iterator(model("hf_clip")))
    write_file(d.file(e.path().filename().string()), read_file(e.path().string()));
  const nlohmann::json config = nlohmann::json::parse(read_file(model("hf_clip") + "/config.json"));
  const auto refused = [&](const char* key, const nlohmann::json& value, const std::string& fragment) {
    nlohmann::json c = config;
    c["text_config"][key] = value;
    write_file(d.file("config.json"), c.dump());
    expect_error([&] { TextTower::load(d.path()); }, fragment);
  };
  refused("hidden_act", "relu", "text_config.hidden_act 'relu' is not supported");
  refused("num_hidden_layers", 3, "num_hidden_layers is 3, but the checkpoint's text blocks is 2");
  refused("max_position_embeddings", 64, "max_position_embeddings is 64, but the checkpoint's position table's rows is 77");
}

// A SigLIP checkpoint whose folder holds the fast tokenizer's tokenizer.json but not the SentencePiece model it is
// run from is refused when the tower loads, naming the missing file: OpenCLIP's SigLIP and SigLIP 2, and SiglipModel.
TEST_F(TextTowers, SentencePieceModelMissingBesideTokenizerJsonIsNamed) {
  const std::pair<const char*, const char*> cases[] = {{"oc_siglip", "spiece.model"},
                                                       {"oc_siglip2", "tokenizer.model"},
                                                       {"hf_siglip", "spiece.model"}};
  for (const auto& [name, missing] : cases) {
    TempDir d;
    for (const auto& e : std::filesystem::directory_iterator(model(name)))
      if (e.path().filename() != missing) write_file(d.file(e.path().filename().string()), read_file(e.path().string()));
    // SiglipModel's folder as save_pretrained leaves it has no tokenizer.json: the one a hub folder may hold.
    if (!std::filesystem::exists(d.file("tokenizer.json")))
      write_file(d.file("tokenizer.json"), read_file(model("tok_siglip_t5") + "/tokenizer.json"));
    TextTower::load(model(name));  // the folder it was copied from loads
    expect_error([&] { TextTower::load(d.path()); },
                 d.path() + ": holds tokenizer.json but not " + missing + ", the SentencePiece model");
  }
}

}  // namespace
}  // namespace vit::test

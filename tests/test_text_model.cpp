// vit::TextModel, the text side as programs embed it, on the shrunk random-weight models of tests/make_text_models.py:
// its embeddings are the references' (encode_text, get_text_features) within 1e-5, normalized as F.normalize; a text
// that cannot be tokenized gets its error and the others their embeddings; a model without a text tower, a missing
// tokenizer file and options out of range are refused by name; open_clip's zero-shot class embeddings.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/io/safetensors.h"
#include "model_files.h"
#include "test_util.h"
#include "text_models.h"
#include "vit/request.h"
#include "vit/text.h"

namespace vit::test {
namespace {

class TextModelTest : public GeneratedSuite<TextModels> {};

// Every kind of tower through the library, batched in twos (so the batches differ in length), against its reference.
TEST_F(TextModelTest, EmbeddingsLikeTheReferences) {
  for (const char* name : {"oc_clip", "oc_eva02", "oc_siglip", "oc_siglip2", "hf_clip", "hf_siglip"}) {
    const SafeTensors ref(model(name) + "/text_reference.safetensors");
    std::vector<std::string> strings = nlohmann::json::parse(ref.metadata().at("strings"));
    const std::vector<float> want = ref.to_f32("embeddings");
    TextOptions o;
    o.batch = 2;
    const TextModel text(model(name), o);
    const int64_t E = text.info().embedding;
    ASSERT_EQ(want.size(), strings.size() * size_t(E)) << name;
    // The library refuses the empty text (the references embed it): its row is left out here.
    const std::vector<TextEmbedding> got = text.embed(strings);
    const std::vector<TextEmbedding> unit = text.embed(strings, true);
    float worst = 0, worst_unit = 0;
    for (size_t i = 0; i < strings.size(); ++i) {
      if (strings[i].empty()) {
        EXPECT_NE(got[i].error.find("empty"), std::string::npos) << name << ": " << got[i].error;
        continue;
      }
      ASSERT_EQ(got[i].error, "") << name << " text " << i;
      ASSERT_EQ(int64_t(got[i].embedding.size()), E);
      worst = std::max(worst, max_abs_diff(got[i].embedding.data(), want.data() + i * size_t(E), size_t(E)));
      double ss = 0;
      for (int64_t e = 0; e < E; ++e) ss += double(want[i * size_t(E) + size_t(e)]) * want[i * size_t(E) + size_t(e)];
      std::vector<float> w(want.begin() + long(i * size_t(E)), want.begin() + long((i + 1) * size_t(E)));
      for (float& x : w) x = float(x / std::sqrt(ss));
      worst_unit = std::max(worst_unit, max_abs_diff(unit[i].embedding.data(), w.data(), size_t(E)));
    }
    EXPECT_LT(worst, 1e-5f) << name;
    EXPECT_LT(worst_unit, 1e-5f) << name;
    std::printf("%s (%s, %s, context %lld): max |difference| %.2e, normalized %.2e\n", name, text.info().tower.c_str(),
                text.info().tokenizer.c_str(), static_cast<long long>(text.info().context), double(worst),
                double(worst_unit));
  }
}

TEST_F(TextModelTest, InfoSaysWhatTheTowerIs) {
  const TextModel clip(model("oc_clip")), siglip(model("oc_siglip2"));
  EXPECT_EQ(clip.info().tower, "CLIP");
  EXPECT_EQ(clip.info().context, 77);
  EXPECT_EQ(clip.info().embedding, 32);
  EXPECT_FALSE(clip.info().logit_bias);
  // make_layout_models.py's randomize: logit_scale drawn in [2, 3), given exponentiated.
  EXPECT_GE(clip.info().logit_scale, std::exp(2.0f));
  EXPECT_LT(clip.info().logit_scale, std::exp(3.0f));
  EXPECT_EQ(siglip.info().tower, "SigLIP 2");
  EXPECT_EQ(siglip.info().context, 64);
  EXPECT_TRUE(siglip.info().logit_bias);
}

// Empty, a NUL byte, not UTF-8: each named, the good texts embedded as alone; a long text cut and said.
TEST_F(TextModelTest, BadTextsAreNamedAndTheOthersRun) {
  const TextModel text(model("oc_clip"));
  const std::string long_text(100000, 'a');
  const std::vector<std::string> texts = {"a dog", "", std::string("a\0b", 3), "caf\xc3", "a cat", long_text};
  const std::vector<TextEmbedding> got = text.embed(texts);
  EXPECT_EQ(got[0].error, "");
  EXPECT_NE(got[1].error.find("empty"), std::string::npos) << got[1].error;
  EXPECT_NE(got[2].error.find("NUL byte (at byte 1)"), std::string::npos) << got[2].error;
  EXPECT_NE(got[3].error.find("not valid UTF-8"), std::string::npos) << got[3].error;
  EXPECT_EQ(got[4].error, "");
  EXPECT_EQ(got[5].error, "");
  EXPECT_TRUE(got[5].truncated);
  EXPECT_EQ(got[5].tokens, 77);
  const std::vector<TextEmbedding> alone = text.embed({"a dog", "a cat"});
  EXPECT_LT(max_abs_diff(got[0].embedding, alone[0].embedding), 1e-6f);
  EXPECT_LT(max_abs_diff(got[4].embedding, alone[1].embedding), 1e-6f);
  const std::vector<TextTokens> tokens = text.tokens({"a dog", "caf\xc3"});
  EXPECT_EQ(tokens[0].ids, (std::vector<int32_t>{49406, 320, 1929, 49407}));
  EXPECT_NE(tokens[1].error.find("not valid UTF-8"), std::string::npos);
  // The same as a request (TextModel::run): embed()'s answers, normalized as the request asks; images refused.
  EmbedOptions unit;
  unit.normalize = true;
  const Answer a = text.run(Request::of_texts({"a dog", "", "a cat"}).with_embed(unit));
  const std::vector<TextEmbedding> want = text.embed({"a dog", "", "a cat"}, true);
  ASSERT_EQ(a.texts.size(), 3u);
  EXPECT_EQ(a.texts[0].embedding, want[0].embedding);
  EXPECT_EQ(a.texts[1].error, want[1].error);
  EXPECT_EQ(a.texts[2].embedding, want[2].embedding);
  EXPECT_THROW(text.run(Request::of_files({"a.jpg"}, Output::Embedding)), ArgumentError);
  EXPECT_THROW(text.run(Request::of_texts({"a dog"}, Output::Top)), ArgumentError);
}

TEST_F(TextModelTest, ModelsWithoutTextAndBadOptionsAreRefused) {
  // An image tower alone.
  const TempDir dir, image_only;
  write_tiny_model(image_only.path(), TinySpec{});
  try {
    TextModel m(image_only.path());
    ADD_FAILURE() << "an image tower alone was loaded as text";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no text tower"), std::string::npos) << e.what();
  }
  // A tokenizer file missing: named.
  const std::string no_vocab = dir.path() + "/oc_clip";
  std::filesystem::copy(model("oc_clip"), no_vocab);
  std::filesystem::remove(no_vocab + "/bpe_simple_vocab_16e6.txt.gz");
  try {
    TextModel m(no_vocab);
    ADD_FAILURE() << "a model without its tokenizer was loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bpe_simple_vocab_16e6.txt.gz"), std::string::npos) << e.what();
  }
  TextOptions o;
  o.batch = 0;
  EXPECT_THROW(TextModel(model("oc_clip"), o), ArgumentError);
  o.batch = 8;
  o.threads = -1;
  EXPECT_THROW(TextModel(model("oc_clip"), o), ArgumentError);
}

// open_clip's build_zero_shot_classifier: each class's prompts' unit embeddings averaged, then unit again.
TEST_F(TextModelTest, ClassEmbeddingsAreTheMeanOfThePrompts) {
  const TextModel text(model("oc_clip"));
  const int64_t E = text.info().embedding;
  EXPECT_EQ(prompt_templates(PromptTemplates::ImageNet).size(), 80u);
  EXPECT_EQ(prompt_templates(PromptTemplates::Simple).size(), 7u);
  const std::vector<float> c = text.class_embeddings({"tench", "goldfish"}, PromptTemplates::Simple);
  ASSERT_EQ(c.size(), 2 * size_t(E));
  std::vector<std::string> prompts;
  for (const std::string& t : prompt_templates(PromptTemplates::Simple)) prompts.push_back(t.substr(0, t.find("{}")) + "goldfish" + t.substr(t.find("{}") + 2));
  std::vector<double> mean(static_cast<size_t>(E), 0.0);
  for (const TextEmbedding& e : text.embed(prompts, true))
    for (int64_t i = 0; i < E; ++i) mean[size_t(i)] += e.embedding[size_t(i)] / double(prompts.size());
  double ss = 0;
  for (double x : mean) ss += x * x;
  for (int64_t i = 0; i < E; ++i) EXPECT_NEAR(c[size_t(E + i)], mean[size_t(i)] / std::sqrt(ss), 1e-6);
  EXPECT_THROW(text.class_embeddings({"tench", ""}, PromptTemplates::Simple), ArgumentError);
}

}  // namespace
}  // namespace vit::test

// The tokenizers token for token against the reference tokenizer of each checkpoint layout, on a few thousand strings
// (ASCII, accents, CJK, emoji, HTML entities, mixed case, repeated punctuation, full-width forms, controls and
// whitespace, over-length; no mojibake): open_clip's SimpleTokenizer (its vocabulary as bpe_simple_vocab_16e6.txt.gz
// and as merges.txt), transformers' CLIPTokenizerFast (vocab.json and merges.txt, and tokenizer.json), open_clip's
// HFTokenizer over a T5 and a Gemma SentencePiece model, transformers' SiglipTokenizer (tests/make_text_models.py);
// over-length text cut as they cut it; folders that lack the file their tokenizer runs from refused, naming it.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/text/tokenizer.h"
#include "engine/text/unicode.h"
#include "test_util.h"
#include "text_models.h"

namespace vit::test {
namespace {

class Tokenizers : public GeneratedSuite<TextModels> {
 protected:
  static const nlohmann::json& references() {
    static const nlohmann::json j = nlohmann::json::parse(read_file(model("tokens.json")));
    return j;
  }
  // Every string through our tokenizer of `kind` from the reference's folder, against the reference's ids.
  static void expect_like_reference(const std::string& name, TokenizerKind kind) {
    const nlohmann::json& refs = references();
    const nlohmann::json& r = refs["kinds"][name];
    const auto tokenizer = Tokenizer::open(find_tokenizer_files(kind, model(r["folder"]), r["context"]));
    const auto& strings = refs["strings"];
    int same = 0, shown = 0;
    for (size_t i = 0; i < strings.size(); ++i) {
      const std::string s = strings[i];
      const std::vector<int32_t> want = r["ids"][i];
      const Tokens got = tokenizer->encode(s);
      if (got.ids == want) {
        ++same;
        continue;
      }
      if (shown++ < 5)
        ADD_FAILURE() << name << ": string " << i << " " << nlohmann::json(u32_to_utf8(utf8_to_u32(s).substr(0, 200))).dump()
                      << "\n  reference "
                      << nlohmann::json(want).dump() << "\n  ours      " << nlohmann::json(got.ids).dump();
    }
    EXPECT_EQ(same, int(strings.size())) << name;
    std::printf("%s (%s): %d of %zu strings token for token (%d drawn strings left out as mojibake)\n", name.c_str(),
                tokenizer_kind_name(kind), same, strings.size(), refs["excluded"].get<int>());
  }
};

TEST_F(Tokenizers, OpenClipBpeLikeOpenClip) { expect_like_reference("openclip_bpe", TokenizerKind::OpenClipBpe); }
TEST_F(Tokenizers, OpenClipBpeFromMergesTxtLikeOpenClip) {
  expect_like_reference("openclip_merges", TokenizerKind::OpenClipBpe);
}
TEST_F(Tokenizers, HfClipLikeClipTokenizerFast) { expect_like_reference("hf_clip", TokenizerKind::HfClipBpe); }
TEST_F(Tokenizers, HfClipFromTokenizerJsonLikeClipTokenizerFast) {
  expect_like_reference("hf_clip_json", TokenizerKind::HfClipBpe);
}
TEST_F(Tokenizers, SiglipT5LikeOpenClipsHfTokenizer) {
  expect_like_reference("siglip_t5", TokenizerKind::OpenClipSentencePiece);
}
TEST_F(Tokenizers, SiglipGemmaLikeOpenClipsHfTokenizer) {
  expect_like_reference("siglip_gemma", TokenizerKind::OpenClipSentencePiece);
}
TEST_F(Tokenizers, HfSiglipLikeSiglipTokenizer) {
  expect_like_reference("hf_siglip", TokenizerKind::HfSiglipSentencePiece);
}

// Over-length text is cut as the reference cuts it, and said; the sequence ends with its end token either way.
TEST_F(Tokenizers, OverLengthIsCutKeepingTheEndToken) {
  const auto clip = Tokenizer::open(find_tokenizer_files(TokenizerKind::OpenClipBpe, model("tok_openclip_bpe"), 77));
  const Tokens t = clip->encode(std::string(100000, 'a').replace(0, 0, "a photo of "));
  EXPECT_TRUE(t.truncated);
  EXPECT_EQ(t.length, 77);
  EXPECT_EQ(t.ids.back(), 49407);
  const Tokens short_one = clip->encode("a photo of a dog");
  EXPECT_FALSE(short_one.truncated);
  EXPECT_EQ(short_one.ids[size_t(short_one.length - 1)], 49407);
  const Tokens empty = clip->encode("");
  EXPECT_EQ(empty.length, 2);
  EXPECT_EQ(std::vector<int32_t>(empty.ids.begin(), empty.ids.begin() + 3), (std::vector<int32_t>{49406, 49407, 0}));
  const auto t5 = Tokenizer::open(find_tokenizer_files(TokenizerKind::OpenClipSentencePiece, model("tok_siglip_t5"), 64));
  std::string words;
  for (int i = 0; i < 200; ++i) words += "a photo of a dog ";
  const Tokens s = t5->encode(words);
  EXPECT_TRUE(s.truncated);
  EXPECT_EQ(s.length, 64);
  EXPECT_EQ(s.ids.back(), 1);  // </s>
}

// A folder whose tokenizer cannot be run is refused at once, naming the file it lacks.
TEST_F(Tokenizers, MissingFilesAreNamed) {
  expect_error([] { find_tokenizer_files(TokenizerKind::OpenClipSentencePiece, model("tok_json_only"), 64); },
               "holds tokenizer.json but not spiece.model, the SentencePiece model its tokenizer is run from");
  expect_error([] { find_tokenizer_files(TokenizerKind::HfSiglipSentencePiece, model("tok_json_only"), 64); },
               "holds tokenizer.json but not spiece.model");
  // SigLIP 2's folder (tokenizer_class GemmaTokenizer) without its tokenizer.model.
  TempDir gemma;
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"})
    write_file(gemma.file(f), read_file(model("tok_siglip_gemma") + "/" + f));
  expect_error([&] { find_tokenizer_files(TokenizerKind::OpenClipSentencePiece, gemma.path(), 64); },
               gemma.path() + ": holds tokenizer.json but not tokenizer.model, the SentencePiece model its tokenizer is run from");
  TempDir empty;
  expect_error([&] { find_tokenizer_files(TokenizerKind::OpenClipBpe, empty.path(), 77); },
               "has no bpe_simple_vocab_16e6.txt.gz");
  expect_error([&] { find_tokenizer_files(TokenizerKind::HfClipBpe, empty.path(), 77); },
               "neither vocab.json with merges.txt nor tokenizer.json");
  expect_error([&] { find_tokenizer_files(TokenizerKind::HfSiglipSentencePiece, empty.path(), 64); }, "has no spiece.model");
}

}  // namespace
}  // namespace vit::test

// The tokenizers token for token against the reference tokenizer of each checkpoint layout, on a few thousand strings
// (ASCII, accents, CJK, emoji, HTML entities, mixed case, repeated punctuation, full-width forms, controls and
// whitespace, over-length; no mojibake): open_clip's SimpleTokenizer (its vocabulary as bpe_simple_vocab_16e6.txt.gz
// and as merges.txt), transformers' CLIPTokenizerFast (vocab.json and merges.txt, and tokenizer.json), open_clip's
// HFTokenizer over a T5 and a Gemma SentencePiece model, transformers' SiglipTokenizer (tests/make_text_models.py);
// and the cleaning's parts against Python's own answers, bad text and bad tokenizer files named.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/text/clean.h"
#include "engine/text/html.h"
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
  TempDir empty;
  expect_error([&] { find_tokenizer_files(TokenizerKind::OpenClipBpe, empty.path(), 77); },
               "has no bpe_simple_vocab_16e6.txt.gz");
  expect_error([&] { find_tokenizer_files(TokenizerKind::HfClipBpe, empty.path(), 77); },
               "neither vocab.json with merges.txt nor tokenizer.json");
  expect_error([&] { find_tokenizer_files(TokenizerKind::HfSiglipSentencePiece, empty.path(), 64); }, "has no spiece.model");
}

}  // namespace

// What Python's html.unescape, ftfy and str.lower answer (checked by hand against Python 3.11 and ftfy 6.3).
TEST(TextCleaning, HtmlUnescapeAsPython) {
  const auto u = [](const std::string& s) { return u32_to_utf8(html_unescape(utf8_to_u32(s))); };
  EXPECT_EQ(u("&amp;amp; &lt;b&gt; &quot;"), "&amp; <b> \"");
  EXPECT_EQ(u("&notin &notit; &amp"), "\xc2\xacin \xc2\xacit; &");  // the longest known prefix, legacy names
  EXPECT_EQ(u("&#x80; &#0; &#xD800; &#1; &#65 &#x110000;"), "\xe2\x82\xac \xef\xbf\xbd \xef\xbf\xbd  A \xef\xbf\xbd");
  EXPECT_EQ(u("&bogus; & &# &#x;"), "&bogus; & &# &#x;");
  const auto f = [](const std::string& s) { return u32_to_utf8(ftfy_unescape_html(utf8_to_u32(s))); };
  EXPECT_EQ(f("&amp &amp; &NTILDE; &EACUTE; &#x2019; &#65"), "&amp & \xc3\x91 \xc3\x89 \xe2\x80\x99 &#65");
}

TEST(TextCleaning, FixTextAsFtfy) {
  const auto fix = [](const std::string& s) { return u32_to_utf8(ftfy_fix_text(utf8_to_u32(s))); };
  EXPECT_EQ(fix("\xef\xac\x81ne \xe2\x80\x9cquoted\xe2\x80\x9d \xef\xbc\xac\xef\xbc\xaf\xe3\x80\x80x"), "fine \"quoted\" LO x");
  EXPECT_EQ(fix("a\r\nb\rc\xe2\x80\xa8""d"), "a\nb\nc\nd");
  EXPECT_EQ(fix("\x1b[31mred\x1b[0m\x07"), "red");
  EXPECT_EQ(fix("e\xcc\x81"), "\xc3\xa9");                       // NFC
  EXPECT_EQ(fix("&lt;b&gt; <i>"), "&lt;b&gt; <i>");               // '<' in the line: entities left alone
  EXPECT_EQ(fix("\xc2\x9c"), "\xc5\x93");                         // C1 control as Windows-1252
  const auto lower_all = [](const std::string& s) { return u32_to_utf8(lower(utf8_to_u32(s))); };
  EXPECT_EQ(lower_all("\xce\xa3\xce\x91\xce\xa3"), "\xcf\x83\xce\xb1\xcf\x82");  // ΣΑΣ: the final sigma
  EXPECT_EQ(u32_to_utf8(lower_each(utf8_to_u32("\xce\xa3\xce\x91\xce\xa3"))), "\xcf\x83\xce\xb1\xcf\x83");
}

TEST(TextCleaning, InvalidUtf8IsNamed) {
  expect_error([] { utf8_to_u32("ok \xff"); }, "not valid UTF-8: byte 3 (0xff)");
  expect_error([] { utf8_to_u32("\xed\xa0\x80"); }, "not valid UTF-8: byte 0");  // a surrogate
  expect_error([] { utf8_to_u32("\xc0\xaf"); }, "not valid UTF-8: byte 0");      // overlong
  EXPECT_EQ(utf8_to_u32(std::string("a\0b", 3)).size(), 3u);                 // NUL is a character
}

TEST(TextCleaning, CorruptTokenizerFilesAreNamed) {
  TempDir d;
  write_file(d.file("spiece.model"), "not a model");
  TokenizerSpec spec;
  spec.kind = TokenizerKind::HfSiglipSentencePiece;
  spec.model = d.file("spiece.model");
  spec.context = 64;
  expect_error([&] { Tokenizer::open(spec); }, d.file("spiece.model") + ": not a SentencePiece model");
  write_file(d.file("bpe_simple_vocab_16e6.txt.gz"), "not gzip");
  expect_error([&] { Tokenizer::open(find_tokenizer_files(TokenizerKind::OpenClipBpe, d.path(), 77)); },
               "not a gzip file");
  write_file(d.file("tokenizer.json"), "{\"model\": {\"type\": \"Unigram\"}}");
  expect_error([&] { Tokenizer::open(find_tokenizer_files(TokenizerKind::HfClipBpe, d.path(), 77)); },
               "tokenizer.json: not a BPE tokenizer");
  write_file(d.file("tokenizer.json"), "{not json");
  expect_error([&] { Tokenizer::open(find_tokenizer_files(TokenizerKind::HfClipBpe, d.path(), 77)); }, "invalid JSON");
}

}  // namespace vit::test

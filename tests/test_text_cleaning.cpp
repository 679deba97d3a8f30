// The text cleaning's parts against the answers of Python's html.unescape, ftfy and str.lower, and CLIP's BPE on a
// small merges file of its own: its pattern, and the two orders of merging (tests/test_tokenizers.cpp checks whole
// tokenizers against their libraries); text that is not UTF-8 and tokenizer files that are not what their names
// say, refused naming the byte or the file. No Python needed: label unit.
#include <gtest/gtest.h>

#include "engine/text/bpe.h"
#include "engine/text/clean.h"
#include "engine/text/html.h"
#include "engine/text/tokenizer.h"
#include "engine/text/unicode.h"
#include "test_util.h"

namespace vit::test {

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

// open_clip's bpe() merges every occurrence of the lowest-ranked pair, then looks again; Hugging Face tokenizers
// merges one (rank, position) pair at a time, a pair it has just made going first when it ranks lower. Merges
// ranked "aa a" before "a a" tell them apart on "aaaab": [aa, aa, b</w>] against [aaa, a, b</w>], as each library
// answers on these merges.
TEST(TextCleaning, ClipBpeMergesInEachLibrarysOrder) {
  TempDir d;
  write_file(d.file("merges.txt"), "#version: 0.2\naa a\na a\n");
  const ClipBpe bpe = ClipBpe::from_merges(d.file("merges.txt"), {"<start_of_text>", "<end_of_text>"});
  EXPECT_EQ(bpe.size(), 512 + 2 + 2);
  std::vector<int32_t> batch, single;
  bpe.encode_piece("aaaab", ClipBpe::Order::Batch, &batch);
  bpe.encode_piece("aaaab", ClipBpe::Order::Single, &single);
  EXPECT_EQ(batch, (std::vector<int32_t>{bpe.id("aa"), bpe.id("aa"), bpe.id("b</w>")}));
  EXPECT_EQ(single, (std::vector<int32_t>{bpe.id("aaa"), bpe.id("a"), bpe.id("b</w>")}));
  std::vector<int32_t> word;
  bpe.encode_piece("aa", ClipBpe::Order::Batch, &word);  // "a a</w>" is not "a a": no merge
  EXPECT_EQ(word, (std::vector<int32_t>{bpe.id("a"), bpe.id("a</w>")}));
  expect_error([&] { bpe.id("zz"); }, "the vocabulary has no token \"zz\"");
  write_file(d.file("bad.txt"), "#version: 0.2\naa\n");
  expect_error([&] { ClipBpe::from_merges(d.file("bad.txt"), {}); }, "line 2 is not a merge of two symbols: aa");
}

// CLIP's pattern: contractions, letters, single digits, runs of the rest; whitespace dropped; the special tokens
// whole. open_clip matches the contractions ignoring case; tokenizers' pattern does not.
TEST(TextCleaning, ClipPatternSplitsAsTheReferences) {
  const auto split = [](const std::string& s, bool ignore_case) {
    std::vector<std::string> out;
    for (const ClipPiece& p : clip_pieces(utf8_to_u32(s), {U"<|endoftext|>"}, ignore_case, false))
      out.push_back(u32_to_utf8(p.text) + (p.special >= 0 ? "*" : ""));
    return out;
  };
  EXPECT_EQ(split("It's 42 caf\xc3\xa9s!!  ok<|endoftext|>x", true),
            (std::vector<std::string>{"It", "'s", "4", "2", "caf\xc3\xa9s", "!!", "ok", "<|endoftext|>*", "x"}));
  EXPECT_EQ(split("DOG'S", true), (std::vector<std::string>{"DOG", "'S"}));
  EXPECT_EQ(split("DOG'S", false), (std::vector<std::string>{"DOG", "'", "S"}));
}

TEST(TextCleaning, InvalidUtf8IsNamed) {
  expect_error([] { utf8_to_u32("ok \xff"); }, "not valid UTF-8: byte 3 (0xff)");
  expect_error([] { utf8_to_u32("\xed\xa0\x80"); }, "not valid UTF-8: byte 0");  // a surrogate
  expect_error([] { utf8_to_u32("\xc0\xaf"); }, "not valid UTF-8: byte 0");      // overlong
  expect_error([] { utf8_to_u32("ab\xe2\x82"); }, "not valid UTF-8: byte 2 (0xe2) starts no valid character");  // cut short
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

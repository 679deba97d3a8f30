// The tokenizers of tokenizer.h: the sequence, its cut and its padding here, once for all; the CLIP BPE ones here
// (open_clip's tokenizer.py SimpleTokenizer; transformers' CLIPTokenizerFast as convert_slow_tokenizer.py's
// CLIPConverter builds it); the SentencePiece ones in sentencepiece.cpp.
#include "engine/text/tokenizer.h"

#include "engine/text/bpe.h"
#include "engine/text/clean.h"
#include "engine/text/unicode.h"
#include "vit/error.h"

namespace vit {

std::unique_ptr<Tokenizer> open_sentencepiece(const TokenizerSpec& spec);  // sentencepiece.cpp

namespace {

// open_clip's SimpleTokenizer(clean='lower'): encode() of whitespace_clean(basic_clean(text)).lower(), its
// pattern case-insensitive; the special tokens written in the text are those tokens (its cache holds them).
class OpenClipBpeTokenizer : public Tokenizer {
 public:
  explicit OpenClipBpeTokenizer(const TokenizerSpec& s)
      : Tokenizer(s), bpe_(ClipBpe::from_merges(s.model, {"<start_of_text>", "<end_of_text>"})) {
    bos_id_ = bpe_.id("<start_of_text>");
    eos_id_ = bpe_.id("<end_of_text>");
    pad_id_ = 0;
    vocab_size_ = bpe_.size();
  }

 private:
  std::vector<int32_t> tokens(const std::u32string& text) const override {
    static const std::vector<std::u32string> specials = {U"<start_of_text>", U"<end_of_text>"};
    std::vector<int32_t> ids;
    for (const ClipPiece& p : clip_pieces(lower(collapse_spaces(openclip_basic_clean(text))), specials, true, false)) {
      // A special token matched without regard to case is that token only when written as it is (bpe()'s cache).
      if (p.special >= 0 && p.text == specials[size_t(p.special)])
        ids.push_back(p.special == 0 ? bos_id_ : eos_id_);
      else
        bpe_.encode_piece(u32_to_utf8(p.text), ClipBpe::Order::Batch, &ids);
    }
    return ids;
  }
  ClipBpe bpe_;
};

// transformers' CLIPTokenizerFast: the normalizer (NFC, Replace(\s+, " "), Lowercase), the added tokens split out
// of the normalized text (or of the raw text before it, for added tokens not "normalized"), the pre-tokenizer
// (CLIP's pattern, case-sensitive, then ByteLevel, which splits those pieces no further) and the BPE, its merges in
// tokenizers' order.
class HfClipBpeTokenizer : public Tokenizer {
 public:
  explicit HfClipBpeTokenizer(const TokenizerSpec& s)
      : Tokenizer(s), bpe_(s.vocab.empty() ? ClipBpe::from_tokenizer_json(s.model) : ClipBpe::from_vocab(s.vocab, s.model)) {
    bos_id_ = bpe_.id("<|startoftext|>");
    eos_id_ = bpe_.id("<|endoftext|>");
    pad_id_ = bpe_.id(s.bpe_pad);
    vocab_size_ = bpe_.size();
  }

 private:
  std::vector<int32_t> tokens(const std::u32string& text) const override {
    static const std::vector<std::u32string> specials = {U"<|startoftext|>", U"<|endoftext|>"};
    std::vector<int32_t> ids;
    const bool normalized = spec_.specials_normalized;
    for (const auto& [piece, special] : split_special_tokens(normalized ? normalize(text) : text, specials)) {
      if (special >= 0) {
        ids.push_back(special == 0 ? bos_id_ : eos_id_);
        continue;
      }
      for (const ClipPiece& p : clip_pieces(normalized ? piece : normalize(piece), {}, false, true))
        bpe_.encode_piece(u32_to_utf8(p.text), ClipBpe::Order::Single, &ids);
    }
    return ids;
  }
  static std::u32string normalize(const std::u32string& text) {
    std::u32string out;  // each run of \s as one space
    bool in_run = false;
    for (const char32_t c : vit::normalize(text, NormalForm::NFC)) {
      const bool space = is_onig_space(c);
      if (!space || !in_run) out.push_back(space ? U' ' : c);
      in_run = space;
    }
    return lower_each(out);
  }
  ClipBpe bpe_;
};

}  // namespace

const char* tokenizer_kind_name(TokenizerKind k) {
  switch (k) {
    case TokenizerKind::OpenClipBpe: return "open_clip's CLIP BPE";
    case TokenizerKind::HfClipBpe: return "Hugging Face CLIPTokenizerFast";
    case TokenizerKind::OpenClipSentencePiece: return "open_clip's SentencePiece (canonicalized)";
    case TokenizerKind::HfSiglipSentencePiece: return "Hugging Face SiglipTokenizer";
  }
  return "?";
}

std::unique_ptr<Tokenizer> Tokenizer::open(const TokenizerSpec& spec) {
  std::unique_ptr<Tokenizer> t;
  switch (spec.kind) {
    case TokenizerKind::OpenClipBpe: t = std::make_unique<OpenClipBpeTokenizer>(spec); break;
    case TokenizerKind::HfClipBpe: t = std::make_unique<HfClipBpeTokenizer>(spec); break;
    case TokenizerKind::OpenClipSentencePiece:
    case TokenizerKind::HfSiglipSentencePiece: t = open_sentencepiece(spec); break;
  }
  const int64_t specials = (t->bos_id_ >= 0) + (t->eos_id_ >= 0);
  if (spec.context <= specials || spec.context > 1 << 20)
    throw Error(spec.model, "a context of " + std::to_string(spec.context) + " tokens cannot hold a text");
  return t;
}

Tokens Tokenizer::encode(const std::string& text) const {
  std::vector<int32_t> body = tokens(utf8_to_u32(text));
  const size_t room = size_t(spec_.context - (bos_id_ >= 0) - (eos_id_ >= 0));
  Tokens t;
  if (body.size() > room) {  // truncation='longest_first' and open_clip's tokens[:context]: the end kept
    body.resize(room);
    t.truncated = true;
  }
  t.ids.reserve(size_t(spec_.context));
  if (bos_id_ >= 0) t.ids.push_back(bos_id_);
  t.ids.insert(t.ids.end(), body.begin(), body.end());
  if (eos_id_ >= 0 && !(eos_if_absent_ && !body.empty() && body.back() == eos_id_)) t.ids.push_back(eos_id_);
  t.length = int64_t(t.ids.size());
  t.ids.resize(size_t(spec_.context), pad_id_);
  return t;
}

}  // namespace vit

// Text to token ids, token for token as the reference tokenizer of a checkpoint's layout makes them:
// open_clip's CLIP tokenizer (SimpleTokenizer), transformers' CLIPTokenizerFast, open_clip's HFTokenizer over a
// SentencePiece model with clean='canonicalize' (SigLIP's T5 kind, unigram; SigLIP 2's Gemma kind, BPE with byte
// fallback), and transformers' SiglipTokenizer. SentencePiece models run in the SentencePiece library; Unicode
// comes from ICU (unicode.h). Which tokenizer a model takes is the models floor's to say (TokenizerSpec).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace vit {

enum class TokenizerKind {
  // open_clip's SimpleTokenizer: ftfy.fix_text, html.unescape twice, whitespace collapsed, lower case; CLIP's
  // byte-level BPE (its merges: bpe_simple_vocab_16e6.txt.gz, or the same merges as a merges.txt); start and
  // end-of-text tokens; cut to the context keeping the end-of-text token; padded with 0.
  OpenClipBpe,
  // transformers' CLIPTokenizerFast (tokenizers' pipeline, no ftfy): the special tokens split out, NFC, whitespace
  // runs as one space, lower case character by character, CLIP's pre-tokenizer and BPE (vocab.json and
  // merges.txt, or tokenizer.json); cut as open_clip's; padded with the pad token.
  HfClipBpe,
  // open_clip's HFTokenizer with clean='canonicalize' over a SentencePiece model (the hub's timm/ViT-*-SigLIP*
  // folders): basic_clean and canonicalize_text, then the model (no dummy prefix unless tokenizer.json's Metaspace
  // asks for one), the end-of-sequence token (a beginning one where tokenizer_config.json asks), cut keeping it,
  // padded with the pad token.
  OpenClipSentencePiece,
  // transformers' SiglipTokenizer (spiece.model, no dummy prefix): lower case character by character (do_lower_case),
  // its special tokens split out, each piece's ASCII punctuation removed and whitespace collapsed, then the model;
  // '</s>' appended unless the pieces end with it; cut and padded as the others.
  HfSiglipSentencePiece,
};
const char* tokenizer_kind_name(TokenizerKind k);  // "open_clip's CLIP BPE", ...

// What a tokenizer is made from; models/text_config.cpp fills one from a model's folder.
struct TokenizerSpec {
  TokenizerKind kind = TokenizerKind::OpenClipBpe;
  std::string model;   // BPE: bpe_simple_vocab_16e6.txt.gz, merges.txt or tokenizer.json; SentencePiece: its .model
  std::string vocab;   // HfClipBpe with merges.txt: vocab.json
  int64_t context = 77;
  // SentencePiece kinds:
  // OpenClipSentencePiece: what the fast tokenizer does around the model, from tokenizer.json (its normalizer and
  // pre-tokenizer) or, without one, as transformers converts the model: the normalizer's steps in order, then
  // Metaspace's spaces as '▁' (and one before the text when it prepends). The model then only segments.
  struct TextStep {
    enum Kind { Charsmap, StripLeft, StripRight, Replace } kind;
    std::u32string from;  // Replace: this text (repeat 0), or runs of at least `repeat` of its one character
    int repeat = 0;
    std::u32string to;
  };
  std::vector<TextStep> normalizer;
  bool metaspace = false, prepend = false;
  bool add_bos = false, add_eos = true;
  std::string bos = "<s>", eos = "</s>", pad = "</s>", unk = "<unk>";
  bool lower = true;  // HfSiglipSentencePiece: do_lower_case
  // BPE kinds: the pad token (HfClipBpe; open_clip pads with 0); whether the special tokens are found in the
  // normalized text (tokenizer.json's added tokens "normalized": true) rather than the raw one.
  std::string bpe_pad = "<|endoftext|>";
  bool specials_normalized = true;
};

// One text's tokens: its sequence, then padding, `context` ids in all.
struct Tokens {
  std::vector<int32_t> ids;
  int64_t length = 0;      // the sequence's ids before the padding (start and end tokens included)
  bool truncated = false;  // the text had more tokens than the context holds, and was cut as the reference cuts
};

// The spec of a tokenizer of `kind` from the files a folder holds, found as the reference finds them there:
// OpenClipBpe: bpe_simple_vocab_16e6.txt.gz (open_clip's package ships it), else merges.txt (the same merges, as
// OpenCLIP's hub folders hold them); HfClipBpe: vocab.json with merges.txt, else tokenizer.json; the SentencePiece
// kinds: spiece.model (T5's and SigLIP's) or tokenizer.model (Gemma's), as tokenizer_config.json's tokenizer_class
// says, its special tokens from special_tokens_map.json and tokenizer_config.json, the dummy prefix from
// tokenizer.json's pre-tokenizer. A missing file is an Error naming it (a folder with only tokenizer.json where a
// SentencePiece model is needed among them). context: the model's.
TokenizerSpec find_tokenizer_files(TokenizerKind kind, const std::string& folder, int64_t context);

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Reads the files the spec names; throws an Error naming the file that is missing or cannot be read.
  static std::unique_ptr<Tokenizer> open(const TokenizerSpec& spec);

  // text: UTF-8 (an Error naming the first invalid byte otherwise). Safe to call from several threads.
  Tokens encode(const std::string& text) const;
  const TokenizerSpec& spec() const { return spec_; }
  int64_t context() const { return spec_.context; }
  int64_t vocab_size() const { return vocab_size_; }

 protected:
  explicit Tokenizer(const TokenizerSpec& spec) : spec_(spec) {}
  // The text's tokens without the start and end tokens, and those around them (ids, or -1 for none).
  virtual std::vector<int32_t> tokens(const std::u32string& text) const = 0;
  TokenizerSpec spec_;
  int32_t bos_id_ = -1, eos_id_ = -1, pad_id_ = 0;
  // Whether the end token is left out when the sequence already ends with it (SiglipTokenizer's
  // _add_eos_if_not_present).
  bool eos_if_absent_ = false;
  int64_t vocab_size_ = 0;
};

}  // namespace vit

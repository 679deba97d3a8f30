// tokenizer.h's SentencePiece kinds on the SentencePiece library (Debian's libsentencepiece, in the plugin
// libvit_sentencepiece.so: sentencepiece_plugin.h): open_clip's
// HFTokenizer with clean='canonicalize' (tokenizer.py) over the fast T5 or Gemma tokenizer its hub folders hold,
// and transformers' SiglipTokenizer (models/siglip/tokenization_siglip.py, with PreTrainedTokenizer.tokenize).
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>

#include "engine/image/opencv_io.h"
#include "engine/io/files.h"
#include "engine/text/clean.h"
#include "engine/text/sentencepiece_plugin.h"
#include "engine/text/tokenizer.h"
#include "engine/text/unicode.h"
#include "vit/error.h"

namespace vit {

std::unique_ptr<SentencePieceProcessor> new_sentencepiece_processor(const std::string& who) {
  static std::once_flag once;
  static decltype(&vit_sentencepiece_new) entry = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    // Its own protobuf first for the library and its plugin (RTLD_DEEPBIND), which AddressSanitizer's runtime
    // refuses: a sanitizer build's programs without another protobuf (all but vit, which links gRPC's) still run.
#if defined(__SANITIZE_ADDRESS__)
    const int flags = RTLD_NOW | RTLD_LOCAL;
#else
    const int flags = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
#endif
    for (const std::string& dir : plugin_dirs()) {
      const std::string path = dir + "/libvit_sentencepiece.so";
      if (::access(path.c_str(), F_OK) != 0) continue;
      void* h = ::dlopen(path.c_str(), flags);
      if (!h) {
        failure = ::dlerror();
        continue;
      }
      entry = reinterpret_cast<decltype(entry)>(::dlsym(h, "vit_sentencepiece_new"));
      if (entry) return;
      failure = path + " is not this build's plugin (rebuild it)";
    }
  });
  SentencePieceProcessor* p = entry ? entry(kSentencePieceAbi) : nullptr;
  if (!p) {
    std::string dirs;
    for (const std::string& d : plugin_dirs()) dirs += (dirs.empty() ? "" : ", ") + d;
    throw Error(who, "a SentencePiece model needs the engine's plugin libvit_sentencepiece.so, which " +
                         (failure.empty() ? "is not installed (looked in " + dirs + ")" : "could not be loaded: " + failure));
  }
  return std::unique_ptr<SentencePieceProcessor>(p);
}

namespace {

constexpr uint64_t kMaxModelBytes = 1ull << 30;
constexpr char32_t kUnderline = 0x2581;  // SentencePiece's '▁'

// NormalizerSpec's fields (sentencepiece_model.proto): name 1, precompiled_charsmap 2, add_dummy_prefix 3,
// remove_extra_whitespaces 4, escape_whitespaces 5. A NormalizerSpec appended to a ModelProto as its field 3 is
// merged by protobuf into the one the file holds, field by field, as SiglipTokenizer's MergeFrom does.
// kNoDummyPrefix turns add_dummy_prefix off alone; normalizer_override turns it and remove_extra_whitespaces off,
// escapes whitespace as '▁' or not, and keeps the character map or empties it (the identity).
const std::string kNoDummyPrefix = {'\x1a', '\x02', '\x18', '\x00'};
std::string normalizer_override(bool charsmap, bool escape) {
  std::string spec;
  if (!charsmap) spec += std::string{'\x0a', '\x08'} + "identity" + std::string{'\x12', '\x00'};
  spec += std::string{'\x18', '\x00', '\x20', '\x00', '\x28', char(escape)};
  return std::string{'\x1a', char(spec.size())} + spec;
}

class SentencePieceTokenizer : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const TokenizerSpec& s)
      : Tokenizer(s), sp_(new_sentencepiece_processor(s.model)), charsmap_(new_sentencepiece_processor(s.model)) {
    const std::vector<uint8_t> bytes = read_file_bytes(s.model, kMaxModelBytes);
    const std::string proto(bytes.begin(), bytes.end());
    // SiglipTokenizer runs the model with add_dummy_prefix off. open_clip's HFTokenizer runs a fast tokenizer:
    // tokenizers' normalizer and pre-tokenizer (spec.normalizer, the model's character map among them), then the
    // model's segmentation alone, which the model runs here with its own normalizer turned off.
    if (s.kind == TokenizerKind::HfSiglipSentencePiece) {
      load(sp_.get(), proto + kNoDummyPrefix);
    } else {
      load(sp_.get(), proto + normalizer_override(false, true));
      load(charsmap_.get(), proto + normalizer_override(true, false));
      std::vector<std::vector<std::string>> probe;  // n-best segmentations: unigram models only
      unigram_ = sp_->NBestEncode("a", 2, &probe).ok();
      min_score_ = 0;
      for (int id = 0; id < sp_->GetPieceSize(); ++id) min_score_ = std::min(min_score_, double(sp_->GetScore(id)));
    }
    vocab_size_ = sp_->GetPieceSize();
    eos_id_ = s.add_eos ? piece_id(s.eos) : -1;
    bos_id_ = s.add_bos ? piece_id(s.bos) : -1;
    pad_id_ = piece_id(s.pad);
    if (s.kind == TokenizerKind::HfSiglipSentencePiece) {
      unk_id_ = piece_id(s.unk);
      eos_if_absent_ = true;
      std::vector<std::string> pieces;
      encode_pieces(s.unk, &pieces);
      unk_length_ = pieces.size();
    }
  }

 private:
  void load(SentencePieceProcessor* p, const std::string& proto) const {
    const auto status = p->LoadFromSerializedProto(proto);
    if (!status.ok()) throw Error(spec_.model, "not a SentencePiece model: " + status.ToString());
  }
  // A special token's id; an error when the model has no such piece.
  int32_t piece_id(const std::string& piece) const {
    const int id = sp_->PieceToId(piece);
    if (id < 0 || (sp_->IsUnknown(id) && sp_->IdToPiece(id) != piece))
      throw Error(spec_.model, "the SentencePiece model has no piece \"" + piece + "\", the tokenizer's special token");
    return id;
  }
  void encode_pieces(const std::string& text, std::vector<std::string>* pieces) const {
    const auto status = sp_->Encode(text, pieces);
    if (!status.ok()) throw Error(spec_.model, "SentencePiece cannot encode a text: " + status.ToString());
  }

  std::vector<int32_t> tokens(const std::u32string& text) const override {
    if (spec_.kind == TokenizerKind::HfSiglipSentencePiece) return siglip_tokens(text);
    const std::string s = u32_to_utf8(fast_pipeline(openclip_canonicalize(openclip_basic_clean(text))));
    std::vector<int> ids;
    if (!unigram_) {
      const auto status = sp_->Encode(s, &ids);
      if (!status.ok()) throw Error(spec_.model, "SentencePiece cannot encode a text: " + status.ToString());
      return std::vector<int32_t>(ids.begin(), ids.end());
    }
    // Word by word, as Metaspace splits them (each '▁' starts one), so that ties are broken per word.
    std::vector<int32_t> out;
    static const std::string underline = "\xe2\x96\x81";
    for (size_t start = 0; start < s.size();) {
      size_t end = s.find(underline, start + 1);
      if (end == std::string::npos) end = s.size();
      for (const std::string& p : unigram_word(s.substr(start, end - start))) out.push_back(sp_->PieceToId(p));
      start = end;
    }
    return out;
  }

  // A word's segmentation as tokenizers' Unigram makes it: the model's best, unless several score the same (a word
  // of a repeated piece, whose doubled piece is a piece too): then tokenizers' Viterbi, which keeps the first start
  // that reaches an end, gives the one whose pieces start earliest, read from the end.
  std::vector<std::string> unigram_word(const std::string& word) const {
    std::vector<std::vector<std::string>> n;
    const auto status = sp_->NBestEncode(word, 2, &n);
    if (!status.ok() || n.empty()) throw Error(spec_.model, "SentencePiece cannot encode a text: " + status.ToString());
    if (n.size() < 2 || score(n[1]) < score(n[0])) return n[0];
    sp_->NBestEncode(word, 32, &n);
    const double best = score(n[0]);
    std::vector<std::string> pick = n[0];
    for (const auto& c : n)
      if (score(c) == best && starts_earlier(c, pick)) pick = c;
    return pick;
  }
  // A segmentation's score as tokenizers sums it: left to right in double, an unknown piece min_score - 10.
  double score(const std::vector<std::string>& pieces) const {
    double s = 0;
    for (const auto& p : pieces) {
      const int id = sp_->PieceToId(p);
      s += sp_->IsUnknown(id) ? min_score_ - 10.0 : double(sp_->GetScore(id));
    }
    return s;
  }
  // Whether a's pieces start earlier than b's, compared from the last piece back.
  static bool starts_earlier(const std::vector<std::string>& a, const std::vector<std::string>& b) {
    size_t ea = 0, eb = 0;
    for (const auto& p : a) ea += p.size();
    for (const auto& p : b) eb += p.size();
    for (size_t i = a.size(), j = b.size(); i > 0 && j > 0; --i, --j) {
      ea -= a[i - 1].size();
      eb -= b[j - 1].size();
      if (ea != eb) return ea < eb;
    }
    return false;
  }

  // tokenizers' normalizer steps, then Metaspace's spaces.
  std::u32string fast_pipeline(std::u32string s) const {
    using Step = TokenizerSpec::TextStep;
    for (const Step& step : spec_.normalizer) {
      switch (step.kind) {
        case Step::Charsmap: {  // Precompiled: the model's map alone, its pieces laid end to end
          std::vector<std::string> pieces;
          const auto status = charsmap_->Encode(u32_to_utf8(s), &pieces);
          if (!status.ok()) throw Error(spec_.model, "SentencePiece cannot normalize a text: " + status.ToString());
          std::string joined;
          for (const auto& p : pieces) joined += p;
          s = utf8_to_u32(joined);
          break;
        }
        case Step::StripLeft: s.erase(0, std::find_if_not(s.begin(), s.end(), is_white_space) - s.begin()); break;
        case Step::StripRight: s.erase(std::find_if_not(s.rbegin(), s.rend(), is_white_space).base(), s.end()); break;
        case Step::Replace: s = replace(s, step); break;
      }
    }
    if (!spec_.metaspace) return s;
    for (char32_t& c : s)
      if (c == U' ') c = kUnderline;
    if (spec_.prepend && !s.empty() && s[0] != kUnderline) s.insert(s.begin(), kUnderline);
    return s;
  }

  static std::u32string replace(const std::u32string& s, const TokenizerSpec::TextStep& step) {
    std::u32string out;
    for (size_t i = 0; i < s.size();) {
      if (step.repeat == 0 && !step.from.empty() && s.compare(i, step.from.size(), step.from) == 0) {
        out += step.to;
        i += step.from.size();
        continue;
      }
      if (step.repeat > 0 && s[i] == step.from[0]) {
        size_t n = 0;
        while (i + n < s.size() && s[i + n] == step.from[0]) ++n;
        out += n >= size_t(step.repeat) ? step.to : s.substr(i, n);
        i += n;
        continue;
      }
      out.push_back(s[i++]);
    }
    return out;
  }

  std::vector<int32_t> siglip_tokens(const std::u32string& text) const;
  std::vector<std::pair<std::string, int32_t>> siglip_piece(const std::u32string& chunk) const;

  std::unique_ptr<SentencePieceProcessor> sp_;
  std::unique_ptr<SentencePieceProcessor> charsmap_;  // OpenClipSentencePiece: the model's normalizer alone
  bool unigram_ = false;
  double min_score_ = 0;
  int32_t unk_id_ = -1;
  size_t unk_length_ = 0;
};

// SiglipTokenizer._tokenize of one chunk between special tokens: canonicalize_text (ASCII punctuation removed,
// re.sub(r"\s+", " "), strip), then the model on unk_token + text, the pieces of unk_token dropped.
std::vector<std::pair<std::string, int32_t>> SentencePieceTokenizer::siglip_piece(const std::u32string& chunk) const {
  const std::u32string clean = strip(collapse_spaces(remove_ascii_punctuation(chunk)));
  std::vector<std::string> pieces;
  encode_pieces(spec_.unk + u32_to_utf8(clean), &pieces);
  std::vector<std::pair<std::string, int32_t>> out;
  for (size_t i = pieces.size() >= unk_length_ ? unk_length_ : 0; i < pieces.size(); ++i)
    out.push_back({pieces[i], sp_->PieceToId(pieces[i])});
  return out;
}

// SiglipTokenizer.tokenize: '▁' + the text ('▁' in it as spaces); PreTrainedTokenizer.tokenize: lower case one
// character at a time but in special tokens; the special tokens split out, the whitespace beside them stripped
// (their AddedTokens strip left and right); each chunk through _tokenize; a leading '▁' piece dropped when a
// special token follows it.
std::vector<int32_t> SentencePieceTokenizer::siglip_tokens(const std::u32string& text) const {
  std::u32string s = std::u32string(1, kUnderline);
  for (const char32_t c : text) s.push_back(c == kUnderline ? U' ' : c);
  const std::vector<std::u32string> specials = {utf8_to_u32(spec_.eos), utf8_to_u32(spec_.unk), utf8_to_u32(spec_.pad)};
  if (spec_.lower) {  // re.sub("(specials)|(.+?)", group 1 or group 2 lowered): line feeds and lower case alike
    std::u32string lowered;
    for (const auto& [part, k] : split_special_tokens(s, specials)) lowered += k >= 0 ? part : lower_each(part);
    s = std::move(lowered);
  }
  // Trie.split: chunks and special tokens; then the chunks beside a special token stripped towards it.
  std::vector<std::pair<std::u32string, int>> parts = split_special_tokens(s, specials);
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].second < 0) continue;
    if (i + 1 < parts.size() && parts[i + 1].second < 0) {
      std::u32string& right = parts[i + 1].first;
      size_t a = 0;
      while (a < right.size() && is_space(right[a])) ++a;
      right.erase(0, a);
    }
    if (i > 0 && parts[i - 1].second < 0) {
      std::u32string& left = parts[i - 1].first;
      while (!left.empty() && is_space(left.back())) left.pop_back();
    }
  }
  std::vector<std::pair<std::string, int32_t>> pieces;
  const int32_t special_ids[] = {piece_id(spec_.eos), unk_id_, pad_id_};
  for (const auto& [chunk, k] : parts) {
    if (chunk.empty()) continue;
    if (k >= 0) {
      pieces.push_back({u32_to_utf8(specials[size_t(k)]), special_ids[k]});
      continue;
    }
    const auto p = siglip_piece(chunk);
    pieces.insert(pieces.end(), p.begin(), p.end());
  }
  if (pieces.size() > 1 && pieces[0].first == u32_to_utf8(std::u32string(1, kUnderline))) {
    const std::string& next = pieces[1].first;
    if (next == spec_.eos || next == spec_.unk || next == spec_.pad) pieces.erase(pieces.begin());
  }
  std::vector<int32_t> ids;
  for (const auto& p : pieces) ids.push_back(p.second);
  return ids;
}

}  // namespace

std::unique_ptr<Tokenizer> open_sentencepiece(const TokenizerSpec& spec) {
  return std::unique_ptr<Tokenizer>(new SentencePieceTokenizer(spec));
}

}  // namespace vit

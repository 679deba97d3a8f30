// CLIP's byte-level BPE (tokenizer.h's OpenClipBpe and HfClipBpe): a vocabulary and its ranked merges read from
// open_clip's bpe_simple_vocab_16e6.txt.gz, a merges.txt with or without vocab.json, or a tokenizer.json; a
// text's pieces by CLIP's pattern, each piece's UTF-8 bytes as the byte-level alphabet, merged.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace vit {

class ClipBpe {
 public:
  // How a word's merges are ordered. Batch: open_clip's bpe() (and transformers' slow CLIPTokenizer) merges
  // every occurrence of the lowest-ranked pair present, left to right, then looks again; Single: Hugging Face
  // tokenizers' BPE merges the lowest (rank, position) pair one at a time, a new pair ranked lower going first.
  enum class Order { Batch, Single };

  // open_clip's vocabulary: the 256 byte symbols, the same with "</w>", each merge joined, then `specials`.
  // merges_file: .gz (open_clip's) or a merges.txt; both a first line to skip, then the merges, of which CLIP
  // takes 48,894.
  static ClipBpe from_merges(const std::string& merges_file, const std::vector<std::string>& specials);
  // Hugging Face's files: vocab.json and merges.txt, or tokenizer.json (its model's vocab and merges).
  static ClipBpe from_vocab(const std::string& vocab_json, const std::string& merges_txt);
  static ClipBpe from_tokenizer_json(const std::string& path);

  // The id of a vocabulary entry; throws naming `file` when there is none.
  int32_t id(const std::string& token) const;
  int64_t size() const { return int64_t(vocab_.size()); }
  // A piece's UTF-8 bytes as symbols, the last with "</w>", merged in `order`; their ids appended to out.
  void encode_piece(const std::string& bytes, Order order, std::vector<int32_t>* out) const;

 private:
  ClipBpe() = default;
  void set_merges(const std::vector<std::pair<std::string, std::string>>& merges);
  struct Merge {
    int32_t rank, merged;
  };
  std::string file_;
  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id)
  int32_t byte_id_[256][2] = {};                // each byte's symbol, alone and with "</w>"
};

// CLIP's pattern split of text: '<special>' (the given tokens) | 's|'t|'re|'ve|'m|'ll|'d | \p{L}+ | \p{N} |
// [^\s\p{L}\p{N}]+, the rest (whitespace) dropped. ignore_case: open_clip's re.IGNORECASE (simple case folding);
// onig_space: \s as Oniguruma has it (tokenizers'), else as Python's regex module. Each piece's special index
// (or -1) beside it.
struct ClipPiece {
  std::u32string text;
  int special = -1;
};
std::vector<ClipPiece> clip_pieces(const std::u32string& text, const std::vector<std::u32string>& specials,
                                   bool ignore_case, bool onig_space);

}  // namespace vit

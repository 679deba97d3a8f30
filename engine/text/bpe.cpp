// CLIP's BPE (bpe.h), after open_clip's tokenizer.py (bytes_to_unicode, bpe, the pattern) and Hugging Face
// tokenizers' BPE (word.rs merge_all) for the order of merges.
#include "engine/text/bpe.h"

#include <zlib.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <queue>

#include "engine/io/files.h"
#include "engine/io/json_file.h"
#include "engine/text/unicode.h"
#include "vit/error.h"

namespace vit {
namespace {

constexpr int kClipMerges = 49152 - 256 - 2;  // open_clip's merges[1:49152-256-2+1]
constexpr uint64_t kMaxVocabBytes = 64ull << 20;

// open_clip's bytes_to_unicode: the printable Latin-1 bytes stand for themselves, the others for U+0100 on.
const std::vector<std::string>& byte_symbols() {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> t(256);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      t[size_t(b)] = u32_to_utf8(std::u32string(1, char32_t(printable ? b : 256 + n++)));
    }
    return t;
  }();
  return table;
}

// Their order in open_clip's vocabulary: the printable bytes first, then the others.
std::vector<int> byte_order() {
  std::vector<int> order;
  for (const bool printable : {true, false})
    for (int b = 0; b < 256; ++b)
      if (((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) == printable) order.push_back(b);
  return order;
}

std::string read_text(const std::string& path) {
  const std::vector<uint8_t> bytes = read_file_bytes(path, kMaxVocabBytes);
  return std::string(bytes.begin(), bytes.end());
}

std::string gunzip(const std::string& path) {
  const std::string packed = read_text(path);
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw Error(path, "cannot start zlib");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(packed.data()));
  z.avail_in = uInt(packed.size());
  std::string out;
  char buf[1 << 16];
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
    if (out.size() > kMaxVocabBytes) rc = Z_MEM_ERROR;
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END) throw Error(path, "not a gzip file open_clip's vocabulary could be (zlib: " + std::to_string(rc) + ")");
  return out;
}

// Lines [1, 1 + kClipMerges) of the text, each "left right".
std::vector<std::pair<std::string, std::string>> parse_merges(const std::string& text, const std::string& path) {
  std::vector<std::pair<std::string, std::string>> merges;
  size_t pos = text.find('\n');
  for (int line = 1; pos != std::string::npos && line <= kClipMerges; ++line) {
    const size_t start = pos + 1;
    pos = text.find('\n', start);
    const std::string s = text.substr(start, pos == std::string::npos ? std::string::npos : pos - start);
    if (s.empty() && pos == std::string::npos) break;
    const size_t space = s.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 >= s.size() || s.find(' ', space + 1) != std::string::npos)
      throw Error(path, "line " + std::to_string(line + 1) + " is not a merge of two symbols: " + s.substr(0, 80));
    merges.push_back({s.substr(0, space), s.substr(space + 1)});
  }
  if (merges.empty()) throw Error(path, "holds no merges");
  return merges;
}


std::unordered_map<std::string, int32_t> vocab_from_json(const nlohmann::json& v, const std::string& path) {
  if (!v.is_object()) throw Error(path, "the vocabulary is not a JSON object of tokens and ids");
  std::unordered_map<std::string, int32_t> vocab;
  for (const auto& [token, id] : v.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      throw Error(path, "the id of token " + token + " is not a non-negative integer");
    vocab[token] = id.get<int32_t>();
  }
  return vocab;
}

}  // namespace

ClipBpe ClipBpe::from_merges(const std::string& merges_file, const std::vector<std::string>& specials) {
  ClipBpe b;
  b.file_ = merges_file;
  const bool gz = merges_file.size() > 3 && merges_file.compare(merges_file.size() - 3, 3, ".gz") == 0;
  const auto merges = parse_merges(gz ? gunzip(merges_file) : read_text(merges_file), merges_file);
  std::vector<std::string> vocab;
  for (const int byte : byte_order()) vocab.push_back(byte_symbols()[size_t(byte)]);
  for (size_t i = 0; i < 256; ++i) vocab.push_back(vocab[i] + "</w>");
  for (const auto& [l, r] : merges) vocab.push_back(l + r);
  for (const auto& s : specials) vocab.push_back(s);
  for (size_t i = 0; i < vocab.size(); ++i) b.vocab_[vocab[i]] = int32_t(i);  // a repeated entry: its last id, as dict() keeps
  b.set_merges(merges);
  return b;
}

ClipBpe ClipBpe::from_vocab(const std::string& vocab_json, const std::string& merges_txt) {
  ClipBpe b;
  b.file_ = vocab_json;
  b.vocab_ = vocab_from_json(read_json_file(vocab_json), vocab_json);
  std::string text = read_text(merges_txt);  // CLIPTokenizer: read().strip().split("\n")[1:49152-256-2+1]
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  b.set_merges(parse_merges(text, merges_txt));
  return b;
}

ClipBpe ClipBpe::from_tokenizer_json(const std::string& path) {
  const nlohmann::json t = read_json_file(path);
  const nlohmann::json& m = t.contains("model") ? t["model"] : nlohmann::json();
  if (!m.is_object() || m.value("type", "") != "BPE" || !m.contains("vocab") || !m.contains("merges"))
    throw Error(path, "not a BPE tokenizer (its model is not of type BPE with a vocab and merges)");
  if (!m["end_of_word_suffix"].is_string() || m["end_of_word_suffix"] != "</w>")
    throw Error(path, "not CLIP's BPE: its end_of_word_suffix is not \"</w>\"");
  ClipBpe b;
  b.file_ = path;
  b.vocab_ = vocab_from_json(m["vocab"], path);
  std::vector<std::pair<std::string, std::string>> merges;
  for (const auto& e : m["merges"]) {
    if (e.is_string()) {  // "left right"
      const std::string s = e;
      const size_t space = s.find(' ');
      if (space == std::string::npos) throw Error(path, "merge \"" + s + "\" is not two symbols");
      merges.push_back({s.substr(0, space), s.substr(space + 1)});
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {  // ["left", "right"]
      merges.push_back({e[0], e[1]});
    } else {
      throw Error(path, "a merge is neither \"left right\" nor [left, right]");
    }
  }
  b.set_merges(merges);
  return b;
}

void ClipBpe::set_merges(const std::vector<std::pair<std::string, std::string>>& merges) {
  const auto& symbols = byte_symbols();
  for (int byte = 0; byte < 256; ++byte) {
    byte_id_[byte][0] = id(symbols[size_t(byte)]);
    byte_id_[byte][1] = id(symbols[size_t(byte)] + "</w>");
  }
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [l, r] = merges[rank];
    const uint64_t key = uint64_t(uint32_t(id(l))) << 32 | uint32_t(id(r));
    merges_[key] = Merge{int32_t(rank), id(l + r)};  // a repeated merge: its last rank, as dict(zip(...)) keeps
  }
}

int32_t ClipBpe::id(const std::string& token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) throw Error(file_, "the vocabulary has no token \"" + token + "\"");
  return it->second;
}

void ClipBpe::encode_piece(const std::string& bytes, Order order, std::vector<int32_t>* out) const {
  // The word as a list of symbols (ids), linked so that a merge is O(1); a heap of (rank, position) pairs.
  const int n = int(bytes.size());
  if (n == 0) return;
  std::vector<int32_t> sym(static_cast<size_t>(n)), next(static_cast<size_t>(n)), prev(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    sym[size_t(i)] = byte_id_[static_cast<uint8_t>(bytes[size_t(i)])][i == n - 1];
    next[size_t(i)] = i + 1 < n ? i + 1 : -1;
    prev[size_t(i)] = i - 1;
  }
  using Entry = std::pair<int32_t, int32_t>;  // rank, position
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  const auto find = [&](int pos) -> const Merge* {
    if (pos < 0 || next[size_t(pos)] < 0) return nullptr;
    const auto it = merges_.find(uint64_t(uint32_t(sym[size_t(pos)])) << 32 | uint32_t(sym[size_t(next[size_t(pos)])]));
    return it == merges_.end() ? nullptr : &it->second;
  };
  const auto push = [&](int pos) {
    if (const Merge* m = find(pos)) heap.push({m->rank, pos});
  };
  // Merges the pair at pos if it still is the pair of that rank.
  const auto merge = [&](const Entry& e) {
    const int pos = e.second;
    if (sym[size_t(pos)] < 0) return;
    const Merge* m = find(pos);
    if (!m || m->rank != e.first) return;
    const int right = next[size_t(pos)];
    sym[size_t(pos)] = m->merged;
    sym[size_t(right)] = -1;
    next[size_t(pos)] = next[size_t(right)];
    if (next[size_t(pos)] >= 0) prev[size_t(next[size_t(pos)])] = pos;
    push(prev[size_t(pos)]);
    push(pos);
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  std::vector<Entry> batch;
  while (!heap.empty()) {
    if (order == Order::Single) {
      const Entry e = heap.top();
      heap.pop();
      merge(e);
      continue;
    }
    // Every occurrence of the lowest rank, left to right: a merge makes no pair of its own rank, so none joins.
    batch.clear();
    const int32_t rank = heap.top().first;
    while (!heap.empty() && heap.top().first == rank) {
      batch.push_back(heap.top());
      heap.pop();
    }
    for (const Entry& e : batch) merge(e);
  }
  for (int i = 0; i >= 0; i = next[size_t(i)]) out->push_back(sym[size_t(i)]);
}

std::vector<ClipPiece> clip_pieces(const std::u32string& text, const std::vector<std::u32string>& specials,
                                   bool ignore_case, bool onig_space) {
  static const std::u32string contractions[] = {U"'s", U"'t", U"'re", U"'ve", U"'m", U"'ll", U"'d"};
  const size_t n = text.size();
  const auto starts_with = [&](size_t i, const std::u32string& s) {
    if (i + s.size() > n) return false;
    for (size_t k = 0; k < s.size(); ++k)
      if (ignore_case ? fold_case(text[i + k]) != fold_case(s[k]) : text[i + k] != s[k]) return false;
    return true;
  };
  // Python's regex module: \s is White_Space (without U+001C..U+001F, which str.isspace has).
  const auto space = [&](char32_t c) { return onig_space ? is_onig_space(c) : is_space(c) && !(c >= 0x1C && c <= 0x1F); };
  const auto other = [&](char32_t c) { return !space(c) && !is_letter(c) && !is_number(c); };
  std::vector<ClipPiece> pieces;
  for (size_t i = 0; i < n;) {
    size_t len = 0;
    int special = -1;
    for (size_t s = 0; s < specials.size() && !len; ++s)
      if (starts_with(i, specials[s])) {
        len = specials[s].size();
        special = int(s);
      }
    for (const auto& c : contractions)
      if (!len && starts_with(i, c)) len = c.size();
    if (!len && is_letter(text[i]))
      while (i + len < n && is_letter(text[i + len])) ++len;
    if (!len && is_number(text[i])) len = 1;
    if (!len && other(text[i]))
      while (i + len < n && other(text[i + len])) ++len;
    if (!len) {
      ++i;
      continue;
    }
    pieces.push_back({text.substr(i, len), special});
    i += len;
  }
  return pieces;
}

}  // namespace vit

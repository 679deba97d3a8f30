// find_tokenizer_files (tokenizer.h): which files of a folder a tokenizer reads, and the settings transformers'
// tokenizer_config.json, special_tokens_map.json and tokenizer.json give it.
#include <sys/stat.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "engine/io/files.h"
#include "engine/io/json_file.h"
#include "engine/text/tokenizer.h"
#include "engine/text/unicode.h"
#include "vit/error.h"

namespace vit {
namespace {

bool is_file(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string join(const std::string& folder, const char* name) { return folder + "/" + name; }

// A settings file of the folder, {} when it has none.
nlohmann::json read_json_object(const std::string& path) {
  if (!is_file(path)) return nlohmann::json::object();
  nlohmann::json j = vit::read_json_file(path);
  if (!j.is_object()) throw Error(path, "not a JSON object");
  return j;
}

// The folder's tokenizer settings: special_tokens_map.json over tokenizer_config.json.
struct Settings {
  nlohmann::json config, special;
  // A special token's text (a string, or an AddedToken's {"content": ...}), else `fallback`.
  std::string token(const char* key, const std::string& fallback) const {
    for (const nlohmann::json* j : {&special, &config}) {
      if (!j->contains(key)) continue;
      const nlohmann::json& v = (*j)[key];
      if (v.is_string()) return v.get<std::string>();
      if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
    }
    return fallback;
  }
  bool flag(const char* key, bool fallback) const {
    return config.contains(key) && config[key].is_boolean() ? config[key].get<bool>() : fallback;
  }
  std::string tokenizer_class() const {
    return config.contains("tokenizer_class") && config["tokenizer_class"].is_string() ? config["tokenizer_class"].get<std::string>()
                                                                                       : "";
  }
};

std::u32string u32(const nlohmann::json& j) { return utf8_to_u32(j.get<std::string>()); }

// One of tokenizer.json's normalizers (those transformers' SentencePiece converters write), as a step.
TokenizerSpec::TextStep normalizer_step(const nlohmann::json& n, const std::string& path) {
  using Step = TokenizerSpec::TextStep;
  const std::string type = n.is_object() ? n.value("type", "") : "";
  if (type == "Precompiled") return {Step::Charsmap, {}, 0, {}};
  if (type == "Replace" && n.contains("pattern") && n["pattern"].is_object() && n.contains("content")) {
    const nlohmann::json& p = n["pattern"];
    if (p.contains("String") && p["String"].is_string()) return {Step::Replace, u32(p["String"]), 0, u32(n["content"])};
    // A run of one character: "c+" or "c{n,}" (" {2,}": two spaces or more).
    const std::u32string r = p.contains("Regex") && p["Regex"].is_string() ? u32(p["Regex"]) : U"";
    if (r.size() == 2 && r[1] == U'+') return {Step::Replace, r.substr(0, 1), 1, u32(n["content"])};
    if (r.size() == 5 && r[1] == U'{' && r[2] >= U'1' && r[2] <= U'9' && r.substr(3) == U",}")
      return {Step::Replace, r.substr(0, 1), int(r[2] - U'0'), u32(n["content"])};
    throw Error(path, "normalizer Replace " + p.dump() + " is not one this engine runs");
  }
  if (type == "Strip") throw Error(path, "internal: Strip is two steps");
  throw Error(path, "normalizer " + (type.empty() ? n.dump() : type) + " is not one this engine runs around a "
                    "SentencePiece model (Precompiled, Strip, Replace)");
}

// What the fast tokenizer does around its SentencePiece model: tokenizer.json's normalizer and pre-tokenizer, or
// without a tokenizer.json, transformers 4.48's conversion (GemmaConverter: spaces as '▁'; SpmConverter: the
// model's character map, spaces at the end stripped, runs of two or more as one '▁', Metaspace without a prefix).
void sentencepiece_pipeline(const std::string& path, bool gemma, TokenizerSpec* spec) {
  using Step = TokenizerSpec::TextStep;
  if (!is_file(path)) {
    if (gemma) spec->normalizer = {{Step::Replace, U" ", 0, U"\u2581"}};
    else spec->normalizer = {{Step::Charsmap, {}, 0, {}}, {Step::StripRight, {}, 0, {}}, {Step::Replace, U" ", 2, U"\u2581"}};
    spec->metaspace = !gemma;
    return;
  }
  const nlohmann::json t = read_json_object(path);
  const nlohmann::json n = t.contains("normalizer") ? t["normalizer"] : nlohmann::json();
  std::vector<nlohmann::json> steps;
  if (n.is_object() && n.value("type", "") == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array())
    steps.assign(n["normalizers"].begin(), n["normalizers"].end());
  else if (!n.is_null())
    steps.push_back(n);
  for (const auto& s : steps) {
    if (s.is_object() && s.value("type", "") == "Strip") {
      if (s.value("strip_left", false)) spec->normalizer.push_back({Step::StripLeft, {}, 0, {}});
      if (s.value("strip_right", false)) spec->normalizer.push_back({Step::StripRight, {}, 0, {}});
    } else {
      spec->normalizer.push_back(normalizer_step(s, path));
    }
  }
  const nlohmann::json p = t.contains("pre_tokenizer") ? t["pre_tokenizer"] : nlohmann::json();
  const std::string type = p.is_object() ? p.value("type", "") : "";
  const bool spaces_replaced = std::any_of(spec->normalizer.begin(), spec->normalizer.end(), [](const Step& s) {
    return s.kind == Step::Replace && s.from == U" " && s.repeat == 0;
  });
  if (type == "Metaspace") {
    if (p.value("replacement", "") != "\xe2\x96\x81" || !p.value("split", true))
      throw Error(path, "a Metaspace pre-tokenizer other than SentencePiece's ('\u2581', split): not supported");
    spec->metaspace = true;
    spec->prepend = p.contains("prepend_scheme") && p["prepend_scheme"].is_string() ? p["prepend_scheme"] != "never"
                                                                                    : p.value("add_prefix_space", true);
  } else if (!(p.is_null() || (type == "Split" && spaces_replaced))) {  // Gemma's Split(" ") meets no space
    throw Error(path, "pre-tokenizer " + (type.empty() ? p.dump() : type) +
                          " is not one this engine runs around a SentencePiece model (Metaspace)");
  }
}

// tokenizer.json's added token `content`'s "normalized" (whether it is found in the normalized text), else
// tokenizer_config.json's, else true (as transformers' CLIPTokenizer makes its tokens).
bool added_token_normalized(const std::string& folder, const Settings& s, const std::string& content) {
  const nlohmann::json t = read_json_object(join(folder, "tokenizer.json"));
  if (t.contains("added_tokens") && t["added_tokens"].is_array())
    for (const auto& a : t["added_tokens"])
      if (a.is_object() && a.value("content", "") == content && a.contains("normalized")) return a.value("normalized", true);
  if (s.config.contains("added_tokens_decoder") && s.config["added_tokens_decoder"].is_object())
    for (const auto& [id, a] : s.config["added_tokens_decoder"].items())
      if (a.is_object() && a.value("content", "") == content && a.contains("normalized")) return a.value("normalized", true);
  return true;
}

// The SentencePiece model a folder's tokenizer reads: Gemma's tokenizer.model, T5's and SigLIP's spiece.model.
std::string sentencepiece_model(const std::string& folder, const Settings& s) {
  const bool gemma = s.tokenizer_class().rfind("Gemma", 0) == 0;
  for (const char* name : gemma ? std::vector<const char*>{"tokenizer.model", "spiece.model"}
                                : std::vector<const char*>{"spiece.model", "tokenizer.model"})
    if (is_file(join(folder, name))) return join(folder, name);
  const std::string wanted = gemma ? "tokenizer.model" : "spiece.model";
  if (is_file(join(folder, "tokenizer.json")))
    throw Error(folder, "holds tokenizer.json but not " + wanted + ", the SentencePiece model its tokenizer is run from");
  throw Error(folder, "has no " + wanted + " (the SentencePiece model of its tokenizer)");
}

}  // namespace

TokenizerSpec find_tokenizer_files(TokenizerKind kind, const std::string& folder, int64_t context) {
  TokenizerSpec spec;
  spec.kind = kind;
  spec.context = context;
  Settings s{read_json_object(join(folder, "tokenizer_config.json")), read_json_object(join(folder, "special_tokens_map.json"))};
  switch (kind) {
    case TokenizerKind::OpenClipBpe:
      for (const char* name : {"bpe_simple_vocab_16e6.txt.gz", "merges.txt"})
        if (spec.model.empty() && is_file(join(folder, name))) spec.model = join(folder, name);
      if (spec.model.empty())
        throw Error(folder, "has no bpe_simple_vocab_16e6.txt.gz, the vocabulary of open_clip's CLIP tokenizer (open_clip's "
                            "package ships it: python -c 'import open_clip.tokenizer as t; print(t.default_bpe())'), nor "
                            "its merges as merges.txt");
      break;
    case TokenizerKind::HfClipBpe:
      if (is_file(join(folder, "vocab.json")) && is_file(join(folder, "merges.txt"))) {
        spec.vocab = join(folder, "vocab.json");
        spec.model = join(folder, "merges.txt");
      } else if (is_file(join(folder, "tokenizer.json"))) {
        spec.model = join(folder, "tokenizer.json");
      } else {
        throw Error(folder, "has no tokenizer: neither vocab.json with merges.txt nor tokenizer.json");
      }
      spec.bpe_pad = s.token("pad_token", "<|endoftext|>");
      spec.specials_normalized = added_token_normalized(folder, s, "<|endoftext|>");
      break;
    case TokenizerKind::OpenClipSentencePiece: {
      spec.model = sentencepiece_model(folder, s);
      const bool gemma = s.tokenizer_class().rfind("Gemma", 0) == 0;
      sentencepiece_pipeline(join(folder, "tokenizer.json"), gemma, &spec);
      spec.add_bos = s.flag("add_bos_token", gemma);  // GemmaTokenizerFast's defaults; T5's adds only the end token
      spec.add_eos = s.flag("add_eos_token", !gemma);
      spec.bos = s.token("bos_token", gemma ? "<bos>" : "<s>");
      spec.eos = s.token("eos_token", gemma ? "<eos>" : "</s>");
      spec.pad = s.token("pad_token", "<pad>");
      spec.unk = s.token("unk_token", "<unk>");
      break;
    }
    case TokenizerKind::HfSiglipSentencePiece:
      if (!is_file(join(folder, "spiece.model"))) {
        if (is_file(join(folder, "tokenizer.json")))
          throw Error(folder, "holds tokenizer.json but not spiece.model, the SentencePiece model SiglipTokenizer reads");
        throw Error(folder, "has no spiece.model (the SentencePiece model of its SiglipTokenizer)");
      }
      spec.model = join(folder, "spiece.model");
      spec.lower = s.flag("do_lower_case", true);
      spec.eos = s.token("eos_token", "</s>");
      spec.pad = s.token("pad_token", "</s>");
      spec.unk = s.token("unk_token", "<unk>");
      break;
  }
  return spec;
}

}  // namespace vit

// The cleaning of clean.h, each step after its source: ftfy 6's __init__.py (fix_text, fix_and_explain) and
// fixes.py, open_clip's tokenizer.py (basic_clean, whitespace_clean, canonicalize_text).
#include "engine/text/clean.h"

#include <algorithm>
#include <array>

#include "engine/text/html.h"
#include "engine/text/unicode.h"

namespace vit {
namespace {

// ftfy's LIGATURES: Latin ligatures and the digraphs of legacy encodings, not the ligatures of other scripts.
const std::pair<char32_t, const char32_t*> kLigatures[] = {
    {U'Ĳ', U"IJ"}, {U'ĳ', U"ij"}, {U'ŉ', U"ʼn"}, {U'Ǳ', U"DZ"}, {U'ǲ', U"Dz"}, {U'ǳ', U"dz"}, {U'Ǆ', U"DŽ"}, {U'ǅ', U"Dž"},
    {U'ǆ', U"dž"}, {U'Ǉ', U"LJ"}, {U'ǈ', U"Lj"}, {U'ǉ', U"lj"}, {U'Ǌ', U"NJ"}, {U'ǋ', U"Nj"}, {U'ǌ', U"nj"}, {U'ﬀ', U"ff"},
    {U'ﬁ', U"fi"}, {U'ﬂ', U"fl"}, {U'ﬃ', U"ffi"}, {U'ﬄ', U"ffl"}, {U'ﬅ', U"ſt"}, {U'ﬆ', U"st"}};

// fix_character_width's WIDTH_MAP: U+3000 as a space, and each of U+FF01..U+FFEF that NFKC changes, as NFKC has it.
const std::u32string* width_form(char32_t c) {
  static const std::array<std::u32string, 0xFFF0 - 0xFF01> forms = [] {
    std::array<std::u32string, 0xFFF0 - 0xFF01> f;
    for (char32_t x = 0xFF01; x < 0xFFF0; ++x) {
      const std::u32string one(1, x), normal = normalize(one, NormalForm::NFKC);
      if (normal != one) f[x - 0xFF01] = normal;
    }
    return f;
  }();
  static const std::u32string space = U" ";
  if (c == 0x3000) return &space;
  if (c < 0xFF01 || c >= 0xFFF0 || forms[c - 0xFF01].empty()) return nullptr;
  return &forms[c - 0xFF01];
}

// remove_control_chars' CONTROL_CHARS.
bool unwanted_control(char32_t c) {
  return c <= 0x08 || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F || (c >= 0x206A && c <= 0x206F) || c == 0xFEFF ||
         (c >= 0xFFF9 && c <= 0xFFFC);
}

bool ascii_letter(char32_t c) { return (c >= U'a' && c <= U'z') || (c >= U'A' && c <= U'Z'); }

// remove_terminal_escapes: ANSI_RE = "\033\[((?:\d|;)*)([a-zA-Z])" removed (\d: any decimal digit).
std::u32string remove_terminal_escapes(std::u32string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (s[i] == 0x1B && i + 1 < s.size() && s[i + 1] == U'[') {
      size_t k = i + 2;
      while (k < s.size() && (is_decimal_digit(s[k]) || s[k] == U';')) ++k;
      if (k < s.size() && ascii_letter(s[k])) {
        i = k + 1;
        continue;
      }
    }
    out.push_back(s[i++]);
  }
  return out;
}

// fix_c1_controls, fix_latin_ligatures, fix_character_width, uncurl_quotes and remove_control_chars, each a map
// of one character, in one sweep in that order; fix_line_breaks after the first three (U+0085 is a C1 control
// and has become an ellipsis by then), before the quotes.
std::u32string character_fixes(std::u32string_view s) {
  std::u32string mapped;
  mapped.reserve(s.size());
  for (char32_t c : s) {
    c = windows_1252(c);
    const auto lig = std::find_if(std::begin(kLigatures), std::end(kLigatures), [&](const auto& l) { return l.first == c; });
    if (lig != std::end(kLigatures)) {
      mapped += lig->second;
      continue;
    }
    if (const std::u32string* w = width_form(c)) {
      mapped += *w;
      continue;
    }
    mapped.push_back(c);
  }
  std::u32string out;
  out.reserve(mapped.size());
  for (size_t i = 0; i < mapped.size(); ++i) {
    char32_t c = mapped[i];
    if (c == U'\r' && i + 1 < mapped.size() && mapped[i + 1] == U'\n') continue;  // \r\n: its \n follows
    if (c == U'\r' || c == 0x2028 || c == 0x2029 || c == 0x85) c = U'\n';
    if (c == 0x2BC || (c >= 0x2018 && c <= 0x201B)) c = U'\'';
    if (c >= 0x201C && c <= 0x201F) c = U'"';
    out.push_back(c);
  }
  return out;
}

std::u32string remove_unwanted_controls(std::u32string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (const char32_t c : s)
    if (!unwanted_control(c)) out.push_back(c);
  return out;
}

// fix_and_explain on one segment: the fixes again and again until they change nothing.
std::u32string fix_segment(std::u32string s, bool unescape) {
  for (;;) {
    const std::u32string before = s;
    if (unescape) s = ftfy_unescape_html(s);
    s = normalize(remove_unwanted_controls(remove_terminal_escapes(character_fixes(s))), NormalForm::NFC);
    if (s == before) return s;
  }
}

}  // namespace

std::u32string ftfy_fix_text(std::u32string_view text) {
  constexpr size_t kMaxDecodeLength = 1000000;  // TextFixerConfig.max_decode_length
  std::u32string out;
  out.reserve(text.size());
  bool unescape = true;  // unescape_html="auto": off from the first segment holding '<' on, as fix_text leaves it
  for (size_t pos = 0; pos < text.size();) {
    const size_t br = text.find(U'\n', pos);
    const size_t end = std::min(br == std::u32string_view::npos ? text.size() : br + 1, pos + kMaxDecodeLength);
    const std::u32string_view segment = text.substr(pos, end - pos);
    if (segment.find(U'<') != std::u32string_view::npos) unescape = false;
    out += fix_segment(std::u32string(segment), unescape);
    pos = end;
  }
  return out;
}

std::u32string openclip_basic_clean(std::u32string_view text) {
  return strip(html_unescape(html_unescape(ftfy_fix_text(text))));
}

std::u32string remove_ascii_punctuation(std::u32string_view text) {
  static const std::u32string punctuation = U"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
  std::u32string out;
  out.reserve(text.size());
  for (const char32_t c : text)
    if (punctuation.find(c) == std::u32string::npos) out.push_back(c);
  return out;
}

std::vector<std::pair<std::u32string, int>> split_special_tokens(const std::u32string& text,
                                                                 const std::vector<std::u32string>& specials) {
  std::vector<std::pair<std::u32string, int>> out;
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    int found = -1;
    for (size_t s = 0; s < specials.size(); ++s)
      if (!specials[s].empty() && text.compare(i, specials[s].size(), specials[s]) == 0 &&
          (found < 0 || specials[s].size() > specials[size_t(found)].size()))
        found = int(s);
    if (found < 0) {
      ++i;
      continue;
    }
    if (i > start) out.push_back({text.substr(start, i - start), -1});
    out.push_back({specials[size_t(found)], found});
    i += specials[size_t(found)].size();
    start = i;
  }
  if (start < text.size()) out.push_back({text.substr(start), -1});
  return out;
}

std::u32string openclip_canonicalize(std::u32string_view text) {
  std::u32string s(text);
  for (char32_t& c : s)
    if (c == U'_') c = U' ';
  return collapse_spaces(lower(remove_ascii_punctuation(s)));
}

}  // namespace vit

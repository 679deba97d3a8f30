// Python's html.unescape and ftfy's unescape_html over code points (html.h), each written after its source:
// CPython's Lib/html/__init__.py and ftfy 6's fixes.py and chardata.py.
#include "engine/text/html.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "engine/text/unicode.h"

namespace vit {
namespace {

bool ascii_digit(char32_t c) { return c >= U'0' && c <= U'9'; }
bool ascii_hex(char32_t c) { return ascii_digit(c) || (c >= U'a' && c <= U'f') || (c >= U'A' && c <= U'F'); }
bool ascii_alnum(char32_t c) { return ascii_digit(c) || (c >= U'a' && c <= U'z') || (c >= U'A' && c <= U'Z'); }

// The named reference's characters, or null when HTML5 has no such name.
const char* entity(const std::string& name) {
  const HtmlEntity* end = kHtmlEntities + kHtmlEntityCount;
  const HtmlEntity* e = std::lower_bound(kHtmlEntities, end, name,
                                         [](const HtmlEntity& a, const std::string& n) { return std::strcmp(a.name, n.c_str()) < 0; });
  return e != end && name == e->name ? e->utf8 : nullptr;
}

// html's _replace_charref for a numeric reference of value num (saturated past U+10FFFF).
std::u32string numeric_reference(uint32_t num) {
  if (num == 0x00) return U"\uFFFD";  // _invalid_charrefs
  if (num == 0x0D) return U"\r";
  if (num >= 0x80 && num <= 0x9F) return std::u32string(1, windows_1252(num));
  if ((num >= 0xD800 && num <= 0xDFFF) || num > 0x10FFFF) return U"\uFFFD";
  // _invalid_codepoints: C0 and C1 controls but tab, line feed, form feed, carriage return and space; noncharacters.
  if ((num >= 0x1 && num <= 0x8) || num == 0xB || (num >= 0xE && num <= 0x1F) || (num >= 0x7F && num <= 0x9F) ||
      is_noncharacter(num))
    return U"";
  return std::u32string(1, char32_t(num));
}

uint32_t parse_number(std::u32string_view digits, int base) {
  uint64_t v = 0;
  for (const char32_t c : digits) {
    const uint32_t d = ascii_digit(c) ? c - U'0' : (c | 0x20) - U'a' + 10;
    v = std::min<uint64_t>(v * uint64_t(base) + d, 0x110000);
  }
  return uint32_t(v);
}

// _replace_charref for a named reference s (the text after '&', its ';' included when there): the name, else
// its longest known prefix of two characters or more followed by the rest, else the text as it was.
std::u32string named_reference(std::u32string_view s) {
  if (const char* v = entity(u32_to_utf8(s))) return utf8_to_u32(v);
  for (size_t x = s.size() - 1; x >= 2; --x)
    if (const char* v = entity(u32_to_utf8(s.substr(0, x)))) return utf8_to_u32(v) + std::u32string(s.substr(x));
  return U"&" + std::u32string(s);
}

// html's _charref at text[i] == '&': &(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?). Returns the
// match's end, its replacement in *out; or i when nothing matches.
size_t match_charref(std::u32string_view text, size_t i, std::u32string* out) {
  const size_t n = text.size(), j = i + 1;
  const auto with_semicolon = [&](size_t k) { return k < n && text[k] == U';' ? k + 1 : k; };
  if (j < n && text[j] == U'#') {
    size_t k = j + 1;
    while (k < n && ascii_digit(text[k])) ++k;
    if (k > j + 1) {
      *out = numeric_reference(parse_number(text.substr(j + 1, k - j - 1), 10));
      return with_semicolon(k);
    }
    if (j + 1 < n && (text[j + 1] == U'x' || text[j + 1] == U'X')) {
      k = j + 2;
      while (k < n && ascii_hex(text[k])) ++k;
      if (k > j + 2) {
        *out = numeric_reference(parse_number(text.substr(j + 2, k - j - 2), 16));
        return with_semicolon(k);
      }
    }
    return i;
  }
  size_t k = j;
  static const std::u32string excluded = U"\t\n\f <&#;";
  while (k < n && k - j < 32 && excluded.find(text[k]) == std::u32string::npos) ++k;
  if (k == j) return i;
  const size_t end = with_semicolon(k);
  *out = named_reference(text.substr(j, end - j));
  return end;
}

// ftfy's HTML_ENTITIES: "&name;" for each of HTML5's names with a semicolon, and for the lower-case ones their
// upper-case spelling where html.unescape leaves that alone, standing for the characters upper-cased.
const std::map<std::u32string, std::u32string>& ftfy_entities() {
  static const std::map<std::u32string, std::u32string> table = [] {
    std::map<std::u32string, std::u32string> t;
    for (int e = 0; e < kHtmlEntityCount; ++e) {
      const std::string name = kHtmlEntities[e].name;
      if (name.back() != ';') continue;
      const std::u32string value = utf8_to_u32(kHtmlEntities[e].utf8), key = U"&" + utf8_to_u32(name);
      t[key] = value;
      if (std::any_of(name.begin(), name.end(), [](char c) { return c >= 'A' && c <= 'Z'; })) continue;
      std::u32string up = key;
      for (char32_t& c : up)
        if (c >= U'a' && c <= U'z') c -= 32;
      if (html_unescape(up) == up) t[up] = upper(value);
    }
    return t;
  }();
  return table;
}

}  // namespace

std::u32string html_unescape(std::u32string_view text) {
  if (text.find(U'&') == std::u32string_view::npos) return std::u32string(text);
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    std::u32string replacement;
    const size_t end = text[i] == U'&' ? match_charref(text, i, &replacement) : i;
    if (end == i) {
      out.push_back(text[i++]);
    } else {
      out += replacement;
      i = end;
    }
  }
  return out;
}

std::u32string ftfy_unescape_html(std::u32string_view text) {
  // HTML_ENTITY_RE: &#?[0-9A-Za-z]{1,24}; each match through _unescape_fixup.
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text[i] != U'&') {
      out.push_back(text[i++]);
      continue;
    }
    const size_t start = i + 1 + (i + 1 < text.size() && text[i + 1] == U'#');
    size_t k = start;
    while (k < text.size() && k - start < 25 && ascii_alnum(text[k])) ++k;
    if (k == start || k - start > 24 || k >= text.size() || text[k] != U';') {
      out.push_back(text[i++]);
      continue;
    }
    const std::u32string match(text.substr(i, k + 1 - i));
    const auto& entities = ftfy_entities();
    if (const auto it = entities.find(match); it != entities.end()) {
      out += it->second;
    } else if (start == i + 2) {  // "&#...;": decoded only when html.unescape takes the semicolon with it
      const std::u32string decoded = html_unescape(match);
      out += decoded.find(U';') == std::u32string::npos ? decoded : match;
    } else {
      out += match;
    }
    i = k + 1;
  }
  return out;
}

}  // namespace vit

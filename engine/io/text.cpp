// Lossless escaping of file names; see text.h.
#include "engine/io/text.h"

#include <locale.h>
#include <wchar.h>

#include <cstdint>
#include <cstdio>

namespace vit {
namespace {

// The length of the valid UTF-8 sequence starting at s[i] (1 to 4), or 0 if it is not one (overlong
// forms, surrogates and code points past U+10FFFF are not valid).
size_t utf8_length(const std::string& s, size_t i) {
  const auto b = [&](size_t k) { return uint8_t(s[i + k]); };
  const uint8_t c = b(0);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((b(k) & 0xC0) != 0x80) return 0;
  if (n == 2 && c < 0xC2) return 0;                                   // overlong
  if (n == 3 && c == 0xE0 && b(1) < 0xA0) return 0;                   // overlong
  if (n == 3 && c == 0xED && b(1) >= 0xA0) return 0;                  // surrogates
  if (n == 4 && (c > 0xF4 || (c == 0xF0 && b(1) < 0x90) || (c == 0xF4 && b(1) >= 0x90))) return 0;
  return n;
}

std::string hex_escape(const char* fmt, unsigned v) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

// The code point of the valid n-byte sequence at s[i].
char32_t decode(const std::string& s, size_t i, size_t n) {
  static const uint8_t kLead[] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  char32_t c = uint8_t(s[i]) & kLead[n];
  for (size_t k = 1; k < n; ++k) c = (c << 6) | (uint8_t(s[i + k]) & 0x3F);
  return c;
}

}  // namespace

size_t display_width(const std::string& text) {
  // A locale of our own for this thread only: setlocale() would change the whole program's.
  static const locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", locale_t(0));
  const locale_t before = utf8 ? uselocale(utf8) : locale_t(0);
  size_t width = 0;
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_length(text, i);
    if (n == 0) {  // not UTF-8: a byte a column, as printable() would show it escaped
      ++width;
      ++i;
      continue;
    }
    const int w = utf8 ? ::wcwidth(wchar_t(decode(text, i, n))) : 1;
    width += size_t(w < 0 ? 1 : w);
    i += n;
  }
  if (utf8) uselocale(before);
  return width;
}

std::string json_string(const std::string& bytes) {
  std::string out = "\"";
  for (size_t i = 0; i < bytes.size();) {
    const size_t n = utf8_length(bytes, i);
    const auto c = uint8_t(bytes[i]);
    if (n == 0) {
      out += hex_escape("\\udc%02x", c);  // a byte of no valid sequence: U+DC80..U+DCFF
      ++i;
      continue;
    }
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20 || c == 0x7f) out += hex_escape("\\u%04x", c);
    else out.append(bytes, i, n);
    i += n;
  }
  return out + "\"";
}

std::string printable(const std::string& bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size();) {
    const size_t n = utf8_length(bytes, i);
    const auto c = uint8_t(bytes[i]);
    if (n == 0 || c < 0x20 || c == 0x7f) {
      out += hex_escape("\\x%02x", c);
      ++i;
    } else {
      out.append(bytes, i, n);
      i += n;
    }
  }
  return out;
}

}  // namespace vit

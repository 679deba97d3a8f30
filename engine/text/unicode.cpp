// unicode.h through ICU's C and C++ interfaces.
#include "engine/text/unicode.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/ucnv.h>
#include <unicode/unistr.h>
#include <unicode/ustring.h>
#include <unicode/utf8.h>


#include "vit/error.h"

namespace vit {
namespace {

icu::UnicodeString to_icu(std::u32string_view s) {
  return icu::UnicodeString::fromUTF32(reinterpret_cast<const UChar32*>(s.data()), int32_t(s.size()));
}

std::u32string from_icu(const icu::UnicodeString& s) {
  std::u32string out(size_t(s.countChar32()), U'\0');
  UErrorCode status = U_ZERO_ERROR;
  s.toUTF32(reinterpret_cast<UChar32*>(out.data()), int32_t(out.size()), status);
  if (U_FAILURE(status)) throw Error(std::string("ICU: cannot convert text to code points: ") + u_errorName(status));
  return out;
}

}  // namespace

std::u32string normalize(std::u32string_view s, NormalForm form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n =
      form == NormalForm::NFC ? icu::Normalizer2::getNFCInstance(status) : icu::Normalizer2::getNFKCInstance(status);
  if (U_FAILURE(status)) throw Error(std::string("ICU: no normalizer: ") + u_errorName(status));
  const icu::UnicodeString out = n->normalize(to_icu(s), status);
  if (U_FAILURE(status)) throw Error(std::string("ICU: cannot normalize: ") + u_errorName(status));
  return from_icu(out);
}

std::u32string utf8_to_u32(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const int32_t n = int32_t(text.size());
  if (text.size() > size_t(INT32_MAX)) throw Error("text of " + std::to_string(text.size()) + " bytes: too long");
  for (int32_t i = 0; i < n;) {
    const int32_t at = i;
    UChar32 c;
    U8_NEXT(s, i, n, c);
    if (c < 0) throw Error("not valid UTF-8: byte " + std::to_string(at) + " (0x" + "0123456789abcdef"[s[at] >> 4] +
                           "0123456789abcdef"[s[at] & 15] + ") starts no valid character");
    out.push_back(char32_t(c));
  }
  return out;
}

std::string u32_to_utf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char32_t c : text) {
    uint8_t buf[4];
    int32_t n = 0;
    UBool error = false;
    U8_APPEND(buf, n, 4, UChar32(c), error);
    if (error) throw Error("internal: code point " + std::to_string(uint32_t(c)) + " has no UTF-8 form");
    out.append(reinterpret_cast<const char*>(buf), size_t(n));
  }
  return out;
}


std::u32string lower(std::u32string_view text) { return from_icu(to_icu(text).toLower(icu::Locale::getRoot())); }
std::u32string upper(std::u32string_view text) { return from_icu(to_icu(text).toUpper(icu::Locale::getRoot())); }

std::u32string lower_each(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (const char32_t c : text) out += lower(std::u32string_view(&c, 1));
  return out;
}

bool is_space(char32_t c) { return u_isspace(UChar32(c)); }

bool is_onig_space(char32_t c) {
  return (c >= 0x9 && c <= 0xD) || c == 0x85 || (U_GET_GC_MASK(UChar32(c)) & U_GC_Z_MASK) != 0;
}

bool is_white_space(char32_t c) { return u_isUWhiteSpace(UChar32(c)); }
bool is_letter(char32_t c) { return (U_GET_GC_MASK(UChar32(c)) & U_GC_L_MASK) != 0; }
bool is_number(char32_t c) { return (U_GET_GC_MASK(UChar32(c)) & U_GC_N_MASK) != 0; }
bool is_decimal_digit(char32_t c) { return u_charType(UChar32(c)) == U_DECIMAL_DIGIT_NUMBER; }
bool is_noncharacter(char32_t c) { return u_hasBinaryProperty(UChar32(c), UCHAR_NONCHARACTER_CODE_POINT); }
char32_t fold_case(char32_t c) { return char32_t(u_foldCase(UChar32(c), U_FOLD_CASE_DEFAULT)); }

char32_t windows_1252(char32_t b) {
  // Decoded once, the 32 bytes 0x80..0x9F by ICU's windows-1252 converter.
  static const std::u32string table = [] {
    UErrorCode status = U_ZERO_ERROR;
    UConverter* cnv = ucnv_open("windows-1252", &status);
    if (U_FAILURE(status)) throw Error(std::string("ICU: no windows-1252 converter: ") + u_errorName(status));
    std::u32string t;
    for (int byte = 0x80; byte < 0xA0; ++byte) {
      const char in = char(byte);
      UChar out[4];
      status = U_ZERO_ERROR;
      const int32_t n = ucnv_toUChars(cnv, out, 4, &in, 1, &status);
      // An undefined byte (0x81, 0x8D, 0x8F, 0x90, 0x9D) stays the C1 control of its number.
      t.push_back(U_SUCCESS(status) && n == 1 && out[0] != 0xFFFD && out[0] != 0x1A ? char32_t(out[0]) : char32_t(byte));
    }
    ucnv_close(cnv);
    return t;
  }();
  return b >= 0x80 && b < 0xA0 ? table[b - 0x80] : b;
}

std::u32string strip(std::u32string_view text) {
  size_t a = 0, b = text.size();
  while (a < b && is_space(text[a])) ++a;
  while (b > a && is_space(text[b - 1])) --b;
  return std::u32string(text.substr(a, b - a));
}

std::u32string collapse_spaces(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  bool gap = false;
  for (const char32_t c : text) {
    if (is_space(c)) {
      gap = !out.empty();
      continue;
    }
    if (gap) out.push_back(U' ');
    gap = false;
    out.push_back(c);
  }
  return out;
}

}  // namespace vit

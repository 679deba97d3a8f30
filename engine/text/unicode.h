// Text as code points, and what the tokenizers ask of Unicode, from ICU: UTF-8 checked and decoded, the
// normal forms, case mappings as Python's str.lower and as a character-by-character one, the classes Python's
// str.isspace and the regular expressions' \p{L} and \p{N} test, Windows-1252's C1 range. No tables of our own.
#pragma once
#include <string>
#include <string_view>

namespace vit {

// The code points of UTF-8 text; throws an Error naming the first byte that is not valid UTF-8 (overlong
// forms, surrogates and code points past U+10FFFF are not, as Python's strict decoder says).
std::u32string utf8_to_u32(std::string_view text);
std::string u32_to_utf8(std::u32string_view text);

enum class NormalForm { NFC, NFKC };
std::u32string normalize(std::u32string_view text, NormalForm form);

// Python's str.lower and str.upper: Unicode's full case mappings (one character may become two), the final
// sigma by its context (ICU's root locale).
std::u32string lower(std::u32string_view text);
std::u32string upper(std::u32string_view text);
// Each character lowered alone, without context (no final sigma): what transformers' slow tokenizers do
// (re.sub over one character at a time) and Hugging Face tokenizers' Lowercase normalizer.
std::u32string lower_each(std::u32string_view text);

// Python's str.isspace: White_Space's spaces, separators and controls, and U+001C..U+001F.
bool is_space(char32_t c);
// Oniguruma's \s, which Hugging Face tokenizers' regular expressions use: U+0009..U+000D, U+0085 and the
// separators (Zs, Zl, Zp); not U+001C..U+001F.
bool is_onig_space(char32_t c);
// The White_Space property (Rust's char::is_whitespace, which Hugging Face tokenizers' Strip uses).
bool is_white_space(char32_t c);
bool is_letter(char32_t c);         // \p{L}
bool is_number(char32_t c);         // \p{N}
bool is_decimal_digit(char32_t c);  // \p{Nd}: Python's \d
// A Unicode noncharacter (U+FDD0..U+FDEF, U+xxFFFE, U+xxFFFF).
bool is_noncharacter(char32_t c);
// Simple case folding, as a case-insensitive regular expression compares characters.
char32_t fold_case(char32_t c);

// The character Windows-1252 gives byte b in 0x80..0x9F, its five undefined bytes as the C1 controls of
// the same number (Python's html.unescape and ftfy's "sloppy" decoding, as browsers do).
char32_t windows_1252(char32_t b);

// Python's str.strip() and " ".join(str.split()): whitespace by is_space.
std::u32string strip(std::u32string_view text);
std::u32string collapse_spaces(std::u32string_view text);

}  // namespace vit

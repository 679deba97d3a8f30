// The text cleaning each reference tokenizer runs before it splits text into tokens: ftfy's fix_text (the repairs
// open_clip's CLIP tokenizer relies on, mojibake repair aside), open_clip's basic and canonical cleaning, the
// punctuation and whitespace rules of transformers' SiglipTokenizer.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vit {

// ftfy.fix_text (ftfy 6) with its default configuration, but for fix_encoding (mojibake: text decoded in the wrong
// encoding is left as it is): per line, and while anything changes, HTML character references ending in ';'
// (unless the line, or a line before it, holds '<'), C1 controls as Windows-1252, Latin ligatures taken apart,
// full-width and half-width forms to their usual width, curly quotes straightened, line breaks as '\n',
// terminal escapes and other control characters removed, NFC. Valid UTF-8 holds no surrogates, whose repair is
// then nothing.
std::u32string ftfy_fix_text(std::u32string_view text);

// open_clip's basic_clean: ftfy.fix_text, html.unescape twice, str.strip.
std::u32string openclip_basic_clean(std::u32string_view text);
// open_clip's canonicalize_text (after basic_clean, clean='canonicalize'): '_' as a space, ASCII punctuation
// (Python's string.punctuation) removed, lower case, whitespace runs as one space, stripped.
std::u32string openclip_canonicalize(std::u32string_view text);

// ASCII punctuation removed (string.punctuation: !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~).
std::u32string remove_ascii_punctuation(std::u32string_view text);

// Text split at the special tokens written in it (at each place the longest that starts there), as Hugging Face's
// added tokens are split out: the pieces in order, each with its special token's index, or -1 between them.
std::vector<std::pair<std::u32string, int>> split_special_tokens(const std::u32string& text,
                                                                 const std::vector<std::u32string>& specials);

}  // namespace vit

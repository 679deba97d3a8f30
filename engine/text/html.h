// HTML character references decoded as the reference tokenizers decode them: Python's html.unescape (HTML5's
// rules: named references with and without their semicolon, the longest known name first; numeric ones, the
// C1 range as Windows-1252, the invalid ones as U+FFFD or nothing) and ftfy's more careful unescape_html
// (only references that end in a semicolon; upper-case names of lower-case ones).
#pragma once
#include <string>
#include <string_view>

namespace vit {

// One of HTML5's named references: its name as written after '&' (with its ';' where the list has it),
// its characters in UTF-8 (html_entities.cpp, generated from Python's html.entities.html5).
struct HtmlEntity {
  const char* name;
  const char* utf8;
};
extern const HtmlEntity kHtmlEntities[];
extern const int kHtmlEntityCount;

// Python's html.unescape.
std::u32string html_unescape(std::u32string_view text);
// ftfy.fixes.unescape_html.
std::u32string ftfy_unescape_html(std::u32string_view text);

}  // namespace vit

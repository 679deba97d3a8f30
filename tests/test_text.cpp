// File names written losslessly: JSON with \udcXX for bytes that are not UTF-8 (Python's surrogate
// escape), escaped control characters; terminal text with \xNN, and the columns it takes.
#include <gtest/gtest.h>

#include "engine/io/text.h"

namespace vit {
namespace {

TEST(Text, JsonKeepsUtf8AndEscapesTheRest) {
  EXPECT_EQ(json_string("a.jpg"), "\"a.jpg\"");
  EXPECT_EQ(json_string("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\x9f.jpg"), "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\x9f.jpg\"");
  EXPECT_EQ(json_string("bad\xff\xfe.jpg"), "\"bad\\udcff\\udcfe.jpg\"");
  EXPECT_EQ(json_string("q\"b\\s\nt\t\x01\x7f"), "\"q\\\"b\\\\s\\nt\\t\\u0001\\u007f\"");
  EXPECT_EQ(json_string("\xc0\xaf"), "\"\\udcc0\\udcaf\"");          // an overlong '/'
  EXPECT_EQ(json_string("\xed\xa0\x80"), "\"\\udced\\udca0\\udc80\"");  // an encoded surrogate
  EXPECT_EQ(json_string("\xe2\x82"), "\"\\udce2\\udc82\"");            // cut short
}

TEST(Text, PrintableEscapesControlAndInvalidBytes) {
  EXPECT_EQ(printable("caf\xc3\xa9.jpg"), "caf\xc3\xa9.jpg");
  EXPECT_EQ(printable("a\nb\x1b[31m\xff"), "a\\x0ab\\x1b[31m\\xff");
}

// Terminal columns, whatever the program's locale (the tests run in C): CJK takes two, a combining
// accent none, a byte that is not UTF-8 one.
TEST(Text, DisplayWidthCountsTerminalColumns) {
  EXPECT_EQ(display_width("tench"), 5u);
  EXPECT_EQ(display_width("\xe9\x87\x91\xe9\xad\x9a"), 4u);          // 金魚
  EXPECT_EQ(display_width("cafe\xcc\x81"), 4u);                  // e + U+0301
  EXPECT_EQ(display_width("\xf0\x9f\x90\x9f"), 2u);              // 🐟
  EXPECT_EQ(display_width("a\xff"), 2u);
  EXPECT_EQ(display_width(""), 0u);
}

}  // namespace
}  // namespace vit

// libFuzzer target: arbitrary bytes as a file name through json_string and printable. The JSON must
// decode back to exactly the bytes (\udcXX to the byte XX, other escapes to their characters, the rest
// as it is), and neither form may hold a raw control character. The printable form's display width is
// at most two columns a character and at least none.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/io/text.h"

namespace {

std::string decode(const std::string& j) {
  std::string out;
  if (j.size() < 2 || j.front() != '"' || j.back() != '"') __builtin_trap();
  for (size_t i = 1; i + 1 < j.size(); ++i) {
    if (j[i] != '\\') {
      out += j[i];
      continue;
    }
    const char e = j[++i];
    if (e == 'u') {
      const unsigned v = unsigned(std::stoul(j.substr(i + 1, 4), nullptr, 16));
      i += 4;
      if (v >= 0xdc80 && v <= 0xdcff) out += char(v - 0xdc00);
      else if (v < 0x80) out += char(v);
      else __builtin_trap();  // json_string writes nothing else as \u
    } else {
      out += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string name(reinterpret_cast<const char*>(data), size);
  const std::string j = vit::json_string(name), p = vit::printable(name);
  for (unsigned char c : j + p)
    if (c < 0x20 || c == 0x7f) __builtin_trap();
  if (decode(j) != name) __builtin_trap();
  if (vit::display_width(p) > 2 * p.size()) __builtin_trap();
  return 0;
}

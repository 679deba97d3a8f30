// File names are bytes, not text: these write any name losslessly. JSON strings keep valid UTF-8 and
// write each byte that is not as \udcXX (Python's surrogateescape, so os.fsencode(json.loads(s)) gives
// the name back); terminal text shows control characters and such bytes as \xNN.
#pragma once
#include <string>

namespace vit {

std::string json_string(const std::string& bytes);  // with its quotes
std::string printable(const std::string& bytes);

// The columns a terminal gives valid UTF-8 text (printable()'s output, say): two for East Asian wide
// characters, none for combining marks, one for the rest; glibc's wcwidth in C.UTF-8, whatever the
// program's locale.
size_t display_width(const std::string& text);

// Whether s ends with tail (a tensor name with its suffix, say).
inline bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace vit

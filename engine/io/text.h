// File names are bytes, not text: these write any name losslessly. JSON strings keep valid UTF-8 and
// write each byte that is not as \udcXX (Python's surrogateescape, so os.fsencode(json.loads(s)) gives
// the name back); terminal text shows control characters and such bytes as \xNN.
#pragma once
#include <string>

namespace vit {

std::string json_string(const std::string& bytes);  // with its quotes
std::string printable(const std::string& bytes);

}  // namespace vit

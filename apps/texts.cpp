// Texts from the command line and from files of one string a line (texts.h).
#include "apps/texts.h"

#include "engine/io/files.h"
#include "engine/io/text.h"
#include "vit/error.h"

namespace vit::app {

constexpr uint64_t kMaxTextFileBytes = uint64_t(64) << 20;

std::vector<TextInput> read_text_lines(const std::string& path, const std::string& flag) {
  std::vector<uint8_t> bytes;
  try {
    bytes = read_file_bytes(path, kMaxTextFileBytes);
  } catch (const Error& e) {
    throw Error(flag + " " + printable(path), e.problem());
  }
  std::string all(bytes.begin(), bytes.end());
  if (all.rfind("\xef\xbb\xbf", 0) == 0) all.erase(0, 3);
  if (!all.empty() && all.back() == '\n') all.pop_back();
  std::vector<TextInput> out;
  if (all.empty() && bytes.empty()) return out;
  size_t start = 0;
  for (size_t line = 1;; ++line) {
    const size_t end = all.find('\n', start);
    std::string text = all.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!text.empty() && text.back() == '\r') text.pop_back();
    out.push_back({printable(path) + " line " + std::to_string(line), std::move(text)});
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

std::vector<TextInput> collect_texts(const std::vector<std::string>& given, const std::string& flag,
                                     const std::string& file, const std::string& file_flag) {
  std::vector<TextInput> out;
  for (size_t i = 0; i < given.size(); ++i) out.push_back({flag + " " + std::to_string(i + 1), given[i]});
  if (!file.empty())
    for (TextInput& t : read_text_lines(file, file_flag)) out.push_back(std::move(t));
  return out;
}

}  // namespace vit::app

// The one JSON file reader (json_file.h).
#include "json_file.h"

#include <vector>

#include "files.h"
#include "vit/error.h"

namespace vit {

nlohmann::json read_json_file(const std::string& path, uint64_t max_bytes) {
  const std::vector<uint8_t> bytes = read_file_bytes(path, max_bytes);
  try {
    return nlohmann::json::parse(bytes.begin(), bytes.end());
  } catch (const nlohmann::json::exception& e) {
    throw Error(path, std::string("invalid JSON: ") + e.what());
  }
}

}  // namespace vit

// A JSON file read whole through read_file_bytes (so a FIFO or device is refused, never waited on): every
// config and tokenizer file the engine reads. Invalid JSON is an Error naming the file.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace vit {

// A config or tokenizer file: a few KB to a few MB (a tokenizer.json with a 256k vocabulary is ~35 MB).
constexpr uint64_t kMaxJsonFileBytes = uint64_t(256) << 20;

nlohmann::json read_json_file(const std::string& path, uint64_t max_bytes = kMaxJsonFileBytes);

}  // namespace vit

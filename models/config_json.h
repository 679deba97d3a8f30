// Reading a config file's JSON fields, for every config reader (layout_config.cpp's, and vit_config.cpp's
// architecture name): a field of the wrong type is an Error naming the file and the key.
#pragma once
#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "vit/error.h"

namespace vit {

// j[key] as a T; an Error at `where` (the config's path) when it is not one.
template <typename T>
T get_as(const nlohmann::json& j, const char* key, const std::string& where) {
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(where, "'" + std::string(key) + "' has the wrong type: " + j.at(key).dump());
  }
}

// j[key] as 3 values (one value: repeated), as timm's mean and std.
inline std::array<float, 3> triple(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto v = get_as<std::vector<float>>(j, key, where);
  if (v.size() == 1) return {v[0], v[0], v[0]};
  if (v.size() != 3) throw Error(where, "'" + std::string(key) + "' needs 3 values, got " + std::to_string(v.size()));
  return {v[0], v[1], v[2]};
}

// Whether j has key with a value other than null.
inline bool has(const nlohmann::json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

}  // namespace vit

// Reading a config file's JSON fields, for every config reader (vit_config.cpp's timm and Hugging Face
// configs, layout_config.cpp's layouts): a field of the wrong type is an Error naming the file and the key.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

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

// Whether j has key with a value other than null.
inline bool has(const nlohmann::json& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

}  // namespace vit

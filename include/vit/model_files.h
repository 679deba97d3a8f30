// A model folder's files, found as every loader finds them: shared by the library's public API (vit/vit.h)
// and the models floor below it, which implements it (models/model_folder.cpp). Standard types only.
#pragma once
#include <string>
#include <vector>

namespace vit {

// The files loading a model reads, found as every loader finds them (the one place that knows the
// names): the weights (a folder's model.safetensors, or OpenCLIP's open_clip_model.safetensors; or the
// .safetensors file given), the config beside them (config.json; open_clip_config.json beside OpenCLIP's
// weights) unless one is given, preprocessor_config.json, and int8.safetensors (the rounded weights of a
// `vit quantize` folder). What `vit quantize` copies, and what no command's output may replace.
struct ModelFiles {
  std::string folder;        // where the weights are ("." for a bare file name)
  std::string weights;       // the checkpoint
  std::string config;        // the config read: the one given, else the one beside; "" for none
  std::string preprocessor;  // preprocessor_config.json beside the weights; "" for none
  std::string int8;          // int8.safetensors beside the weights; "" for none
  std::string name;          // the name loading takes hints from: the folder's, or a file's not named model.safetensors
  bool open_clip = false;    // OpenCLIP's names (open_clip_model.safetensors, open_clip_config.json)
  // Every path loading would read if it were there, present or not: the weights, the configs, the
  // preprocessor's and the int8 weights beside them.
  std::vector<std::string> read_paths() const;
};

// model: a .safetensors file or the folder holding one; config: a config.json given instead of the one
// beside ("" for that one). Throws vit::Error when there is no such path or the folder has no weights.
ModelFiles find_model_files(const std::string& model, const std::string& config = "");
// The name a model goes by (ModelInfo::name): the folder's, for a folder or the weights file a folder is
// loaded from (model.safetensors, open_clip_model.safetensors), else the file's stem.
std::string model_name(const std::string& model);

}  // namespace vit

// The models `vit serve` is told to serve: `-m [NAME=]PATH` repeated, and the flags that take a value for
// one model (`NAME=VALUE`) or for all (a bare `VALUE`): one for each of the library's load options
// (vit/load_options.h: --precision, --threads, --img-size, ...), and --embedding. Read into one spec per model,
// every mistake an error naming the flag.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "apps/options.h"

namespace vit::app {

// Which embedding a model serves: its head's output for a tower projecting into a joint image-text space,
// else the pre-logits (Default); or the one --embedding names.
enum class EmbeddingChoice { Default, PreLogits, Head };

struct ModelFlags {
  std::vector<std::string> models;  // -m, each [NAME=]PATH
  std::string name;                 // --name, with one -m only
  std::map<std::string, std::vector<std::string>> load;  // a flag per option of vit/load_options.h, by its name
  std::vector<std::string> embedding;
};

struct ModelSpec {
  std::string name;
  ModelOptions model;  // its path and load options
  EmbeddingChoice embedding = EmbeddingChoice::Default;
};

// One spec per model, in -m order (the default model when there is no -m). Throws vit::Error naming the
// flag: --name with several models, two models of one name, a NAME= that names none, a bad value.
std::vector<ModelSpec> model_specs(const ModelFlags& flags);

// Adds the flags to the command.
void add_model_flags(CLI::App* cmd, ModelFlags* flags);

}  // namespace vit::app

// The model-wide options (vit::LoadOptions, vit/model.h) as data, each declared once: its name (the Python
// keyword; the command-line flag is the name with '-' for '_'), what it takes, its range, its help. The
// library's one range check, the CLI's flags and `vit serve`'s per-model NAME=VALUE flags are made from it.
#pragma once
#include <string>
#include <vector>

#include "vit/model.h"

namespace vit {

// Path: a file's path (Python: str, bytes or os.PathLike); Name: a word such as an architecture's (Python: str);
// Precision and Pool: one of option_choices() (LoadOptions::precision; LoadOptions::pool, unset for the model's own).
enum class OptionKind { Number, Path, Name, Precision, Pool };

struct LoadOption {
  const char* name;  // "img_size"
  const char* what;  // "image size": how its refusals name it
  OptionKind kind;
  int LoadOptions::*number;       // Number: the field, its range, what 0 means
  int lo, hi;
  const char* zero;
  std::string LoadOptions::*text;  // Path, Name: the field (empty: none)
  const char* help;
};

// Every model-wide option, in the order --help lists them.
const std::vector<LoadOption>& load_option_table();
// The option of that name; throws vit::Error for another.
const LoadOption& load_option(const std::string& name);
// "--img-size" for img_size.
std::string option_flag(const LoadOption& option);
// The words a Precision or Pool option takes ("f32", "bf16", "int8"; "cls", "token", "mean", "avg", "map"), none
// for the other kinds.
const std::vector<std::string>& option_choices(const LoadOption& option);
// Reads a value given as text (a flag's, a NAME=VALUE's) into the options: throws vit::ArgumentError naming what is
// wrong with it ("image size: 'x' is not a whole number", "image size 9000 is out of range (0 for the model's own,
// or 1 to 8192)", "precision 'f16' is not one of f32, bf16, int8").
void set_load_option(LoadOptions* options, const LoadOption& option, const std::string& value);
// The value as text (on LoadOptions{}: its default, as --help shows it).
std::string load_option_value(const LoadOptions& options, const LoadOption& option);

}  // namespace vit

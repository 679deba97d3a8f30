// The shared flags and model loading of options.h.
#include "apps/options.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>
#include <sstream>

#include "vit/error.h"
#include "vit/load_options.h"

namespace vit::app {

static const char* kDefaultModel = "weights/deit_tiny_patch16_224.fb_in1k";

// A path of the source checkout: from the current folder when it is the checkout, else from the folder above
// this binary's (build/vit, or an installed bin/vit); "" where neither has it (a pip-installed vit).
static std::string checkout_path(const std::string& relative) {
  struct stat st{};
  if (::stat(relative.c_str(), &st) == 0) return relative;
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    std::string dir(exe, size_t(n));
    dir = dir.substr(0, dir.find_last_of('/'));
    const std::string candidate = dir + "/../" + relative;
    if (::stat(candidate.c_str(), &st) == 0) return candidate;
  }
  return "";
}

std::string default_model_path() {
  const std::string found = checkout_path(kDefaultModel);
  return found.empty() ? kDefaultModel : found;
}

template <typename T>
CLI::Option* add_number_option(CLI::App* cmd, const std::string& names, T* value, T lo, T hi, const std::string& help) {
  const std::string flag = names.substr(names.find_last_of(',') + 1);
  std::ostringstream dflt;
  dflt << *value;
  return cmd
      ->add_option_function<std::string>(
          names,
          [=](const std::string& text) {
            std::istringstream in(text);
            T v{};
            if (!(in >> v) || !(in >> std::ws).eof()) throw CLI::ValidationError(flag, "'" + text + "' is not a number");
            if (v < lo || v > hi) {
              std::ostringstream range;
              range << text << " is out of range (" << lo << " to " << hi << ")";
              throw CLI::ValidationError(flag, range.str());
            }
            *value = v;
          },
          help)
      ->default_str(dflt.str())
      ->type_name(std::is_integral<T>::value ? "INT" : "NUMBER");
}
template CLI::Option* add_number_option<int>(CLI::App*, const std::string&, int*, int, int, const std::string&);
template CLI::Option* add_number_option<int64_t>(CLI::App*, const std::string&, int64_t*, int64_t, int64_t,
                                                 const std::string&);
template CLI::Option* add_number_option<double>(CLI::App*, const std::string&, double*, double, double,
                                                const std::string&);

void add_batch_option(CLI::App* cmd, int* batch) {
  add_number_option(cmd, "-b,--batch", batch, 1, int(kMaxBatch), "images per forward pass");
}

CLI::Option* add_load_option(CLI::App* cmd, LoadOptions* o, const std::string& name) {
  const LoadOption& option = load_option(name);
  const std::string flag = (name == "threads" ? "-t," : "") + option_flag(option);
  switch (option.kind) {
    case OptionKind::Number: return add_number_option(cmd, flag, &(o->*option.number), option.lo, option.hi, option.help);
    case OptionKind::Path: return cmd->add_option(flag, o->*option.text, option.help);
    case OptionKind::Name: return add_name_option(cmd, flag, &(o->*option.text), option.help)->type_name("NAME");
    case OptionKind::Precision:
    case OptionKind::Pool: break;
  }
  return cmd->add_option_function<std::string>(flag, [o, &option](const std::string& s) { set_load_option(o, option, s); },
                                               option.help)
      ->check(CLI::IsMember(option_choices(option)))
      ->type_name("NAME")
      ->default_str(load_option_value(LoadOptions{}, option));
}

void add_model_options(CLI::App* cmd, ModelOptions* o, bool with_precision) {
  cmd->add_option("-m,--model", o->model,
                  "a .safetensors file or the folder holding model.safetensors and config.json "
                  "(default: weights/deit_tiny_patch16_224.fb_in1k)");
  static const std::set<std::string> kSomeCommands = {"max_patches", "labels", "text_embeddings", "pool"};
  for (const LoadOption& option : load_option_table())
    if (!kSomeCommands.count(option.name) && (with_precision || option.kind != OptionKind::Precision))
      add_load_option(cmd, o, option.name);
}


std::string model_path(const ModelOptions& o) {
  std::string path = o.model.empty() ? default_model_path() : o.model;
  struct stat st{};
  if (o.model.empty() && ::stat(path.c_str(), &st) != 0) {
    const std::string fetch = checkout_path("weights/get_default_model.sh");
    if (!fetch.empty()) throw Error(path, "default model not found; fetch it with " + fetch + " or pass --model");
    throw Error("no --model given, and this vit has no default model beside it: pass --model FOLDER, a folder holding "
                "model.safetensors and config.json; the default is timm's deit_tiny_patch16_224.fb_in1k, whose two "
                "files are on the Hugging Face hub: https://huggingface.co/timm/deit_tiny_patch16_224.fb_in1k");
  }
  spdlog::debug("loading {}", path);
  return path;
}

std::vector<std::string> model_files_to_keep(const ModelOptions& o) {
  try {
    return find_model_files(o.model.empty() ? default_model_path() : o.model, o.config).read_paths();
  } catch (const Error&) {
    return {};
  }
}

CLI::Validator non_empty_name() {
  return CLI::Validator(
      [](const std::string& s) { return s.empty() ? std::string("an empty name names nothing") : std::string(); }, "",
      "not empty");
}

CLI::Option* add_name_option(CLI::App* cmd, const std::string& names, std::string* value, const std::string& help) {
  return cmd->add_option(names, *value, help)->check(non_empty_name());
}

ClassifierOptions classifier_options(const ModelOptions& o) {
  ClassifierOptions co;
  static_cast<LoadOptions&>(co) = o;
  return co;
}

Classifier load_classifier(const ModelOptions& o, const ClassifierOptions& co) { return Classifier(model_path(o), co); }

void require_head(int64_t classes, const std::string& model_file) {
  if (classes == 0)
    throw Error(model_file, "the model has no classifier head (embeddings only): use vit embed, or for a CLIP or "
                            "SigLIP image tower vit classify --text-embeddings");
}

bool parse_whole_number(const std::string& s, long* v) {
  size_t used = 0;
  try {
    *v = std::stol(s, &used);
  } catch (const std::exception&) {
    return false;
  }
  return !s.empty() && used == s.size();
}

std::vector<int> parse_batch_list(const std::string& s, const std::string& flag) {
  std::vector<int> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = s.find(',', start);
    const std::string item = s.substr(start, end == std::string::npos ? std::string::npos : end - start);
    long v = 0;
    if (!parse_whole_number(item, &v))
      throw Error(flag + ": '" + item + "' is not a number (expected a list like 1,8,32)");
    try {
      check_batch_size(v);
    } catch (const Error& e) {
      throw Error(flag + ": " + e.what());
    }
    out.push_back(int(v));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

}  // namespace vit::app

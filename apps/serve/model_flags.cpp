// Reading `vit serve`'s per-model flags (model_flags.h).
#include "model_flags.h"

#include <nlohmann/json.hpp>
#include <set>

#include "vit/error.h"
#include "vit/load_options.h"
#include "vit/vit.h"

namespace vit::app {

namespace {

// "NAME=VALUE" split when NAME is one of the names (or looks like one: no '/' before the '='); a bare
// value otherwise.
bool split_named(const std::string& v, std::string* name, std::string* value) {
  const size_t eq = v.find('=');
  if (eq == std::string::npos || eq == 0 || v.substr(0, eq).find('/') != std::string::npos) return false;
  *name = v.substr(0, eq);
  *value = v.substr(eq + 1);
  return true;
}

// The value a flag gives one model: its NAME=VALUE, else the last bare VALUE, else "".
std::string value_for(const std::vector<std::string>& values, const std::string& flag, const std::string& model,
                      const std::set<std::string>& names) {
  std::string bare, own;
  for (const std::string& v : values) {
    std::string name, value;
    if (!split_named(v, &name, &value)) {
      bare = v;
      continue;
    }
    if (!names.count(name)) {
      std::string served;
      for (const std::string& n : names) served += (served.empty() ? "" : ", ") + n;
      throw Error(flag + " " + v + ": no model named '" + name + "' (the models: " + served + ")");
    }
    if (name == model) own = value;
  }
  return own.empty() ? bare : own;
}

// A value as a JSON string: quoted, its control characters escaped (\n, \u0007), invalid UTF-8 replaced.
std::string quoted(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A model's name goes into paths, JSON, metrics labels and log lines: a control character in it (a newline
// would start a false log line) is refused, shown escaped.
void check_name(const std::string& name, const std::string& from) {
  for (const char c : name) {
    if (uint8_t(c) >= 0x20 && c != 0x7f) continue;
    throw Error(from + ": the model name " + quoted(name) + " holds a control character; name the model with "
                "-m NAME=PATH in printable characters");
  }
}

}  // namespace

std::vector<ModelSpec> model_specs(const ModelFlags& f) {
  std::vector<ModelSpec> specs;
  std::set<std::string> names;
  const std::vector<std::string> models = f.models.empty() ? std::vector<std::string>{""} : f.models;
  if (!f.name.empty() && models.size() > 1)
    throw Error("--name names the one model; with several -m, name each as -m NAME=PATH");
  for (const std::string& m : models) {
    ModelSpec s;
    std::string name, path;
    if (split_named(m, &name, &path)) {
      s.name = name;
      s.model.model = path;
    } else {
      s.model.model = m;
      s.name = f.name;
      const std::string p = m.empty() ? default_model_path() : m;
      try {
        if (s.name.empty()) s.name = model_name(p);
      } catch (const Error&) {  // loading it names the problem
        s.name = p.substr(p.find_last_of('/') + 1);
      }
    }
    check_name(s.name, name.empty() && !f.name.empty() ? "--name" : "-m " + quoted(m));
    if (!names.insert(s.name).second)
      throw Error("-m: two models named '" + s.name + "': name them apart with -m NAME=PATH");
    specs.push_back(std::move(s));
  }
  for (ModelSpec& s : specs) {
    for (const LoadOption& option : load_option_table()) {
      const auto given = f.load.find(option.name);
      if (given == f.load.end()) continue;
      const std::string flag = option_flag(option), v = value_for(given->second, flag, s.name, names);
      if (v.empty()) continue;
      try {
        set_load_option(&s.model, option, v);
      } catch (const Error& e) {
        throw Error(flag + ": " + e.what());
      }
    }
    const std::string e = value_for(f.embedding, "--embedding", s.name, names);
    if (e == "head") s.embedding = EmbeddingChoice::Head;
    else if (e == "pre-logits") s.embedding = EmbeddingChoice::PreLogits;
    else if (!e.empty()) throw Error("--embedding: '" + e + "' is not pre-logits or head");
  }
  return specs;
}

void add_model_flags(CLI::App* cmd, ModelFlags* f) {
  cmd->add_option("-m,--model", f->models,
                  "[NAME=]PATH: a .safetensors file or the folder holding it; repeat for several models, each with "
                  "its own queue (default: weights/deit_tiny_patch16_224.fb_in1k)")
      ->type_name("[NAME=]PATH");
  cmd->add_option("--name", f->name, "the model's name in the API (default: the model folder's name); one model only");
  const auto per_model = [&](const char* flag, std::vector<std::string>* values, const char* help) {
    cmd->add_option(flag, *values, std::string(help) + "; NAME=VALUE for one model, VALUE for all")->type_name("[NAME=]VALUE");
  };
  // What serving adds to an option's help.
  const std::map<std::string, std::string> served{
      {"threads", "; the models' forward passes take turns on the cores unless their threads add up to no more than "
                  "the cores"}};
  for (const LoadOption& option : load_option_table()) {
    const auto more = served.find(option.name);
    const std::string dflt = load_option_value(LoadOptions{}, option);
    per_model(option_flag(option).c_str(), &f->load[option.name],
              (option.help + (dflt.empty() ? "" : " (default " + dflt + ")") +
               (more == served.end() ? "" : more->second)).c_str());
  }
  per_model("--embedding", &f->embedding,
            "pre-logits or head: the embedding served (default: a CLIP-like tower's projection, else timm's pre-logits)");
}

}  // namespace vit::app

// Reading `vit serve`'s per-model flags (model_flags.h).
#include "model_flags.h"

#include <nlohmann/json.hpp>
#include <set>

#include "vit/error.h"
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

int whole_number(const std::string& s, const std::string& flag, int lo, int hi) {
  long v = 0;
  if (!parse_whole_number(s, &v)) throw Error(flag + ": '" + s + "' is not a number");
  if (v < lo || v > hi)
    throw Error(flag + ": " + s + " is out of range (" + std::to_string(lo) + " to " + std::to_string(hi) + ")");
  return int(v);
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
    const auto value = [&](const std::vector<std::string>& v, const char* flag) { return value_for(v, flag, s.name, names); };
    if (const std::string p = value(f.precision, "--precision"); !p.empty()) {
      try {
        s.model.precision = precision_from_name(p);
      } catch (const Error& e) {
        throw Error("--precision: " + std::string(e.what()));
      }
    }
    if (const std::string v = value(f.img_size, "--img-size"); !v.empty()) s.model.img_size = whole_number(v, "--img-size", 0, 8192);
    if (const std::string v = value(f.max_patches, "--max-patches"); !v.empty())
      s.model.max_patches = whole_number(v, "--max-patches", 0, int(kMaxNaflexPatches));
    if (const std::string v = value(f.threads, "--threads"); !v.empty()) s.model.threads = whole_number(v, "--threads", 0, 4096);
    s.model.config = value(f.config, "--config");
    s.model.arch = value(f.arch, "--arch");
    s.text_embeddings = value(f.text_embeddings, "--text-embeddings");
    const std::string e = value(f.embedding, "--embedding");
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
  per_model("--precision", &f->precision, "arithmetic of the linear layers: f32, bf16 or int8 (default f32)");
  per_model("--img-size", &f->img_size, "run at SxS pixels instead of the model's size (0: the model's)");
  per_model("--max-patches", &f->max_patches,
            "NaFlex models (timm's naflexvit_*, SigLIP towers made with use_naflex): each whole image at its own "
            "aspect ratio within this many patches (0: 256, SigLIP 2's); the batches mix shapes, each image masked "
            "to its own");
  per_model("--config", &f->config, "config.json overriding the one beside the weights");
  per_model("--arch", &f->arch, "the timm architecture of a checkpoint without a config.json (as vit classify --arch)");
  per_model("--threads", &f->threads,
            "threads for decoding and inference (0: all cores); the models' forward passes take turns on the cores "
            "unless their threads add up to no more than the cores");
  per_model("--text-embeddings", &f->text_embeddings,
            "zero-shot labels for a CLIP or SigLIP tower (scripts/export_text_embeddings.py): /v1/classify and KServe's "
            "probabilities answer the file's labels");
  per_model("--embedding", &f->embedding,
            "pre-logits or head: the embedding served (default: a CLIP-like tower's projection, else timm's pre-logits)");
}

}  // namespace vit::app

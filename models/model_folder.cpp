// Finding a model's files (vit/model_files.h: find_model_files, model_name): the names a model folder holds,
// known here only, for loading (ViT::load), copying (`vit quantize`) and the commands' output checks.
#include <sys/stat.h>

#include <filesystem>

#include "models/int8_weights.h"
#include "vit/error.h"
#include "vit/model_files.h"

namespace vit {
namespace {

bool exists(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0;
}

std::string base_name(const std::string& p) {
  std::string s = p;
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  const auto pos = s.find_last_of('/');
  return pos == std::string::npos ? s : s.substr(pos + 1);
}

// The folder without its trailing slashes ("/" stays "/"), so that names join with one slash.
std::string without_trailing_slashes(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

std::string parent_dir(const std::string& p) {
  const auto pos = p.find_last_of('/');
  if (pos == std::string::npos) return ".";
  return pos == 0 ? "/" : p.substr(0, pos);
}

std::string join(const std::string& folder, const std::string& name) {
  return folder == "/" ? "/" + name : folder + "/" + name;
}

constexpr const char* kWeights = "model.safetensors";
constexpr const char* kOpenClipWeights = "open_clip_model.safetensors";
constexpr const char* kConfig = "config.json";
constexpr const char* kOpenClipConfig = "open_clip_config.json";
constexpr const char* kPreprocessor = "preprocessor_config.json";

}  // namespace

ModelFiles find_model_files(const std::string& model, const std::string& config) {
  struct stat st{};
  if (model.empty() || ::stat(model.c_str(), &st) != 0) throw Error(model, "no such file or directory");
  ModelFiles f;
  const bool folder = S_ISDIR(st.st_mode);
  if (folder) {
    f.folder = without_trailing_slashes(model);
    f.weights = join(f.folder, kWeights);
    // An OpenCLIP hub folder: open_clip_model.safetensors beside open_clip_config.json.
    if (!exists(f.weights) && exists(join(f.folder, kOpenClipWeights))) f.weights = join(f.folder, kOpenClipWeights);
    if (!exists(f.weights)) throw Error(model, "folder has no model.safetensors (or open_clip_model.safetensors)");
  } else {
    f.folder = parent_dir(model);
    f.weights = model;
  }
  f.open_clip = base_name(f.weights).rfind("open_clip", 0) == 0;
  const std::string beside = join(f.folder, f.open_clip ? kOpenClipConfig : kConfig);
  f.config = !config.empty() ? config : exists(beside) ? beside : "";
  if (exists(join(f.folder, kPreprocessor))) f.preprocessor = join(f.folder, kPreprocessor);
  if (exists(join(f.folder, kInt8WeightsFile))) f.int8 = join(f.folder, kInt8WeightsFile);
  f.name = base_name(folder || base_name(f.weights) == kWeights || f.open_clip ? f.folder : f.weights);
  return f;
}

// The folder's name, for a folder or the weights file a folder is loaded from (model.safetensors, OpenCLIP's
// open_clip_model.safetensors), else the file's stem.
std::string model_name(const std::string& model) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::absolute(fs::path(model), ec).lexically_normal();
  if (p.has_parent_path() && p.filename().empty()) p = p.parent_path();  // a trailing slash
  if (fs::is_directory(p, ec)) return p.filename().string();
  const std::string file = p.filename().string();
  if (file == "model.safetensors" || file == "open_clip_model.safetensors") return p.parent_path().filename().string();
  return p.stem().string();
}

std::vector<std::string> ModelFiles::read_paths() const {
  std::vector<std::string> out = {weights, join(folder, open_clip ? kOpenClipConfig : kConfig),
                                  join(folder, kPreprocessor), join(folder, kInt8WeightsFile)};
  if (!config.empty()) out.push_back(config);
  return out;
}

}  // namespace vit

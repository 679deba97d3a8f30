// Shared pieces of the vit subcommands.
#include "common.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "engine/linear.h"
#include "vit/error.h"

namespace vit::app {

static const char* kDefaultModel = "weights/deit_tiny_patch16_224.fb_in1k";

std::string default_model_path() {
  struct stat st{};
  if (::stat(kDefaultModel, &st) == 0) return kDefaultModel;
  // Installed or run from another folder: the weights/ folder beside the build folder of this binary.
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    std::string dir(exe, size_t(n));
    dir = dir.substr(0, dir.find_last_of('/'));
    const std::string candidate = dir + "/../" + kDefaultModel;
    if (::stat(candidate.c_str(), &st) == 0) return candidate;
  }
  return kDefaultModel;
}

void add_threads_option(CLI::App* cmd, int* threads) {
  cmd->add_option("--threads", *threads, "threads for inference (default: all cores)")->check(CLI::NonNegativeNumber);
}

void add_model_options(CLI::App* cmd, ModelOptions* o) {
  cmd->add_option("--model", o->model,
                  "a .safetensors file or the folder holding model.safetensors and config.json "
                  "(default: weights/deit_tiny_patch16_224.fb_in1k)");
  cmd->add_option("--config", o->config, "config.json (timm or Hugging Face form) overriding the one beside the weights");
  add_img_size_option(cmd, &o->img_size);
  add_threads_option(cmd, &o->threads);
  add_precision_option(cmd, &o->precision);
}

void add_precision_option(CLI::App* cmd, Precision* precision) {
  cmd->add_option_function<std::string>(
         "--precision", [precision](const std::string& s) { *precision = precision_from_name(s); },
         "arithmetic of the linear layers: f32 (as timm), bf16 (CPUs with avx512_bf16) or int8 (default: f32)")
      ->check(CLI::IsMember({"f32", "bf16", "int8"}));
}

void add_img_size_option(CLI::App* cmd, int* img_size) {
  cmd->add_option("--img-size", *img_size,
                  "run at SxS pixels instead of the model's size (position table resampled as timm does)")
      ->check(CLI::Range(int64_t(1), kMaxInputSize));
}

namespace {
std::string model_path(const ModelOptions& o) {
  std::string path = o.model.empty() ? default_model_path() : o.model;
  struct stat st{};
  if (o.model.empty() && ::stat(path.c_str(), &st) != 0)
    throw Error(path, "default model not found; fetch it with weights/get_default_model.sh or pass --model");
  spdlog::debug("loading {}", path);
  return path;
}
}  // namespace

ViT load_model(const ModelOptions& o) {
  set_threads(o.threads);
  return ViT::load(model_path(o), o.config, o.img_size, o.precision);
}

ClassifierOptions classifier_options(const ModelOptions& o) {
  ClassifierOptions co;
  co.config = o.config;
  co.threads = o.threads;
  co.img_size = o.img_size;
  co.precision = o.precision;
  return co;
}

Classifier load_classifier(const ModelOptions& o, const ClassifierOptions& co) { return Classifier(model_path(o), co); }

std::vector<int> parse_batch_list(const std::string& s, const std::string& flag) {
  std::vector<int> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = s.find(',', start);
    const std::string item = s.substr(start, end == std::string::npos ? std::string::npos : end - start);
    size_t used = 0;
    long v = 0;
    try {
      v = std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size())
      throw Error(flag + ": '" + item + "' is not a number (expected a list like 1,8,32)");
    if (v <= 0 || v > kMaxBatch)
      throw Error(flag + ": batch size " + item + " is out of range (1 to " + std::to_string(kMaxBatch) + ")");
    out.push_back(int(v));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

std::string precision_support() {
  const CpuIsa isa = cpu_isa();
  std::string s = "oneDNN runs it as " + isa.name + ": f32, int8 (" +
                  (isa.vnni ? std::string("VNNI, 8-bit weights") : std::string("no VNNI: 7-bit weights")) + ")";
  return s + (isa.bf16 ? ", bf16" : "; bf16 needs avx512_bf16 or AMX");
}

void setup_logging(bool verbose) {
  auto logger = spdlog::stderr_color_mt("vit");
  logger->set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::warn);
}

size_t peak_rss_bytes() {
  struct rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return size_t(ru.ru_maxrss) * 1024;
}

}  // namespace vit::app

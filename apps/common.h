// What the vit subcommands share: model options, loading the model, labels, logging and threads.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "models/vit.h"
#include "vit/vit.h"

namespace vit::app {

// Exit status of every subcommand.
constexpr int kExitOk = 0;           // everything worked
constexpr int kExitSomeFailed = 1;   // some inputs failed; the others were done
constexpr int kExitUsage = 2;        // bad usage, an unusable model, or an output that cannot be created
constexpr int kExitWriteFailed = 3;  // writing an output failed part way (a full disk, an I/O error)
constexpr int kExitFailed = 4;       // the run itself failed (out of memory, an engine error)

// A parsed subcommand: checks what can be checked before any work (flags, model, outputs; a failure
// there is kExitUsage) and returns the work, which returns the exit status.
using Prepare = std::function<std::function<int()>()>;

struct ModelOptions {
  std::string model;   // .safetensors or folder; default: the DeiT-Tiny folder under weights/
  std::string config;  // config.json overriding the one beside the weights
  int threads = 0;     // 0: all cores
  int img_size = 0;    // 0: the model's own input size
  Precision precision = Precision::F32;
};

// A number option parsed here rather than by CLI11, so that mistakes read "--topk: 'three' is not a
// number" and "--topk: 0 is out of range (1 to 100000)"; --help shows its default. names: "-k,--topk".
template <typename T>
CLI::Option* add_number_option(CLI::App* cmd, const std::string& names, T* value, T lo, T hi, const std::string& help);

// --model, --config, --img-size, --threads and, unless the command always runs f32, --precision.
void add_model_options(CLI::App* cmd, ModelOptions* o, bool with_precision = true);
void add_threads_option(CLI::App* cmd, int* threads);
void add_img_size_option(CLI::App* cmd, int* img_size);
void add_precision_option(CLI::App* cmd, Precision* precision);
std::string default_model_path();
ViT load_model(const ModelOptions& o);
// The library's options for these model options; load_classifier fills in the default model's path.
ClassifierOptions classifier_options(const ModelOptions& o);
Classifier load_classifier(const ModelOptions& o, const ClassifierOptions& co);

// Parses "1,2,4" into positive integers; throws vit::Error naming the flag.
std::vector<int> parse_batch_list(const std::string& s, const std::string& flag);

// The output a command is about to write must not be one of its inputs, nor (unless force) an existing
// file that is not a safetensors file: throws vit::Error saying which.
void check_output_target(const std::string& flag, const std::string& path, const std::vector<std::string>& inputs,
                         bool force);

// What this CPU runs natively, as oneDNN sees it: "oneDNN runs it as avx2: f32, int8 (...); bf16 ...".
std::string precision_support();

void setup_logging(bool verbose);
size_t peak_rss_bytes();

}  // namespace vit::app

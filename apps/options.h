// The flags the vit subcommands share (the model, its config, input size, threads, precision, batch
// sizes; numbers whose mistakes read "--topk: 'three' is not a number") and loading the model they name.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "apps/command.h"
#include "vit/threads.h"
#include "vit/vit.h"

namespace vit::app {

// The model a command runs and the library's options for loading it (vit bench without --model: random weights
// of --arch).
struct ModelOptions : LoadOptions {
  std::string model;   // .safetensors or folder; default: the DeiT-Tiny folder under weights/
};

// A number option parsed here rather than by CLI11, so that mistakes read "--topk: 'three' is not a
// number" and "--topk: 0 is out of range (1 to 100000)"; --help shows its default. names: "-k,--topk".
template <typename T>
CLI::Option* add_number_option(CLI::App* cmd, const std::string& names, T* value, T lo, T hi, const std::string& help);

// --model and the flags of the library's model-wide options (vit/load_options.h) every command takes: all but
// --max-patches, --labels, --text-embeddings and --pool, which the commands that take them add (add_load_option), and
// --precision when the command always runs f32.
void add_model_options(CLI::App* cmd, ModelOptions* o, bool with_precision = true);
// The flag of the model-wide option `name` ("labels": --labels) filling its field of *o, with the table's help
// and range.
CLI::Option* add_load_option(CLI::App* cmd, LoadOptions* o, const std::string& name);
// The subcommand `name` of a command that runs a model: its line of help, the model flags above filling
// o->model, and, when it is the one chosen, *prepare set to prepare_fn(*o).
template <class Options, class PrepareFn>
CLI::App* add_model_command(CLI::App& app, const std::string& name, const std::string& help,
                            const std::shared_ptr<Options>& o, PrepareFn prepare_fn, Prepare* prepare,
                            bool with_precision = true) {
  CLI::App* cmd = app.add_subcommand(name, help);
  add_model_options(cmd, &o->model, with_precision);
  cmd->callback([o, prepare_fn, prepare] { *prepare = [o, prepare_fn] { return prepare_fn(*o); }; });
  return cmd;
}
std::string default_model_path();
// The model file or folder the options name: --model, else the default model, which must be there.
std::string model_path(const ModelOptions& o);
// The library's options for these model options; load_classifier fills in the default model's path.
ClassifierOptions classifier_options(const ModelOptions& o);
Classifier load_classifier(const ModelOptions& o, const ClassifierOptions& co);
// classify, eval and explain need a classifier head: a model without one (DINOv2, a SigLIP tower) is
// refused, pointing to vit embed.
void require_head(int64_t classes, const std::string& model_file);

// The files loading the model of these options reads or would read (ModelFiles::read_paths), which no
// output may replace; none when there is no such model (loading it then says why).
std::vector<std::string> model_files_to_keep(const ModelOptions& o);

// An option naming a file, folder or architecture: an empty value is refused at parsing ("--out: an
// empty name names nothing"), never taken for "not given".
CLI::Option* add_name_option(CLI::App* cmd, const std::string& names, std::string* value, const std::string& help);
CLI::Validator non_empty_name();

// -b,--batch: images per forward pass, 1 to kMaxBatch.
void add_batch_option(CLI::App* cmd, int* batch);
// s read as a whole number (std::stol's form, nothing left over) into *v; false for anything else.
bool parse_whole_number(const std::string& s, long* v);
// Parses "1,2,4" into batch sizes; throws vit::Error naming the flag.
std::vector<int> parse_batch_list(const std::string& s, const std::string& flag);

}  // namespace vit::app

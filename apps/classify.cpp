// `vit classify`: images or folders in, top-k labels out (text or JSON lines), optional logits file.
// A printer on vit::Classifier, which decodes each batch on all cores and runs it as one forward pass.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>
#include <nlohmann/json.hpp>

#include "common.h"
#include "inputs.h"
#include "engine/image.h"
#include "engine/safetensors.h"
#include "vit/vit.h"

namespace vit::app {
namespace {

struct ClassifyOptions {
  ModelOptions model;
  std::string labels, save_logits;
  int topk = 5, batch = 8;
  int64_t max_pixels = kDefaultMaxPixels;
  bool json = false, stats = false;
  std::vector<std::string> paths;
};

// Where results go: stdout (text or JSON lines) and the --save-logits file; counts what it was given.
class Output {
 public:
  Output(const ClassifyOptions& o, int64_t classes) : json_(o.json) {
    if (!o.save_logits.empty()) saved_ = std::make_unique<RowWriter>(o.save_logits, classes);
  }
  void error(const std::string& file, const std::string& why) {
    ++failed_;
    if (json_) std::printf("%s\n", nlohmann::json{{"file", file}, {"error", why}}.dump().c_str());
    else std::fprintf(stderr, "error: %s: %s\n", file.c_str(), why.c_str());
  }
  void result(const Result& r) {
    if (!r.error.empty()) return error(r.file, r.error);
    ++classified_;
    if (json_) {
      nlohmann::json t = nlohmann::json::array();
      for (const auto& p : r.top) t.push_back({{"index", p.index}, {"label", p.label}, {"prob", p.prob}});
      std::printf("%s\n", nlohmann::json{{"file", r.file}, {"top", t}}.dump().c_str());
    } else {
      size_t w = 0;
      for (const auto& p : r.top) w = std::max(w, p.label.size());
      std::printf("%s\n", r.file.c_str());
      for (const auto& p : r.top) std::printf("  %-*s  %.4f\n", int(w), p.label.c_str(), double(p.prob));
    }
    if (saved_) {
      saved_->add(r.logits.data());
      saved_files_.push_back(r.file);
    }
  }
  void finish() {
    if (saved_) saved_->finish("logits", {{"files", saved_files_.dump()}});
  }
  size_t classified() const { return classified_; }
  size_t failed() const { return failed_; }

 private:
  bool json_;
  std::unique_ptr<RowWriter> saved_;  // --save-logits: one row per classified image, streamed to disk
  nlohmann::json saved_files_ = nlohmann::json::array();
  size_t classified_ = 0, failed_ = 0;
};

// The inputs a batch at a time: the library decodes, preprocesses and classifies them; inputs known to
// be unusable (from the folder walk) get their error line in their place.
int classify_all(const ClassifyOptions& o, const std::vector<Input>& inputs, bool missing, const Classifier& c,
                 Output& out) {
  const size_t batch = size_t(o.batch);
  Progress progress(inputs.size(), isatty(STDERR_FILENO) && inputs.size() > batch && !o.stats);
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t first = 0; first < inputs.size(); first += batch) {
    const size_t n = std::min(inputs.size() - first, batch);
    std::vector<std::string> paths;
    for (size_t j = first; j < first + n; ++j)
      if (inputs[j].error.empty()) paths.push_back(inputs[j].file);
    const std::vector<Result> results = c.classify(paths, o.topk);
    progress.clear();
    for (size_t j = first, next = 0; j < first + n; ++j) {
      if (!inputs[j].error.empty()) out.error(inputs[j].file, inputs[j].error);
      else out.result(results[next++]);
    }
    std::fflush(stdout);
    progress.update(first + n);
  }
  progress.clear();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string stats = fmt::format(
      "classified {} of {} images in {:.3f} s: {:.1f} img/s end to end (decode, preprocessing and inference; "
      "batch {}, {} threads)",
      out.classified(), inputs.size(), secs, secs > 0 ? out.classified() / secs : 0.0, batch, set_threads(0));
  if (o.stats) std::fprintf(stderr, "%s\n", stats.c_str());
  else spdlog::info("{}", stats);
  if (out.failed() && inputs.size() > 1)
    std::fprintf(stderr, "%zu of %zu images classified, %zu failed\n", out.classified(), inputs.size(), out.failed());
  out.finish();
  if (missing) return kExitUsage;
  return out.failed() ? kExitSomeFailed : kExitOk;
}

// Everything checked before the first image: the paths, the model, the labels, the logits file.
std::function<int()> prepare_classify(ClassifyOptions o) {
  auto missing = std::make_shared<bool>(false);
  auto inputs = std::make_shared<std::vector<Input>>(collect_inputs(o.paths, missing.get()));
  o.batch = std::max(1, std::min<int>(o.batch, int(std::max<size_t>(inputs->size(), 1))));
  ClassifierOptions co = classifier_options(o.model);
  co.labels = o.labels;
  co.batch = o.batch;
  co.max_pixels = o.max_pixels;
  co.keep_logits = !o.save_logits.empty();
  auto classifier = std::make_shared<Classifier>(load_classifier(o.model, co));
  auto out = std::make_shared<Output>(o, classifier->classes());
  return [o, inputs, missing, classifier, out] { return classify_all(o, *inputs, *missing, *classifier, *out); };
}

}  // namespace

void add_classify_command(CLI::App& app, Prepare* prepare) {
  auto o = std::make_shared<ClassifyOptions>();
  CLI::App* cmd = app.add_subcommand("classify", "classify images with a ViT and print the top-k classes");
  add_model_options(cmd, &o->model);
  cmd->add_option("--labels", o->labels, "class names, one per line (default: the checkpoint's, else ImageNet-1k)");
  cmd->add_option("--topk", o->topk, "classes to print per image")->check(CLI::Range(1, 100000));
  cmd->add_option("--batch", o->batch, "images per forward pass")->check(CLI::Range(int64_t(1), kMaxBatch));
  cmd->add_flag("--json", o->json, "one JSON object per line");
  cmd->add_option("--save-logits", o->save_logits, "write the logits of the classified images to a .safetensors file");
  cmd->add_flag("--stats", o->stats, "print end-to-end images/s on stderr");
  cmd->add_option("--max-pixels", o->max_pixels,
                  "refuse images larger than this many pixels, from their header, before decoding")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("PATH", o->paths, "image files or folders (searched recursively for .jpg .jpeg .png .bmp)")
      ->required();
  cmd->callback([o, prepare] { *prepare = [o] { return prepare_classify(*o); }; });
}

}  // namespace vit::app

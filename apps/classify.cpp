// `vit classify`: images or folders in, top-k labels out (text or JSON lines), optional logits file.
// Each batch is decoded and preprocessed on all cores, then run as one forward pass.
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
#include "engine/error.h"
#include "engine/image.h"
#include "engine/preprocess.h"
#include "engine/safetensors.h"
#include "engine/topk.h"

namespace vit::app {
namespace {

namespace fs = std::filesystem;

struct ClassifyOptions {
  ModelOptions model;
  std::string labels, save_logits;
  int topk = 5, batch = 8;
  int64_t max_pixels = kDefaultMaxPixels;
  bool json = false, stats = false;
  std::vector<std::string> paths;
};

struct Input {
  std::string file;
  std::string error;  // set when the path is known to be unusable before decoding
};

bool is_image_name(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".bmp";
}

// Appends dir's image files, sorted, recursing into sub-folders (each real folder once, so symlink
// loops end). Entries named like images that cannot be images (a folder, a broken symlink, a
// folder that cannot be read) become inputs carrying their error, so they get their output line.
void walk_folder(const fs::path& dir, std::set<std::pair<dev_t, ino_t>>* seen, std::vector<Input>* out) {
  struct stat st{};
  if (::stat(dir.c_str(), &st) == 0 && !seen->insert({st.st_dev, st.st_ino}).second) return;
  std::error_code ec;
  std::vector<fs::path> entries;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) entries.push_back(it->path());
  if (ec) {
    out->push_back({dir.string(), "cannot read folder: " + ec.message()});
    return;
  }
  std::sort(entries.begin(), entries.end());
  for (const fs::path& e : entries) {
    const auto status = fs::status(e, ec);
    if (ec) {
      if (is_image_name(e))
        out->push_back({e.string(), fs::is_symlink(fs::symlink_status(e, ec)) ? "broken symbolic link" : ec.message()});
    } else if (fs::is_directory(status)) {
      if (is_image_name(e)) out->push_back({e.string(), "is a directory, not an image"});
      else walk_folder(e, seen, out);
    } else if (is_image_name(e)) {
      out->push_back({e.string(), ""});
    }
  }
}

// PATH arguments in order; a folder contributes its image files, recursively, sorted by name.
// Only names are gathered here: images are read batch by batch as they are classified.
std::vector<Input> collect_inputs(const std::vector<std::string>& paths, bool* missing) {
  std::vector<Input> out;
  for (const auto& p : paths) {
    std::error_code ec;
    const auto st = fs::status(p, ec);
    if (ec || !fs::exists(st)) {
      out.push_back({p, "no such file or directory"});
      *missing = true;
    } else if (fs::is_directory(st)) {
      const size_t before = out.size();
      std::set<std::pair<dev_t, ino_t>> seen;
      walk_folder(p, &seen, &out);
      if (out.size() == before) spdlog::warn("{}: no .jpg, .jpeg, .png or .bmp files in this folder", p);
    } else {
      out.push_back({p, ""});
    }
  }
  return out;
}

// Decodes and preprocesses inputs[first, first + n) on all cores, images in parallel, into the Plan for
// n images; returns each image's error ("" when it is ready). Failed images leave holes, which are
// closed up so the good ones run as one smaller batch (its Plan is returned through `plan`).
// Preprocessing runs between forward passes, not beside them: on 2 cores a concurrent reader (or a
// worker per core) measured slower, as it preempts oneDNN's threads mid-primitive (docs/PERFORMANCE.md).
std::vector<std::string> preprocess_batch(ViT& model, const std::vector<Input>& inputs, size_t first, size_t n,
                                          int64_t max_pixels, ViT::Plan** plan) {
  const PreprocessConfig& pre = model.config().pre;
  const size_t per_image = size_t(model.config().input_floats());
  float* pixels = model.plan(int64_t(n)).input();
  std::vector<std::string> errors(n);
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t j = 0; j < n; ++j) {
    const Input& in = inputs[first + j];
    errors[j] = in.error;
    if (!errors[j].empty()) continue;
    try {
      preprocess(decode_image_file(in.file, max_pixels), pre, pixels + per_image * j);
    } catch (const Error& e) {
      errors[j] = e.problem();
    } catch (const std::exception& e) {
      errors[j] = e.what();
    }
  }
  size_t good = 0;
  for (size_t j = 0; j < n; ++j)
    if (errors[j].empty()) {
      if (good != j) std::memmove(pixels + per_image * good, pixels + per_image * j, per_image * sizeof(float));
      ++good;
    }
  *plan = nullptr;
  if (good == 0) return errors;
  *plan = &model.plan(int64_t(good));
  if ((*plan)->input() != pixels) std::memcpy((*plan)->input(), pixels, per_image * good * sizeof(float));
  return errors;
}

// A one-line progress bar on stderr, drawn only on a terminal.
class Progress {
 public:
  Progress(size_t total, bool enabled) : total_(total), on_(enabled), t0_(std::chrono::steady_clock::now()) {}
  void update(size_t done) {
    if (!on_) return;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    const int width = 30, filled = int(width * done / std::max<size_t>(total_, 1));
    std::fprintf(stderr, "\r[%s%s] %zu/%zu  %.1f img/s ", std::string(size_t(filled), '#').c_str(),
                 std::string(size_t(width - filled), '.').c_str(), done, total_, s > 0 ? double(done) / s : 0.0);
    std::fflush(stderr);
  }
  void clear() {
    if (on_) std::fprintf(stderr, "\r\033[K");
  }

 private:
  size_t total_;
  bool on_;
  std::chrono::steady_clock::time_point t0_;
};

// Where results go: stdout (text or JSON lines) and the --save-logits file; counts what it was given.
class Output {
 public:
  Output(const ClassifyOptions& o, const ViTConfig& cfg)
      : json_(o.json), labels_(resolve_labels(o.labels, cfg)), classes_(cfg.classes),
        k_(int(std::min<int64_t>(o.topk, cfg.classes))) {
    if (!o.save_logits.empty()) saved_ = std::make_unique<RowWriter>(o.save_logits, cfg.classes);
  }
  void error(const std::string& file, const std::string& why) {
    ++failed_;
    if (json_) std::printf("%s\n", nlohmann::json{{"file", file}, {"error", why}}.dump().c_str());
    else std::fprintf(stderr, "error: %s: %s\n", file.c_str(), why.c_str());
  }
  void result(const std::string& file, const float* logits) {
    ++classified_;
    const auto top = top_k(logits, classes_, k_);
    if (json_) {
      nlohmann::json t = nlohmann::json::array();
      for (const auto& s : top) t.push_back({{"index", s.index}, {"label", labels_[size_t(s.index)]}, {"prob", s.prob}});
      std::printf("%s\n", nlohmann::json{{"file", file}, {"top", t}}.dump().c_str());
    } else {
      size_t w = 0;
      for (const auto& s : top) w = std::max(w, labels_[size_t(s.index)].size());
      std::printf("%s\n", file.c_str());
      for (const auto& s : top) std::printf("  %-*s  %.4f\n", int(w), labels_[size_t(s.index)].c_str(), double(s.prob));
    }
    if (saved_) {
      saved_->add(logits);
      saved_files_.push_back(file);
    }
  }
  void finish() {
    if (saved_) saved_->finish("logits", {{"files", saved_files_.dump()}});
  }
  size_t classified() const { return classified_; }
  size_t failed() const { return failed_; }

 private:
  bool json_;
  std::vector<std::string> labels_;
  int64_t classes_;
  int k_;
  std::unique_ptr<RowWriter> saved_;  // --save-logits: one row per classified image, streamed to disk
  nlohmann::json saved_files_ = nlohmann::json::array();
  size_t classified_ = 0, failed_ = 0;
};

int classify_all(const ClassifyOptions& o, const std::vector<Input>& inputs, bool missing, ViT& model, Output& out) {
  const size_t batch = size_t(std::max(1, std::min<int>(o.batch, int(std::max<size_t>(inputs.size(), 1)))));
  Progress progress(inputs.size(), isatty(STDERR_FILENO) && inputs.size() > batch && !o.stats);
  double pre_secs = 0, run_secs = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t first = 0; first < inputs.size(); first += batch) {
    const size_t n = std::min(inputs.size() - first, batch);
    const auto t_pre = std::chrono::steady_clock::now();
    ViT::Plan* plan = nullptr;
    const std::vector<std::string> errors = preprocess_batch(model, inputs, first, n, o.max_pixels, &plan);
    const auto t_run = std::chrono::steady_clock::now();
    const float* logits = plan ? plan->run() : nullptr;
    pre_secs += std::chrono::duration<double>(t_run - t_pre).count();
    run_secs += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_run).count();
    progress.clear();
    int64_t slot = 0;
    for (size_t j = 0; j < n; ++j) {
      if (!errors[j].empty()) out.error(inputs[first + j].file, errors[j]);
      else out.result(inputs[first + j].file, logits + (slot++) * model.config().classes);
    }
    std::fflush(stdout);
    progress.update(first + n);
  }
  progress.clear();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string stats = fmt::format(
      "classified {} of {} images in {:.3f} s: {:.1f} img/s end to end (decode + preprocessing {:.3f} s, "
      "inference {:.3f} s; batch {}, {} threads)",
      out.classified(), inputs.size(), secs, secs > 0 ? out.classified() / secs : 0.0, pre_secs, run_secs, batch,
      set_threads(0));
  if (o.stats) std::fprintf(stderr, "%s\n", stats.c_str());
  else spdlog::info("{}", stats);
  if (out.failed() && inputs.size() > 1)
    std::fprintf(stderr, "%zu of %zu images classified, %zu failed\n", out.classified(), inputs.size(), out.failed());
  out.finish();
  if (missing) return kExitUsage;
  return out.failed() ? kExitSomeFailed : kExitOk;
}

// Everything checked before the first image: the paths, the model, the labels, the logits file.
std::function<int()> prepare_classify(const ClassifyOptions& o) {
  auto missing = std::make_shared<bool>(false);
  auto inputs = std::make_shared<std::vector<Input>>(collect_inputs(o.paths, missing.get()));
  auto model = std::make_shared<ViT>(load_model(o.model));
  auto out = std::make_shared<Output>(o, model->config());
  const int batch = std::max(1, std::min<int>(o.batch, int(std::max<size_t>(inputs->size(), 1))));
  model->plan(batch);
  if (inputs->size() % size_t(batch)) model->plan(int64_t(inputs->size() % size_t(batch)));  // the last batch
  spdlog::debug("model and plans ready");
  return [o, inputs, missing, model, out] { return classify_all(o, *inputs, *missing, *model, *out); };
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

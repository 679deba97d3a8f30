// `vit classify`: images, videos or folders in, top-k labels out (text or JSON lines), optional logits
// file. A printer on vit::Classifier, which decodes each batch on all cores and runs it as one forward
// pass; a video's sampled frames are classified in batches the same way, each with its frame and time.
// Zero-shot labels for CLIP and SigLIP models: a text-embeddings file, or class names whose embeddings the
// model's own text tower makes (--labels-text), as open_clip's zero-shot classifier makes them.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "apps/command.h"
#include "apps/options.h"
#include "engine/io/text.h"
#include "apps/inputs.h"
#include "apps/output.h"
#include "apps/texts.h"
#include "engine/io/safetensors.h"
#include "vit/text.h"
#include "vit/vit.h"

namespace vit::app {
namespace {

struct ClassifyOptions {
  ModelOptions model;
  std::string save_logits;
  std::string labels_text, labels_text_file;  // class names for the model's text tower: "a,b,c"; a file of them
  PromptTemplates templates = PromptTemplates::ImageNet;
  int topk = 5, batch = 8;
  int64_t max_pixels = kDefaultMaxPixels;
  bool json = false, stats = false, force = false, stdin_paths = false, null_separated = false;
  bool exif_transpose = false, videos = false;
  VideoSampling sampling;
  std::vector<std::string> paths;
};

// Where results go: stdout (text or JSON lines) and the --save-logits file; counts what it was given.
class Output {
 public:
  Output(const ClassifyOptions& o, int64_t classes, const std::vector<std::string>& labels)
      : json_(o.json), labels_(labels) {
    if (!o.save_logits.empty()) saved_ = std::make_unique<RowWriter>(o.save_logits, classes);
  }
  void error(const std::string& file, const std::string& why) {
    ++failed_;
    if (json_) std::printf("%s\n", json_line(file, {{"error", why}}).c_str());
    else std::fprintf(stderr, "error: %s: %s\n", printable(file).c_str(), printable(why).c_str());
  }
  // An image's result, or a video frame's (r.frame >= 0): "clip.mp4@120 (4.00 s)" in text, "frame" and
  // "time_s" in JSON and in the logits file's metadata.
  void result(const Result& r) {
    if (!r.error.empty()) return error(r.file, r.error);
    const bool frame = r.frame >= 0;
    ++(frame ? frames_ : classified_);
    if (json_) {
      nlohmann::json t = nlohmann::json::array();
      for (const auto& p : r.top) t.push_back({{"index", p.index}, {"label", p.label}, {"prob", p.prob}});
      nlohmann::json rest = nlohmann::json::object();
      if (frame) rest = {{"frame", r.frame}, {"time_s", std::round(r.time_s * 1e6) / 1e6}};
      rest["top"] = t;
      std::printf("%s\n", json_line(r.file, rest).c_str());
    } else {
      // Labels escaped as file names are (a tab would break the column) and padded by the columns a
      // terminal gives them, so wide (CJK) labels keep the probabilities in line.
      size_t w = 0;
      for (const auto& p : r.top) w = std::max(w, display_width(printable(p.label)));
      if (frame) std::printf("%s@%lld (%.2f s)\n", printable(r.file).c_str(), (long long)r.frame, r.time_s);
      else std::printf("%s\n", printable(r.file).c_str());
      for (const auto& p : r.top) {
        const std::string label = printable(p.label);
        std::printf("  %s%s  %.4f\n", label.c_str(), std::string(w - display_width(label), ' ').c_str(), double(p.prob));
      }
    }
    if (saved_) {
      saved_->add(r.logits.data());
      const char* sep = saved_files_.size() > 1 ? "," : "";
      saved_files_ += sep + json_string(r.file);
      saved_frames_ += sep + (frame ? std::to_string(r.frame) : "null");
      saved_times_ += sep + (frame ? fmt::format("{:.6f}", r.time_s) : "null");
      any_frames_ = any_frames_ || frame;
    }
  }
  void finish() {
    if (!saved_) return;
    // The columns' class names (a zero-shot file's labels, --labels, the model's), then the rows' files.
    std::map<std::string, std::string> meta{{"files", saved_files_ + "]"},
                                            {"labels", nlohmann::json(labels_).dump(-1, ' ', false, kReplace)}};
    if (any_frames_) {  // which rows are video frames: their index and time, null for images
      meta["frames"] = saved_frames_ + "]";
      meta["times_s"] = saved_times_ + "]";
    }
    saved_->finish("logits", output_metadata("classify", meta));
  }
  size_t classified() const { return classified_; }  // images
  size_t frames() const { return frames_; }          // video frames
  size_t failed() const { return failed_; }

 private:
  static constexpr auto kReplace = nlohmann::json::error_handler_t::replace;  // labels not UTF-8: U+FFFD
  bool json_;
  std::vector<std::string> labels_;
  std::unique_ptr<RowWriter> saved_;  // --save-logits: one row per classified image, streamed to disk
  std::string saved_files_ = "[";  // a JSON list, names written as json_string writes them
  std::string saved_frames_ = "[", saved_times_ = "[";
  bool any_frames_ = false;
  size_t classified_ = 0, frames_ = 0, failed_ = 0;
};

// The batches of inputs a run classifies: the PATH arguments' (known up front), or the paths --stdin
// streams in.
class Batches {
 public:
  Batches(std::vector<Input> inputs, size_t batch) : inputs_(std::move(inputs)), batch_(batch) {}
  Batches(char separator, size_t batch) : stream_(std::make_unique<PathStream>(STDIN_FILENO, separator)), batch_(batch) {}
  bool next(std::vector<Input>* out) {
    if (stream_) return stream_->next(batch_, out);
    out->assign(inputs_.begin() + long(std::min(first_, inputs_.size())),
                inputs_.begin() + long(std::min(first_ + batch_, inputs_.size())));
    first_ += batch_;
    return !out->empty();
  }
  size_t known_total() const { return stream_ ? 0 : inputs_.size(); }  // 0: unknown

 private:
  std::vector<Input> inputs_;
  std::unique_ptr<PathStream> stream_;
  size_t batch_, first_ = 0;
};

// Each batch: the library decodes, preprocesses and classifies it; inputs known to be unusable (from
// the folder walk) get their error line in their place; results are flushed batch by batch.
int classify_all(const ClassifyOptions& o, Batches& batches, const Classifier& c, Output& out) {
  const size_t total = batches.known_total();
  Progress progress(total, isatty(STDERR_FILENO) && total > size_t(o.batch) && !o.stats);
  const auto t0 = std::chrono::steady_clock::now();
  size_t seen = 0;
  for (std::vector<Input> inputs; batches.next(&inputs);) {
    std::vector<std::string> paths;
    for (const Input& in : inputs)
      if (in.error.empty() && !is_video_name(in.file)) paths.push_back(in.file);
    const std::vector<Result> results = c.classify(paths, o.topk);
    progress.clear();
    size_t next = 0;
    for (const Input& in : inputs) {
      if (!in.error.empty()) {
        out.error(in.file, in.error);
      } else if (is_video_name(in.file)) {
        c.classify_video(in.file, o.sampling, [&](const std::vector<Result>& frames) {
          progress.clear();
          for (const Result& r : frames) out.result(r);
          check_stdout();
        }, o.topk);
      } else {
        out.result(results[next++]);
      }
    }
    check_stdout();
    seen += inputs.size();
    progress.update(seen);
  }
  progress.clear();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const size_t done = out.classified() + out.frames();
  const std::string what = out.frames() ? fmt::format("{} images and {} video frames (from {} inputs)", out.classified(),
                                                      out.frames(), seen)
                                        : fmt::format("{} of {} images", out.classified(), seen);
  const std::string stats = fmt::format(
      "classified {} in {:.3f} s: {:.1f} img/s end to end (decode, preprocessing and inference; batch {}, {} threads)",
      what, secs, secs > 0 ? done / secs : 0.0, o.batch, set_threads(0));
  if (o.stats) std::fprintf(stderr, "%s\n", stats.c_str());
  else spdlog::info("{}", stats);
  if (out.failed() && seen > 1) {
    if (out.frames())
      std::fprintf(stderr, "%zu images and %zu video frames classified, %zu failed\n", out.classified(), out.frames(),
                   out.failed());
    else
      std::fprintf(stderr, "%zu of %zu images classified, %zu failed\n", out.classified(), seen, out.failed());
  }
  out.finish();
  return out.failed() ? kExitSomeFailed : kExitOk;
}

// The --templates words, each to the library's prompt templates: the one place the command reads them.
const std::map<std::string, PromptTemplates> kTemplateWords = {{"imagenet", PromptTemplates::ImageNet},
                                                               {"simple", PromptTemplates::Simple}};

// --labels-text and --labels-text-file: the class names, each once, none empty.
std::vector<std::string> class_names(const ClassifyOptions& o) {
  std::vector<TextInput> names;
  if (!o.labels_text.empty()) {
    size_t start = 0, i = 1;
    for (;; ++i) {
      const size_t comma = o.labels_text.find(',', start);
      names.push_back({"--labels-text name " + std::to_string(i), o.labels_text.substr(start, comma - start)});
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  if (!o.labels_text_file.empty())
    for (TextInput& t : read_text_lines(o.labels_text_file, "--labels-text-file")) names.push_back(std::move(t));
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (TextInput& n : names) {
    const size_t a = n.text.find_first_not_of(" \t"), b = n.text.find_last_not_of(" \t");
    n.text = a == std::string::npos ? "" : n.text.substr(a, b - a + 1);
    if (n.text.empty()) throw Error(n.name + ": an empty class name");
    if (!seen.insert(n.text).second) throw Error(n.name + ": the class '" + printable(n.text) + "' is there twice: each class once");
    out.push_back(n.text);
  }
  if (out.empty()) throw Error("--labels-text-file " + printable(o.labels_text_file) + ": no class names in it");
  return out;
}

// The class names' embeddings from the model's own text tower (open_clip's build_zero_shot_classifier), with its
// logit scale and bias: the zero-shot classes the Classifier takes.
std::shared_ptr<const ClassEmbeddings> zero_shot_classes(const ClassifyOptions& o) {
  const std::vector<std::string> names = class_names(o);
  TextOptions to;
  to.precision = o.model.precision;
  to.threads = o.model.threads;
  const TextModel text(model_path(o.model), to);
  return std::make_shared<const ClassEmbeddings>(text.zero_shot_classes(names, o.templates));
}

// Everything checked before the first image: the paths, the model, the labels, the logits file.
std::function<int()> prepare_classify(ClassifyOptions o) {
  if (o.stdin_paths && !o.paths.empty()) throw Error("--stdin reads the paths from standard input: give no PATH");
  if (!o.stdin_paths && o.paths.empty()) throw Error("no PATH: give image files or folders, or --stdin");
  if (o.null_separated && !o.stdin_paths) throw Error("--null (-0) goes with --stdin");
  std::vector<Input> inputs = collect_inputs(o.paths, o.videos);
  if (!o.save_logits.empty()) {
    KeepFiles keep{model_files_to_keep(o.model), {o.model.labels, o.model.text_embeddings, o.labels_text_file}};
    for (const Input& in : inputs) keep.inputs.push_back(in.file);
    check_output_target(OutputKind::Safetensors, "--save-logits", o.save_logits, keep, o.force);
  }
  // Fewer images than a batch: plans for just those. A video's frames fill whole batches.
  const bool videos = std::any_of(inputs.begin(), inputs.end(), [](const Input& in) { return is_video_name(in.file); });
  if (!o.stdin_paths && !videos) o.batch = std::max(1, std::min<int>(o.batch, int(std::max<size_t>(inputs.size(), 1))));
  ClassifierOptions co = classifier_options(o.model);
  co.batch = o.batch;
  co.max_pixels = o.max_pixels;
  co.exif_transpose = o.exif_transpose;
  co.keep_logits = !o.save_logits.empty();
  if (!o.labels_text.empty() || !o.labels_text_file.empty()) co.class_embeddings = zero_shot_classes(o);
  auto classifier = std::make_shared<Classifier>(load_classifier(o.model, co));
  require_head(classifier->classes(), classifier->info().file);
  auto out = std::make_shared<Output>(o, classifier->classes(), classifier->labels());
  auto batches = o.stdin_paths ? std::make_shared<Batches>(o.null_separated ? '\0' : '\n', size_t(o.batch))
                               : std::make_shared<Batches>(std::move(inputs), size_t(o.batch));
  return [o, batches, classifier, out] { return classify_all(o, *batches, *classifier, *out); };
}

}  // namespace

void add_classify_command(CLI::App& app, Prepare* prepare) {
  auto o = std::make_shared<ClassifyOptions>();
  CLI::App* cmd = add_model_command(app, "classify", "classify images with a ViT and print the top-k classes", o,
                                    prepare_classify, prepare);
  add_load_option(cmd, &o->model, "max_patches");
  CLI::Option* labels = add_load_option(cmd, &o->model, "labels");
  add_load_option(cmd, &o->model, "text_embeddings")->excludes(labels);
  CLI::Option* names = cmd->add_option("--labels-text", o->labels_text,
                  "zero-shot labels for a CLIP or SigLIP model: class names, comma-separated (\"tench,goldfish\"), "
                  "embedded by the model's own text tower in each prompt of --templates, as open_clip's zero-shot "
                  "classifier does");
  CLI::Option* names_file = add_name_option(cmd, "--labels-text-file", &o->labels_text_file,
                                            "the same with the class names in a UTF-8 file, one per line");
  for (CLI::Option* opt : {names, names_file}) opt->excludes(labels)->excludes("--text-embeddings");
  cmd->add_option_function<std::string>("--templates", [o](const std::string& w) { o->templates = kTemplateWords.at(w); },
                                        "the prompts of --labels-text: imagenet (CLIP's 80, \"a bad photo of a {}.\", ...; "
                                        "the default) or simple (the 7 CLIP's paper kept)")
      ->check(CLI::IsMember(kTemplateWords));
  add_number_option(cmd, "-k,--topk", &o->topk, 1, 100000, "classes to print per image");
  add_batch_option(cmd, &o->batch);
  cmd->add_flag("--json", o->json, "one JSON object per line");
  add_name_option(cmd, "--save-logits", &o->save_logits,
                  "write the logits of the classified images to a .safetensors file (its metadata: the files of the "
                  "rows, the labels of the columns)");
  cmd->add_flag("--stats", o->stats, "print end-to-end images/s on stderr");
  add_number_option(cmd, "--max-pixels", &o->max_pixels, int64_t(1), int64_t(1) << 40,
                    "refuse images larger than this many pixels, from their header, before decoding");
  cmd->add_flag("--force", o->force, "let --save-logits replace an input or a file vit did not write (never the model's "
                                     "own files)");
  cmd->add_flag("--stdin", o->stdin_paths,
                "read the paths from standard input, one per line, and write each batch's results as it is done");
  cmd->add_flag("-0,--null", o->null_separated, "with --stdin: paths end with NUL, as find -print0 writes them");
  cmd->add_flag("--exif-transpose", o->exif_transpose,
                "turn images as their EXIF orientation says, as PIL's ImageOps.exif_transpose does (timm does not, so "
                "models were trained without it)");
  CLI::Option* every = add_number_option(cmd, "--every", &o->sampling.every, 1, 1 << 30,
                                         "videos: classify every Nth frame (default: one frame per second of video)");
  every->default_str("");  // unset means --fps's sampling, not a frame count of 0, which is out of range
  add_number_option(cmd, "--fps", &o->sampling.fps, 0.001, 1000.0,
                    "videos: classify this many frames per second of video (default 1)")
      ->excludes(every);
  cmd->add_flag("--videos", o->videos, "also take videos from folders (videos named as PATH always are)");
  cmd->add_option("PATH", o->paths,
                  "images (" + image_extensions() + "), videos (" + video_extensions() +
                      ") or folders, searched recursively for images (and videos with --videos)");
}

}  // namespace vit::app

// `vit eval`: top-1 and top-5 accuracy of a model on labelled photos, as timm's validate.py computes
// them; with --reference f32 also the agreement of this precision with f32 on the same photos (top-1
// agreement, largest and mean |logit difference|). Photos that fail are counted and listed, never fatal.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>

#include "apps/command.h"
#include "apps/options.h"
#include "engine/io/text.h"
#include "apps/inputs.h"
#include "apps/labels_csv.h"
#include "apps/output.h"
#include "vit/imagenet_classes.h"

namespace vit::app {
namespace {

struct EvalOptions {
  ModelOptions model;
  std::string labels_csv;
  std::optional<Precision> reference;  // --reference: also run at this precision and compare
  int batch = 8;
  bool json = false;
  std::vector<std::string> paths;
};

// Where each photo's class comes from, decided once for the model: --labels-csv (file,index records,
// labels_csv.h; the file as given or its name alone) for any classifier; else, for a model of ImageNet-1k's
// 1000 classes (a head of 1000 is taken for ImageNet-1k's, as the labels without names of their own are), the
// ImageNet synset id at the start of its file name or as one of its folders' names; else,
// for a model whose classes have names of their own, the nearest of its folders named as one of them
// (torchvision's ImageFolder layout, photos/<label>/...). A model with none of these is refused before any
// work: nothing in a photo's name can say which of its unnamed classes it is.
enum class TruthFrom { LabelsCsv, ImageNetSynsets, LabelFolders };

class Truth {
 public:
  Truth(const std::string& csv, const std::string& model, const std::vector<std::string>& labels) {
    const int64_t classes = int64_t(labels.size());
    if (!csv.empty()) {
      from_ = TruthFrom::LabelsCsv;
      by_file_ = read_labels_csv(csv, classes);
    } else if (classes == 1000) {
      from_ = TruthFrom::ImageNetSynsets;
      for (int i = 0; i < 1000; ++i) by_name_[kImageNetSynsets[i]] = i;
    } else if (has_own_names(labels)) {
      from_ = TruthFrom::LabelFolders;
      for (int i = 0; i < int(classes); ++i)
        if (!by_name_.emplace(labels[size_t(i)], i).second) by_name_[labels[size_t(i)]] = kTwoClasses;
      examples_ = labels[0] + (classes > 1 ? ", " + labels[1] : "") + (classes > 2 ? ", ..." : "");
    } else {
      throw Error(model, "its " + std::to_string(classes) + " classes are not ImageNet-1k's and have no names "
                         "(class_0 to class_" + std::to_string(classes - 1) + "), so no file or folder name can say "
                         "a photo's class: give each photo's class index with --labels-csv");
    }
  }
  // The class index, or -1 with *why set.
  int of(const std::string& file, std::string* why) const {
    if (from_ == TruthFrom::LabelsCsv) {
      auto it = by_file_.find(file);
      if (it == by_file_.end()) it = by_file_.find(std::filesystem::path(file).filename().string());
      if (it != by_file_.end()) return it->second;
      *why = "not in the --labels-csv file";
      return -1;
    }
    static const std::regex synset(R"(^(n\d{8})(?:[_.\-]|$))");
    const std::filesystem::path p(file);
    std::vector<std::string> names;
    if (from_ == TruthFrom::ImageNetSynsets) names.push_back(p.filename().string());
    for (auto dir = p.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path())
      names.push_back(dir.filename().string());
    std::string other;  // a synset that is not among ImageNet-1k's
    for (const std::string& n : names) {
      std::string key = n;
      if (from_ == TruthFrom::ImageNetSynsets) {
        std::smatch m;
        if (!std::regex_search(n, m, synset)) continue;
        key = m[1];
      }
      const auto it = by_name_.find(key);
      if (it == by_name_.end()) {
        if (from_ == TruthFrom::ImageNetSynsets && other.empty()) other = key;
        continue;
      }
      if (it->second != kTwoClasses) return it->second;
      *why = "its folder " + n + " names more than one of the model's classes";
      return -1;
    }
    if (!other.empty()) *why = "its synset " + other + " is not one of ImageNet-1k's 1000 classes";
    else if (from_ == TruthFrom::ImageNetSynsets) *why = "no ImageNet synset id (n01440764...) in its name or folders, and no --labels-csv";
    else *why = "no folder named as one of the model's classes (" + examples_ + "), and no --labels-csv";
    return -1;
  }

 private:
  static constexpr int kTwoClasses = -2;  // a label two classes share
  // Whether the labels are the model's own, not the class_<i> that stand in for none.
  static bool has_own_names(const std::vector<std::string>& labels) {
    for (size_t i = 0; i < labels.size(); ++i)
      if (labels[i] != "class_" + std::to_string(i)) return true;
    return false;
  }
  TruthFrom from_;
  std::map<std::string, int> by_name_, by_file_;  // synset or label -> class; --labels-csv's file -> class
  std::string examples_;                           // the first labels, for the error
};

struct Tally {
  size_t images = 0, top1 = 0, top5 = 0, agree = 0;
  double max_diff = 0, sum_diff = 0;
  int64_t diffs = 0;
  std::vector<std::pair<std::string, std::string>> failures;  // file, why
};

void score(const Result& r, int truth, const Result* ref, Tally* t) {
  ++t->images;
  t->top1 += r.top[0].index == truth;
  for (size_t k = 0; k < r.top.size() && k < 5; ++k) t->top5 += r.top[k].index == truth;
  if (!ref) return;
  t->agree += r.top[0].index == ref->top[0].index;
  for (size_t c = 0; c < r.logits.size(); ++c) {
    const double d = std::fabs(double(r.logits[c]) - double(ref->logits[c]));
    t->max_diff = std::max(t->max_diff, d);
    t->sum_diff += d;
    ++t->diffs;
  }
}

void report(const EvalOptions& o, const Classifier& c, const Tally& t, size_t total) {
  const double n = double(std::max<size_t>(t.images, 1));
  const bool ref = o.reference.has_value();
  const std::string precision = c.info().precision;
  if (o.json) {
    nlohmann::json j{{"images", t.images}, {"top1", t.top1 / n}, {"top5", t.top5 / n}, {"precision", precision},
                     {"agreement", nullptr}, {"max_abs_logit_diff", nullptr}, {"mean_abs_logit_diff", nullptr},
                     {"failed", t.failures.size()}, {"failures", nlohmann::json::array()}};
    if (ref) {
      j["agreement"] = t.agree / n;
      j["max_abs_logit_diff"] = t.max_diff;
      j["mean_abs_logit_diff"] = t.diffs ? t.sum_diff / double(t.diffs) : 0.0;
    }
    std::string failures;
    for (const auto& [file, why] : t.failures) failures += (failures.empty() ? "" : ",") + json_line(file, {{"error", why}});
    j.erase("failures");
    const std::string body = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::printf("%s,\"failures\":[%s]}\n", body.substr(0, body.size() - 1).c_str(), failures.c_str());
    return;
  }
  std::printf("%s, %s: %zu of %zu images evaluated\n", c.info().file.c_str(), precision.c_str(), t.images, total);
  std::printf("  top-1 %.4f (%zu)   top-5 %.4f (%zu)\n", t.top1 / n, t.top1, t.top5 / n, t.top5);
  if (ref)
    std::printf("  against %s: top-1 agreement %.4f (%zu of %zu), |logit difference| max %.4g, mean %.4g\n",
                precision_name(*o.reference), t.agree / n, t.agree, t.images, t.max_diff,
                t.diffs ? t.sum_diff / double(t.diffs) : 0.0);
  for (const auto& [file, why] : t.failures)
    std::fprintf(stderr, "error: %s: %s\n", printable(file).c_str(), printable(why).c_str());
  if (!t.failures.empty()) std::fprintf(stderr, "%zu of %zu images failed\n", t.failures.size(), total);
}

int run_eval(const EvalOptions& o, const std::vector<Input>& inputs, const Classifier& c, const Classifier* ref,
             const Truth& truth) {
  Tally t;
  Progress progress(inputs.size(), isatty(STDERR_FILENO) && inputs.size() > size_t(o.batch));
  for (size_t first = 0; first < inputs.size(); first += size_t(o.batch)) {
    const size_t end = std::min(inputs.size(), first + size_t(o.batch));
    std::vector<std::string> paths;
    std::vector<int> classes;
    for (size_t j = first; j < end; ++j) {
      std::string why = inputs[j].error;
      const int k = why.empty() ? truth.of(inputs[j].file, &why) : -1;
      if (!why.empty()) {
        t.failures.emplace_back(inputs[j].file, why);
        continue;
      }
      paths.push_back(inputs[j].file);
      classes.push_back(k);
    }
    const std::vector<Result> results = c.classify(paths, 5);
    const std::vector<Result> refs = ref ? ref->classify(paths, 5) : std::vector<Result>();
    for (size_t j = 0; j < results.size(); ++j) {
      if (!results[j].error.empty()) t.failures.emplace_back(results[j].file, results[j].error);
      else score(results[j], classes[j], ref ? &refs[j] : nullptr, &t);
    }
    progress.update(end);
  }
  progress.clear();
  report(o, c, t, inputs.size());
  return t.failures.empty() ? kExitOk : kExitSomeFailed;
}

std::function<int()> prepare_eval(const EvalOptions& o) {
  auto inputs = std::make_shared<std::vector<Input>>(collect_inputs(o.paths));
  ClassifierOptions co = classifier_options(o.model);
  co.batch = o.batch;
  co.keep_logits = o.reference.has_value();
  auto c = std::make_shared<Classifier>(load_classifier(o.model, co));
  require_head(c->classes(), c->info().file);
  auto truth = std::make_shared<Truth>(o.labels_csv, c->info().file, c->labels());
  std::shared_ptr<Classifier> ref;
  if (o.reference) {
    co.precision = *o.reference;
    ref = std::make_shared<Classifier>(load_classifier(o.model, co));
  }
  return [o, inputs, c, ref, truth] { return run_eval(o, *inputs, *c, ref.get(), *truth); };
}

}  // namespace

void add_eval_command(CLI::App& app, Prepare* prepare) {
  auto o = std::make_shared<EvalOptions>();
  CLI::App* cmd = add_model_command(app, "eval", "top-1 / top-5 accuracy on labelled photos (and agreement with f32)",
                                    o, prepare_eval, prepare);
  add_load_option(cmd, &o->model, "max_patches");
  cmd->add_option("--labels-csv", o->labels_csv,
                  "CSV of file,index records, quoted as spreadsheets write them (default: for a model of ImageNet-1k's "
                  "1000 classes, the synset id at the start of each file name or in its folders; for a model whose "
                  "classes have names, the nearest folder named as one of them)");
  cmd->add_option_function<std::string>(
         "--reference",
         [o](const std::string& s) {
           if (s != "f32") throw CLI::ValidationError("--reference", "'" + s + "' is not f32 (the only reference precision)");
           o->reference = Precision::F32;
         },
         "also run this precision (f32) and report the agreement with it")
      ->type_name("NAME");
  add_batch_option(cmd, &o->batch);
  cmd->add_flag("--json", o->json, "one JSON object: images, top1, top5, agreement, max/mean |logit difference|");
  cmd->add_option("PATH", o->paths, "image files or folders (searched recursively for " + image_extensions() + ")")
      ->required();
}

}  // namespace vit::app

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

// Where each photo's class comes from: --labels-csv (file,index records, labels_csv.h; the file as given
// or its name alone), else an ImageNet synset id at the start of its file name or as one of its folders' names.
class Truth {
 public:
  Truth(const std::string& csv, int64_t classes) : classes_(classes) {
    for (int i = 0; i < 1000; ++i) synsets_[kImageNetSynsets[i]] = i;
    if (!csv.empty()) by_file_ = read_labels_csv(csv, classes);
  }
  // The class index, or -1 with *why set.
  int of(const std::string& file, std::string* why) const {
    if (!by_file_.empty()) {
      auto it = by_file_.find(file);
      if (it == by_file_.end()) it = by_file_.find(std::filesystem::path(file).filename().string());
      if (it != by_file_.end()) return it->second;
      *why = "not in the --labels-csv file";
      return -1;
    }
    static const std::regex synset(R"(^(n\d{8})(?:[_.\-]|$))");
    const std::filesystem::path p(file);
    std::vector<std::string> names = {p.filename().string()};
    for (auto dir = p.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path())
      names.push_back(dir.filename().string());
    for (const std::string& n : names) {
      std::smatch m;
      if (!std::regex_search(n, m, synset)) continue;
      const auto it = synsets_.find(m[1]);
      if (it != synsets_.end() && it->second < classes_) return it->second;
    }
    *why = "no ImageNet synset id (n01440764...) in its name or folders, and no --labels-csv";
    return -1;
  }

 private:
  int64_t classes_;
  std::map<std::string, int> synsets_, by_file_;
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
  std::shared_ptr<Classifier> ref;
  if (o.reference) {
    co.precision = *o.reference;
    ref = std::make_shared<Classifier>(load_classifier(o.model, co));
  }
  auto truth = std::make_shared<Truth>(o.labels_csv, c->classes());
  return [o, inputs, c, ref, truth] { return run_eval(o, *inputs, *c, ref.get(), *truth); };
}

}  // namespace

void add_eval_command(CLI::App& app, Prepare* prepare) {
  auto o = std::make_shared<EvalOptions>();
  CLI::App* cmd = add_model_command(app, "eval", "top-1 / top-5 accuracy on labelled photos (and agreement with f32)",
                                    o, prepare_eval, prepare);
  add_max_patches_option(cmd, &o->model.max_patches);
  cmd->add_option("--labels-csv", o->labels_csv,
                  "CSV of file,index records, quoted as spreadsheets write them (default: the ImageNet synset id at the "
                  "start of each file name or in its folders)");
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

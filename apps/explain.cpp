// `vit explain`: what the model looked at. Per image, its top-1 class and a picture of attention rollout
// (or of the last block's class-token attention) over the photo, optionally one panel per head and the
// maps themselves in a .safetensors file: vit::Explainer's (vit/explain.h), written here.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "apps/command.h"
#include "apps/inputs.h"
#include "apps/options.h"
#include "apps/output.h"
#include "engine/io/files.h"
#include "engine/io/safetensors.h"
#include "engine/io/text.h"
#include "vit/error.h"
#include "vit/explain.h"

namespace vit::app {
namespace {

namespace fs = std::filesystem;

struct ExplainArgs {
  ModelOptions model;
  ExplainOptions explain;  // method, picture size, heads, max pixels, EXIF; what is loaded from `model`
  std::string out = ".", save_attention;
  bool json = false, force = false;
  std::vector<std::string> paths;
};

// Picture names: <stem>.attention.png, and for a stem met before (in input order) <stem>-2, <stem>-3, ...
// the first free one, so no picture overwrites another of the same run.
std::vector<std::string> picture_stems(const std::vector<Input>& inputs) {
  std::set<std::string> used;
  std::vector<std::string> out;
  for (const Input& in : inputs) {
    std::string stem = fs::path(in.file).stem().string();
    if (stem.empty()) stem = "image";
    std::string name = stem;
    for (int k = 2; !used.insert(name).second; ++k) name = stem + "-" + std::to_string(k);
    out.push_back(name);
  }
  return out;
}

constexpr const char* kAttentionPicture = ".attention.png";
constexpr const char* kHeadsPicture = ".heads.png";
std::string picture_path(const std::string& folder, const std::string& stem, const char* kind) {
  return (fs::path(folder) / (stem + kind)).string();
}

// A picture's bytes into a file, replaced whole.
void write_file(const std::string& path, const std::string& bytes) {
  OutputFile out(path);
  out.write(bytes.data(), bytes.size());
  out.commit();
}

class ExplainRun {
 public:
  ExplainRun(const ExplainArgs& o, Explainer explainer) : o_(o), explainer_(std::move(explainer)) {}

  int run(const std::vector<Input>& inputs) {
    const std::vector<std::string> stems = picture_stems(inputs);
    size_t next = 0;
    explainer_.explain(inputs, [&](std::vector<Explanation>& batch) {
      for (Explanation& e : batch) {
        const std::string& stem = stems[next++];
        if (!e.error.empty()) report_error(e.file, e.error);
        else report(write_pictures(stem, e), e);
      }
      check_stdout();
    });
    if (failed_ && inputs.size() > 1)
      std::fprintf(stderr, "%zu of %zu images explained, %zu failed\n", explained_, inputs.size(), failed_);
    if (!o_.save_attention.empty()) save_attention();
    return failed_ ? kExitSomeFailed : kExitOk;
  }

 private:
  struct Written {
    std::string picture, heads_picture;
  };

  Written write_pictures(const std::string& stem, const Explanation& e) const {
    Written w;
    w.picture = picture_path(o_.out, stem, kAttentionPicture);
    write_file(w.picture, e.picture);
    if (o_.explain.heads) {
      w.heads_picture = picture_path(o_.out, stem, kHeadsPicture);
      write_file(w.heads_picture, e.heads_picture);
    }
    return w;
  }

  void report_error(const std::string& file, const std::string& why) {
    ++failed_;
    if (o_.json) std::printf("%s\n", json_line(file, {{"error", why}}).c_str());
    else std::fprintf(stderr, "error: %s: %s\n", printable(file).c_str(), printable(why).c_str());
  }

  void report(const Written& w, const Explanation& e) {
    ++explained_;
    if (o_.json) {
      nlohmann::json j{{"top", {{{"index", e.top.index}, {"label", e.top.label}, {"prob", e.top.prob}}}},
                       {"attention", w.picture}};
      if (o_.explain.heads) j["heads"] = w.heads_picture;
      std::printf("%s\n", json_line(e.file, j).c_str());
    } else {
      std::printf("%s\n  %s  %.4f\n  attention: %s\n", printable(e.file).c_str(), printable(e.top.label).c_str(),
                  double(e.top.prob), printable(w.picture).c_str());
      if (o_.explain.heads) std::printf("  heads: %s\n", printable(w.heads_picture).c_str());
    }
    if (!o_.save_attention.empty()) {
      rollouts_.insert(rollouts_.end(), e.rollout.begin(), e.rollout.end());
      lasts_.insert(lasts_.end(), e.last.begin(), e.last.end());
      logits_.insert(logits_.end(), e.logits.begin(), e.logits.end());
      grids_.emplace_back(e.grid_rows, e.grid_cols);
      files_.push_back(e.file);
    }
  }

  // One tensor of each for all images over the model's square grid; a NaFlex model's images, each over its
  // own grid, one of each per image: rollout.<i>, last_cls.<i>.
  void save_attention() {
    const int64_t n = int64_t(files_.size()), gh = explainer_.grid_h(), gw = explainer_.grid_w(), H = explainer_.heads();
    std::vector<TensorToWrite> tensors;
    if (gh > 0) {
      tensors.push_back({"rollout", {n, gh, gw}, rollouts_.data()});
      tensors.push_back({"last_cls", {n, H, gh, gw}, lasts_.data()});
    } else {
      size_t at = 0;
      for (int64_t i = 0; i < n; ++i) {
        const auto [rows, cols] = grids_[size_t(i)];
        tensors.push_back({"rollout." + std::to_string(i), {rows, cols}, rollouts_.data() + at});
        tensors.push_back({"last_cls." + std::to_string(i), {H, rows, cols}, lasts_.data() + at * size_t(H)});
        at += size_t(rows * cols);
      }
    }
    tensors.push_back({"logits", {n, explainer_.classes()}, logits_.data()});
    try {
      write_safetensors(o_.save_attention, tensors, output_metadata("explain", {{"files", files_.dump()}}));
    } catch (const WriteError&) {
      throw;
    } catch (const Error& e) {
      throw WriteError(e.what());
    }
  }

  const ExplainArgs o_;  // a copy: the prepared run outlives the options it was given
  Explainer explainer_;
  size_t explained_ = 0, failed_ = 0;
  std::vector<float> rollouts_, lasts_, logits_;  // --save-attention, one row per image explained
  std::vector<std::pair<int64_t, int64_t>> grids_;  // and each one's grid, rows x cols
  nlohmann::json files_ = nlohmann::json::array();
};

// Everything checked before the first image: the paths, the output folder, the attention file, the
// model and its labels.
std::function<int()> prepare_explain(const ExplainArgs& o) {
  auto inputs = std::make_shared<std::vector<Input>>(collect_inputs(o.paths));
  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (!fs::is_directory(o.out)) throw Error(o.out, "cannot create the output folder" + (ec ? ": " + ec.message() : ""));
  KeepFiles keep{model_files_to_keep(o.model), {o.model.labels}};
  for (const Input& in : *inputs) keep.inputs.push_back(in.file);
  if (!o.save_attention.empty())
    check_output_target(OutputKind::Safetensors, "--save-attention", o.save_attention, keep, o.force);
  // Each picture may replace a picture vit explain drew; an input or another file only with --force.
  for (const std::string& stem : picture_stems(*inputs)) {
    check_output_target(OutputKind::Png, "--out", picture_path(o.out, stem, kAttentionPicture), keep, o.force);
    if (o.explain.heads)
      check_output_target(OutputKind::Png, "--out", picture_path(o.out, stem, kHeadsPicture), keep, o.force);
  }
  ExplainOptions eo = o.explain;
  static_cast<LoadOptions&>(eo) = o.model;  // f32: explain takes no --precision
  eo.picture_software = kPngSoftware;  // how a later run knows the pictures it may replace
  Explainer explainer(model_path(o.model), eo);
  require_head(explainer.classes(), explainer.info().file);
  auto run = std::make_shared<ExplainRun>(o, std::move(explainer));
  return [inputs, run] { return run->run(*inputs); };
}

}  // namespace

void add_explain_command(CLI::App& app, Prepare* prepare) {
  auto o = std::make_shared<ExplainArgs>();
  CLI::App* cmd = add_model_command(
      app, "explain",
      "show what the model looked at: attention rollout over each photo, as DIR/<stem>.attention.png "
      "(f32, whatever --precision other commands use). Models without a class token explain with the mean "
      "of all tokens' attention rows instead of the class token's row",
      o, prepare_explain, prepare, false);
  add_load_option(cmd, &o->model, "max_patches");
  add_name_option(cmd, "--out", &o->out, "folder for the pictures, created if missing; a stem met twice gets -2, -3, ...")
      ->capture_default_str();
  cmd->add_option_function<std::string>(
         "--method", [o](const std::string& s) { o->explain.method = s == "last" ? ExplainMethod::Last : ExplainMethod::Rollout; },
         "rollout: attention rolled out through all blocks (Abnar & Zuidema); last: the last block's "
         "class-token attention, averaged over heads")
      ->check(CLI::IsMember({"rollout", "last"}))
      ->type_name("NAME")
      ->default_str("rollout");
  cmd->add_flag("--heads", o->explain.heads, "also DIR/<stem>.heads.png: one panel per head of the last block");
  add_name_option(cmd, "--save-attention", &o->save_attention,
                  "write rollout [N,gh,gw], last_cls [N,H,gh,gw] and logits [N,C] of the explained images to a "
                  ".safetensors file; a NaFlex model's images, each over its own grid, as rollout.<i> [gh,gw] and "
                  "last_cls.<i> [H,gh,gw]");
  cmd->add_option("--size", o->explain.picture_size, "longer side of the pictures at most")->check(CLI::Range(kMinPictureSize, kMaxPictureSize))->capture_default_str();
  add_load_option(cmd, &o->model, "labels");
  cmd->add_flag("--json", o->json, "one JSON object per line");
  cmd->add_flag("--force", o->force, "let the pictures and --save-attention replace an input or a file vit did not "
                                     "write (never the model's own files)");
  cmd->add_option("--max-pixels", o->explain.max_pixels, "refuse images larger than this many pixels, before decoding")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--exif-transpose", o->explain.exif_transpose,
                "turn images as their EXIF orientation says, as PIL's ImageOps.exif_transpose does (timm does not)");
  cmd->add_option("PATH", o->paths, "image files or folders (searched recursively for " + image_extensions() + ")")->required();
}

}  // namespace vit::app

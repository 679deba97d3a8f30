// `vit explain`: what the model looked at. Per image, its top-1 class and a picture of attention rollout
// (or of the last block's class-token attention) over the photo, optionally one panel per head and the
// maps themselves in a .safetensors file. Always f32, each block's attention kept whole (ViT::PlanOptions).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "apps/command.h"
#include "apps/options.h"
#include "engine/explain/attention_maps.h"
#include "engine/image/image.h"
#include "engine/explain/picture.h"
#include "engine/io/safetensors.h"
#include "engine/io/text.h"
#include "vit/topk.h"
#include "apps/inputs.h"
#include "apps/output.h"
#include "library/labels.h"
#include "library/runner.h"
#include "vit/error.h"

namespace vit::app {
namespace {

namespace fs = std::filesystem;

// The attention a batch may keep: every block's [H, T, T] per image, at most this much in all.
constexpr int64_t kAttentionBudget = int64_t(256) << 20;
constexpr int64_t kMaxExplainBatch = 8;

// What the picture shows: attention rolled out through every block, or the last block's alone.
enum class Method { Rollout, Last };

struct ExplainOptions {
  ModelOptions model;
  std::string out = ".", save_attention, labels;
  Method method = Method::Rollout;
  bool heads = false, json = false, force = false;
  int size = 1024;
  int64_t max_pixels = kDefaultMaxPixels;
  bool exif_transpose = false;
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

class Explainer {
 public:
  Explainer(const ExplainOptions& o, ViT model)
      : o_(o), model_(std::move(model)), labels_(resolve_labels(o.labels, model_.config())),
        plans_(model_, ViT::PlanOptions{true}) {
    const ViTConfig& c = model_.config();
    const int64_t per_image = c.depth * c.heads * c.tokens() * c.tokens() * int64_t(sizeof(float));
    batch_ = std::clamp<int64_t>(kAttentionBudget / per_image, 1, kMaxExplainBatch);
    query_ = c.class_token ? Query::ClassToken : Query::MeanOfRows;
  }

  int run(const std::vector<Input>& inputs) {
    const std::vector<std::string> stems = picture_stems(inputs);
    const auto decode = [&](size_t i) {
      const Input& in = inputs[i];
      if (!in.error.empty()) throw Error(in.file, in.error);
      if (is_video_name(in.file)) throw Error(in.file, "vit explain draws images; videos are for vit classify");
      return decode_image_file(in.file, o_.max_pixels, o_.exif_transpose);
    };
    run_batches(plans_, inputs.size(), {batch_, true}, decode, [&](const ViT::Plan& plan, std::vector<BatchItem>& items) {
      explain_batch(plan, items, inputs, stems);
      check_stdout();
    });
    if (failed_ && inputs.size() > 1)
      std::fprintf(stderr, "%zu of %zu images explained, %zu failed\n", explained_, inputs.size(), failed_);
    if (!o_.save_attention.empty()) save_attention();
    return failed_ ? kExitSomeFailed : kExitOk;
  }

 private:
  // One image's answer, maps and pictures.
  struct Explained {
    const float* logits = nullptr;  // [C], in the Plan's arena until the next batch
    Scored top{};
    std::vector<float> rollout, last;  // [gh, gw], [H, gh, gw]
    std::string picture, heads_picture;
    std::exception_ptr failure;  // drawing or writing failed: it ends the run (a full disk, say)
  };

  // A batch the runner has just run: the maps and pictures of its images on all threads, then each
  // input's line in input order.
  void explain_batch(const ViT::Plan& plan, std::vector<BatchItem>& items, const std::vector<Input>& inputs,
                     const std::vector<std::string>& stems) {
    const int64_t C = model_.config().classes;
    std::vector<Explained> done(items.size());
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t j = 0; j < items.size(); ++j) {
      const BatchItem& item = items[j];
      if (item.row < 0) continue;
      Explained& e = done[j];
      e.logits = plan.logits() + item.row * C;
      try {
        explain_one(plan, item.row, item.image, stems[item.index], &e);
      } catch (...) {
        e.failure = std::current_exception();
      }
    }
    for (size_t j = 0; j < items.size(); ++j) {
      const std::string& file = inputs[items[j].index].file;
      if (items[j].row < 0) {
        report_error(file, items[j].error);
        continue;
      }
      if (done[j].failure) std::rethrow_exception(done[j].failure);
      report(file, done[j]);
    }
  }

  // Image k of the batch just run: its maps, top class and pictures, into *e.
  void explain_one(const ViT::Plan& plan, int64_t k, const Image& photo, const std::string& stem, Explained* out) const {
    const ViTConfig& c = model_.config();
    const int64_t H = c.heads, T = c.tokens(), N = c.patches();
    const int gh = int(c.grid_h()), gw = int(c.grid_w());
    Explained& e = *out;
    e.top = top_k(e.logits, c.classes, 1)[0];
    std::vector<const float*> blocks;
    for (int64_t l = 0; l < c.depth; ++l) blocks.push_back(plan.attention(l) + k * H * T * T);
    e.rollout = attention_rollout(blocks, H, T, c.prefix_tokens(), query_);
    e.last = query_attention(blocks.back(), H, T, c.prefix_tokens(), query_);

    std::vector<float> shown = e.rollout;
    if (o_.method == Method::Last) {  // the heads' mean
      for (int64_t j = 0; j < N; ++j) {
        float s = 0;
        for (int64_t h = 0; h < H; ++h) s += e.last[size_t(h * N + j)];
        shown[size_t(j)] = s / float(H);
      }
    }
    const Rect window = input_window(photo.width, photo.height, c.pre);
    const std::string caption = fmt::format("{}  {:.2f}", labels_[size_t(e.top.index)], e.top.prob);
    e.picture = (fs::path(o_.out) / (stem + ".attention.png")).string();
    write_png(e.picture, draw_attention(photo, window, {shown.data(), gh, gw}, caption, o_.size));
    if (o_.heads) {
      std::vector<Heat> heats;
      std::vector<std::string> captions;
      for (int64_t h = 0; h < H; ++h) {
        heats.push_back({e.last.data() + h * N, gh, gw});
        captions.push_back("head " + std::to_string(h));
      }
      e.heads_picture = (fs::path(o_.out) / (stem + ".heads.png")).string();
      write_png(e.heads_picture, draw_panels(photo, window, heats, captions, o_.size));
    }
  }

  void report_error(const std::string& file, const std::string& why) {
    ++failed_;
    if (o_.json) std::printf("%s\n", json_line(file, {{"error", why}}).c_str());
    else std::fprintf(stderr, "error: %s: %s\n", printable(file).c_str(), printable(why).c_str());
  }

  void report(const std::string& file, const Explained& e) {
    ++explained_;
    const std::string& label = labels_[size_t(e.top.index)];
    if (o_.json) {
      nlohmann::json j{{"top", {{{"index", e.top.index}, {"label", label}, {"prob", e.top.prob}}}},
                       {"attention", e.picture}};
      if (o_.heads) j["heads"] = e.heads_picture;
      std::printf("%s\n", json_line(file, j).c_str());
    } else {
      std::printf("%s\n  %s  %.4f\n  attention: %s\n", printable(file).c_str(), printable(label).c_str(),
                  double(e.top.prob), printable(e.picture).c_str());
      if (o_.heads) std::printf("  heads: %s\n", printable(e.heads_picture).c_str());
    }
    if (!o_.save_attention.empty()) {
      const int64_t C = model_.config().classes;
      rollouts_.insert(rollouts_.end(), e.rollout.begin(), e.rollout.end());
      lasts_.insert(lasts_.end(), e.last.begin(), e.last.end());
      logits_.insert(logits_.end(), e.logits, e.logits + C);
      files_.push_back(file);
    }
  }

  void save_attention() {
    const ViTConfig& c = model_.config();
    const int64_t n = int64_t(files_.size()), gh = c.grid_h(), gw = c.grid_w();
    try {
      write_safetensors(o_.save_attention,
                        {{"rollout", {n, gh, gw}, rollouts_.data()},
                         {"last_cls", {n, c.heads, gh, gw}, lasts_.data()},
                         {"logits", {n, c.classes}, logits_.data()}},
                        {{"files", files_.dump()}});
    } catch (const WriteError&) {
      throw;
    } catch (const Error& e) {
      throw WriteError(e.what());
    }
  }

  const ExplainOptions o_;  // a copy: the prepared run outlives the options it was given
  ViT model_;
  std::vector<std::string> labels_;
  int64_t batch_ = 1;
  Query query_ = Query::ClassToken;
  PlanPool plans_;  // Plans that keep every block's attention
  size_t explained_ = 0, failed_ = 0;
  std::vector<float> rollouts_, lasts_, logits_;  // --save-attention, one row per image explained
  nlohmann::json files_ = nlohmann::json::array();
};

// Everything checked before the first image: the paths, the output folder, the attention file, the
// model and its labels.
std::function<int()> prepare_explain(ExplainOptions o) {
  auto inputs = std::make_shared<std::vector<Input>>(collect_inputs(o.paths));
  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (!fs::is_directory(o.out)) throw Error(o.out, "cannot create the output folder" + (ec ? ": " + ec.message() : ""));
  if (!o.save_attention.empty()) {
    std::vector<std::string> files;
    for (const Input& in : *inputs) files.push_back(in.file);
    check_output_target("--save-attention", o.save_attention, files, o.force);
  }
  o.model.precision = Precision::F32;
  ViT model = load_model(o.model);
  // A projection into a joint image-text space (OpenCLIP's, Hugging Face's CLIP) has no classes to explain.
  require_head(model.config().head_is_projection ? 0 : model.config().classes, model.source());
  auto explainer = std::make_shared<Explainer>(o, std::move(model));
  return [inputs, explainer] { return explainer->run(*inputs); };
}

}  // namespace

void add_explain_command(CLI::App& app, Prepare* prepare) {
  auto o = std::make_shared<ExplainOptions>();
  CLI::App* cmd = app.add_subcommand(
      "explain",
      "show what the model looked at: attention rollout over each photo, as DIR/<stem>.attention.png "
      "(f32, whatever --precision other commands use). Models without a class token explain with the mean "
      "of all tokens' attention rows instead of the class token's row");
  add_model_options(cmd, &o->model, false);
  cmd->add_option("--out", o->out, "folder for the pictures, created if missing; a stem met twice gets -2, -3, ...")
      ->capture_default_str();
  cmd->add_option_function<std::string>(
         "--method", [o](const std::string& s) { o->method = s == "last" ? Method::Last : Method::Rollout; },
         "rollout: attention rolled out through all blocks (Abnar & Zuidema); last: the last block's "
         "class-token attention, averaged over heads")
      ->check(CLI::IsMember({"rollout", "last"}))
      ->type_name("NAME")
      ->default_str("rollout");
  cmd->add_flag("--heads", o->heads, "also DIR/<stem>.heads.png: one panel per head of the last block");
  cmd->add_option("--save-attention", o->save_attention,
                  "write rollout [N,gh,gw], last_cls [N,H,gh,gw] and logits [N,C] of the explained images to a "
                  ".safetensors file");
  cmd->add_option("--size", o->size, "longer side of the pictures at most")->check(CLI::Range(64, 8192))->capture_default_str();
  cmd->add_option("--labels", o->labels, "class names, one per line (default: the checkpoint's, else ImageNet-1k)");
  cmd->add_flag("--json", o->json, "one JSON object per line");
  cmd->add_flag("--force", o->force, "let --save-attention replace an existing file that is not a safetensors file");
  cmd->add_option("--max-pixels", o->max_pixels, "refuse images larger than this many pixels, before decoding")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--exif-transpose", o->exif_transpose,
                "turn images as their EXIF orientation says, as PIL's ImageOps.exif_transpose does (timm does not)");
  cmd->add_option("PATH", o->paths, "image files or folders (searched recursively for " + image_extensions() + ")")->required();
  cmd->callback([o, prepare] { *prepare = [o] { return prepare_explain(*o); }; });
}

}  // namespace vit::app

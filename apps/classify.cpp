// `vit classify`: images or folders in, top-k labels out (text or JSON lines), optional logits file.
// A reader thread decodes and preprocesses the next batch while the model runs the current one.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

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
  bool json = false, stats = false;
  std::vector<std::string> paths;
};

struct Input {
  std::string file;
  std::string error;  // set for a PATH that does not exist
};

bool is_image_name(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".bmp";
}

// PATH arguments in order; a folder contributes its image files, recursively, sorted by path.
std::vector<Input> collect_inputs(const std::vector<std::string>& paths, bool* missing) {
  std::vector<Input> out;
  for (const auto& p : paths) {
    std::error_code ec;
    const auto st = fs::status(p, ec);
    if (ec || !fs::exists(st)) {
      out.push_back({p, "no such file or directory"});
      *missing = true;
    } else if (fs::is_directory(st)) {
      std::vector<std::string> files;
      for (auto it = fs::recursive_directory_iterator(p, fs::directory_options::follow_directory_symlink, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
        if (!it->is_directory() && is_image_name(it->path())) files.push_back(it->path().string());
      if (ec) out.push_back({p, "cannot read folder: " + ec.message()});
      std::sort(files.begin(), files.end());
      for (auto& f : files) out.push_back({std::move(f), ""});
    } else {
      out.push_back({p, ""});
    }
  }
  return out;
}

// Up to `batch` decoded images, plus the failures met on the way, in input order.
struct Chunk {
  std::vector<size_t> items;  // indices into the inputs
  std::vector<std::string> errors;
  int good = 0;
  std::vector<float> pixels;  // [batch, 3, H, W]
};

// A reader thread fills chunks; two chunk buffers circulate, so nothing is allocated per batch.
class Reader {
 public:
  Reader(const std::vector<Input>& inputs, const PreprocessConfig& pre, int batch)
      : inputs_(inputs), pre_(pre), batch_(batch) {
    const size_t per_image = size_t(3) * pre.height * pre.width;
    for (int i = 0; i < 2; ++i) {
      auto c = std::make_unique<Chunk>();
      c->pixels.resize(per_image * size_t(batch));
      free_.push_back(std::move(c));
    }
    thread_ = std::thread([this] { loop(); });
  }
  ~Reader() {
    {
      std::lock_guard<std::mutex> l(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // The next chunk, or null at the end.
  std::unique_ptr<Chunk> next() {
    std::unique_lock<std::mutex> l(m_);
    cv_.wait(l, [&] { return !ready_.empty() || done_; });
    if (ready_.empty()) return nullptr;
    auto c = std::move(ready_.front());
    ready_.pop_front();
    cv_.notify_all();
    return c;
  }
  void recycle(std::unique_ptr<Chunk> c) {
    std::lock_guard<std::mutex> l(m_);
    free_.push_back(std::move(c));
    cv_.notify_all();
  }

 private:
  void loop() {
    const size_t per_image = size_t(3) * pre_.height * pre_.width;
    size_t i = 0;
    while (i < inputs_.size()) {
      std::unique_ptr<Chunk> c;
      {
        std::unique_lock<std::mutex> l(m_);
        cv_.wait(l, [&] { return !free_.empty() || stop_; });
        if (stop_) break;
        c = std::move(free_.back());
        free_.pop_back();
      }
      c->items.clear();
      c->errors.clear();
      c->good = 0;
      for (; i < inputs_.size() && c->good < batch_; ++i) {
        std::string err = inputs_[i].error;
        if (err.empty()) {
          try {
            preprocess(decode_image_file(inputs_[i].file), pre_, c->pixels.data() + per_image * size_t(c->good));
          } catch (const std::exception& e) {
            err = e.what();
            if (err.rfind(inputs_[i].file + ": ", 0) == 0) err = err.substr(inputs_[i].file.size() + 2);
          }
        }
        c->items.push_back(i);
        c->errors.push_back(err);
        if (err.empty()) ++c->good;
      }
      std::lock_guard<std::mutex> l(m_);
      ready_.push_back(std::move(c));
      cv_.notify_all();
    }
    std::lock_guard<std::mutex> l(m_);
    done_ = true;
    cv_.notify_all();
  }

  const std::vector<Input>& inputs_;
  const PreprocessConfig pre_;
  const int batch_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Chunk>> free_, ready_;
  bool stop_ = false, done_ = false;
  std::thread thread_;
};

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

int run_classify(const ClassifyOptions& o) {
  bool missing = false;
  const std::vector<Input> inputs = collect_inputs(o.paths, &missing);
  ViT model = load_model(o.model);
  const ViTConfig& cfg = model.config();
  const std::vector<std::string> labels = resolve_labels(o.labels, cfg);
  const int k = int(std::min<int64_t>(o.topk, cfg.classes));
  const int batch = std::max(1, std::min<int>(o.batch, int(std::max<size_t>(inputs.size(), 1))));
  model.prepare(batch);

  std::vector<float> saved;  // [classified, C] for --save-logits
  nlohmann::json saved_files = nlohmann::json::array();
  size_t done = 0, classified = 0, failed = 0;
  Progress progress(inputs.size(), isatty(STDERR_FILENO) && inputs.size() > size_t(batch) && !o.stats);
  const auto t0 = std::chrono::steady_clock::now();
  {
    Reader reader(inputs, cfg.pre, batch);
    const size_t per_image = size_t(3) * cfg.img_h * cfg.img_w;
    while (auto chunk = reader.next()) {
      const float* logits = nullptr;
      if (chunk->good > 0) {
        std::memcpy(model.input(chunk->good), chunk->pixels.data(), per_image * size_t(chunk->good) * sizeof(float));
        logits = model.run(chunk->good);
      }
      progress.clear();
      int slot = 0;
      for (size_t j = 0; j < chunk->items.size(); ++j) {
        const std::string& file = inputs[chunk->items[j]].file;
        const std::string& err = chunk->errors[j];
        if (!err.empty()) {
          ++failed;
          if (o.json) std::printf("%s\n", nlohmann::json{{"file", file}, {"error", err}}.dump().c_str());
          else std::fprintf(stderr, "error: %s: %s\n", file.c_str(), err.c_str());
          continue;
        }
        const float* row = logits + int64_t(slot++) * cfg.classes;
        const auto top = top_k(row, cfg.classes, k);
        if (o.json) {
          nlohmann::json t = nlohmann::json::array();
          for (const auto& s : top) t.push_back({{"index", s.index}, {"label", labels[size_t(s.index)]}, {"prob", s.prob}});
          std::printf("%s\n", nlohmann::json{{"file", file}, {"top", t}}.dump().c_str());
        } else {
          size_t w = 0;
          for (const auto& s : top) w = std::max(w, labels[size_t(s.index)].size());
          std::printf("%s\n", file.c_str());
          for (const auto& s : top) std::printf("  %-*s  %.4f\n", int(w), labels[size_t(s.index)].c_str(), double(s.prob));
        }
        if (!o.save_logits.empty()) {
          saved.insert(saved.end(), row, row + cfg.classes);
          saved_files.push_back(file);
        }
        ++classified;
      }
      std::fflush(stdout);
      done += chunk->items.size();
      progress.update(done);
      reader.recycle(std::move(chunk));
    }
  }
  progress.clear();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string stats = fmt::format("classified {} of {} images in {:.3f} s: {:.1f} img/s end to end "
                                        "(decode, preprocessing and inference; batch {}, {} threads)",
                                        classified, inputs.size(), secs, secs > 0 ? classified / secs : 0.0, batch,
                                        set_threads(0));
  if (o.stats) std::fprintf(stderr, "%s\n", stats.c_str());
  else spdlog::info("{}", stats);

  if (!o.save_logits.empty()) {
    try {
      write_safetensors(o.save_logits, {{"logits", {int64_t(classified), cfg.classes}, saved.data()}},
                        {{"files", saved_files.dump()}});
    } catch (const Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return kExitSomeFailed;
    }
  }
  if (missing) return kExitUsage;
  return failed ? kExitSomeFailed : kExitOk;
}

}  // namespace

void add_classify_command(CLI::App& app, std::function<int()>* run) {
  auto o = std::make_shared<ClassifyOptions>();
  CLI::App* cmd = app.add_subcommand("classify", "classify images with a ViT and print the top-k classes");
  add_model_options(cmd, &o->model);
  cmd->add_option("--labels", o->labels, "class names, one per line (default: the checkpoint's, else ImageNet-1k)");
  cmd->add_option("--topk", o->topk, "classes to print per image")->check(CLI::Range(1, 100000));
  cmd->add_option("--batch", o->batch, "images per forward pass")->check(CLI::Range(1, 4096));
  cmd->add_flag("--json", o->json, "one JSON object per line");
  cmd->add_option("--save-logits", o->save_logits, "write the logits of the classified images to a .safetensors file");
  cmd->add_flag("--stats", o->stats, "print end-to-end images/s on stderr");
  cmd->add_option("PATH", o->paths, "image files or folders (searched recursively for .jpg .jpeg .png .bmp)")
      ->required();
  cmd->callback([o, run] { *run = [o] { return run_classify(*o); }; });
}

}  // namespace vit::app

// `vit quantize`, see quantize.h: f32 forward passes over the calibration images (run_batches, as every
// command runs its images) add each block linear layer's inputs to its Hessian (H = Σ x xᵀ, from the
// {layer}.input taps), then GPTQ rounds the layer's weights on both int8 grids, and the folder is written
// beside its final place and renamed into it.
#include "vit/quantize.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/image/image.h"
#include "engine/io/safetensors.h"
#include "engine/nn/gptq.h"
#include "engine/nn/quantize.h"
#include "models/int8_weights.h"
#include "library/runner.h"
#include "models/network.h"
#include "vit/error.h"
#include "vit/vit.h"

namespace vit {
namespace fs = std::filesystem;
namespace {

void say(const std::function<void(const std::string&)>& progress, const std::string& s) {
  if (progress) progress(s);
}

fs::path parent_of(const fs::path& out) { return out.parent_path().empty() ? fs::path(".") : out.parent_path(); }

// The output folder can be made: a new or empty folder, in a folder that exists and takes a new one
// (tried: a temporary folder made and removed), so that nothing is calibrated for an output that fails.
void check_output_folder(const std::string& out_name) {
  if (out_name.empty()) throw Error("the output folder's name is empty");
  const fs::path out(out_name), parent = parent_of(out);
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec))
    throw Error(out_name, "exists as a file, not a folder: pick a new folder for the quantized model");
  if (fs::exists(out, ec) && !fs::is_empty(out, ec))
    throw Error(out_name, "exists as a folder that is not empty: pick a new folder for the quantized model");
  const fs::file_status st = fs::status(parent, ec);
  if (st.type() == fs::file_type::not_found) {
    // The parent is missing, or a file stands where one of its folders should be: name that file.
    for (fs::path up = parent.parent_path(); !up.empty(); up = up.parent_path()) {
      if (fs::exists(up, ec)) {
        if (!fs::is_directory(up, ec)) throw Error(out_name, up.string() + " is a file, not a folder");
        break;
      }
      if (up == up.root_path()) break;
    }
    throw Error(out_name, "its folder " + parent.string() + " does not exist");
  }
  if (!fs::is_directory(st)) throw Error(out_name, parent.string() + " is a file, not a folder");
  std::string probe = (parent / ("." + out.filename().string() + ".XXXXXX")).string();
  if (!::mkdtemp(probe.data()))
    throw Error(out_name, "cannot create a folder in " + parent.string() + ": " + std::strerror(errno));
  ::rmdir(probe.c_str());
}

// The files a quantized folder holds besides int8.safetensors: the weights and what loading reads with
// them (find_model_files), a config given with --config as the one beside the weights.
std::vector<std::pair<std::string, std::string>> files_to_copy(const ModelFiles& m) {
  std::vector<std::pair<std::string, std::string>> out = {{m.weights, fs::path(m.weights).filename().string()}};
  if (!m.config.empty()) out.push_back({m.config, m.open_clip ? "open_clip_config.json" : "config.json"});
  if (!m.preprocessor.empty()) out.push_back({m.preprocessor, "preprocessor_config.json"});
  return out;
}

// A layer's Hessian H = Σ x xᵀ over its calibration inputs, [K, K].
struct Hessian {
  int64_t K;
  std::vector<double> h;
};

}  // namespace

// The quantization's state: what the constructor checked and found, and the stages of run().
struct Quantizer::Impl {
  explicit Impl(QuantizeOptions o);
  std::string model_path() const;
  QuantizeResult run(const Progress& progress);

  // The rounded layers as written: q and scale per layer and grid, and the tensors pointing into them.
  struct Rounded {
    std::vector<std::vector<int8_t>> q;
    std::vector<std::vector<float>> scale;
    std::vector<TensorToWrite> tensors;
  };
  std::map<std::string, std::vector<double>> calibrate(const Progress& progress, QuantizeResult* r) const;
  void round_layers(const std::map<std::string, std::vector<double>>& hessians, const Progress& progress,
                    Rounded* rounded, QuantizeResult* r) const;
  void write_folder(const Rounded& rounded, const QuantizeResult& r) const;

  QuantizeOptions o_;
  std::unique_ptr<ModelFiles> files_of_model_;
  std::unique_ptr<ViT> model_;
  std::vector<std::string> files_;
  std::vector<std::pair<std::string, std::string>> listing_failed_;
};

Quantizer::Quantizer(QuantizeOptions o) : impl_(std::make_unique<Impl>(std::move(o))) {}
Quantizer::~Quantizer() = default;
std::string Quantizer::model_path() const { return impl_->model_path(); }
QuantizeResult Quantizer::run(const Progress& progress) { return impl_->run(progress); }

Quantizer::Impl::Impl(QuantizeOptions o) : o_(std::move(o)) {
  check_output_folder(o_.out);
  if (o_.max_images < 1) throw Error("--images must be at least 1");
  for (const std::string& p : o_.calib) {
    struct stat st{};
    if (::lstat(p.c_str(), &st) != 0) throw Error("--calib " + p, "no such file or folder");
  }
  files_of_model_ = std::make_unique<ModelFiles>(find_model_files(o_.model, o_.config));
  model_ = std::make_unique<ViT>(ViT::load(o_.model, o_.config, 0, Precision::F32, o_.arch));
  for (const ImagePath& p : find_images(o_.calib, false)) {
    if (!p.error.empty()) listing_failed_.push_back({p.file, p.error});
    else if (int64_t(files_.size()) < o_.max_images) files_.push_back(p.file);
  }
  if (files_.empty())
    throw Error("no calibration images" + std::string(o_.calib.size() == 1 ? " in " + o_.calib[0] : ""));
}

std::string Quantizer::Impl::model_path() const {
  const std::string name = fs::path(files_of_model_->weights).filename().string();
  return name == "model.safetensors" || name == "open_clip_model.safetensors" ? o_.out : (fs::path(o_.out) / name).string();
}

// Every block linear layer's Hessian from f32 forward passes over the calibration images, decoded on all
// threads as every command decodes (run_batches); images that fail are listed in r.
std::map<std::string, std::vector<double>> Quantizer::Impl::calibrate(const Progress& progress, QuantizeResult* r) const {
  std::map<std::string, Hessian> hessians;  // by the name of the tap holding the layer's input
  for (const auto& [name, lw] : model_->block_linear_layers())
    hessians[name + ".input"] = {lw->K, std::vector<double>(size_t(lw->K * lw->K), 0.0)};
  RunOptions run;
  run.batch = o_.batch;
  run.taps = [&](const std::string& tap, const float* data, int64_t count) {
    auto h = hessians.find(tap);
    if (h != hessians.end()) add_gram(data, count / h->second.K, h->second.K, h->second.h.data());
  };
  const PlanPool plans(*model_);
  run_batches(plans, files_.size(), run, [&](size_t i) { return decode_image_file(files_[i]); },
              [&](const ViT::Plan&, std::vector<BatchItem>& items) {
                for (const BatchItem& item : items) {
                  if (item.row < 0) r->failed.push_back({files_[item.index], item.error});
                  else ++r->images;
                }
                say(progress, "calibration: " + std::to_string(r->images) + " images");
              });
  std::map<std::string, std::vector<double>> out;
  for (auto& [tap, h] : hessians) out[tap.substr(0, tap.size() - 6)] = std::move(h.h);  // without ".input"
  return out;
}

// Each layer rounded by GPTQ on both grids, with how much it moves the calibration outputs against
// rounding to nearest (r->gain).
void Quantizer::Impl::round_layers(const std::map<std::string, std::vector<double>>& hessians, const Progress& progress,
                                   Rounded* rounded, QuantizeResult* r) const {
  const auto layers = model_->block_linear_layers();
  rounded->q.reserve(layers.size() * 2);
  rounded->scale.reserve(layers.size() * 2);
  for (const auto& [name, lw] : layers) {
    const std::vector<float> w = f32_weights(*lw);
    const std::vector<double>& H = hessians.at(name);
    const int64_t N = lw->N, K = lw->K;
    const GptqFactor factor = gptq_factor(H.data(), K);
    for (int qmax : kInt8Grids) {
      std::vector<int8_t>& q = rounded->q.emplace_back(size_t(N * K));
      std::vector<float>& scale = rounded->scale.emplace_back(size_t(N));
      gptq_quantize(w.data(), N, factor, qmax, q.data(), scale.data());
      std::vector<int8_t> q_rtn(size_t(N * K));
      std::vector<float> s_rtn(static_cast<size_t>(N));
      quantize_weights(w.data(), N, K, qmax, q_rtn.data(), s_rtn.data());
      const double rtn = output_change(w.data(), q_rtn.data(), s_rtn.data(), N, K, H.data());
      const double gptq = output_change(w.data(), q.data(), scale.data(), N, K, H.data());
      r->gain.push_back({rounded_name(name, "q", qmax), rtn > 0.0 ? gptq / rtn : 1.0});
      rounded->tensors.push_back({rounded_name(name, "q", qmax), {N, K}, q.data(), DType::I8});
      rounded->tensors.push_back({rounded_name(name, "scale", qmax), {N}, scale.data(), DType::F32});
    }
    ++r->layers;
    say(progress, "rounded " + name);
  }
}

// The folder, written beside its final place and renamed into it when complete.
void Quantizer::Impl::write_folder(const Rounded& rounded, const QuantizeResult& r) const {
  const fs::path out(o_.out), parent = parent_of(out);
  std::error_code ec;
  std::string temp = (parent / ("." + out.filename().string() + ".XXXXXX")).string();
  if (!::mkdtemp(temp.data())) throw Error(o_.out, std::string("cannot create a folder beside it: ") + std::strerror(errno));
  try {
    for (const auto& [from, name] : files_to_copy(*files_of_model_)) {
      const fs::path to = fs::path(temp) / name;
      fs::copy_file(from, to);
      fs::permissions(to, fs::perms::owner_write, fs::perm_options::add);
    }
    if (files_of_model_->config.empty() && !o_.arch.empty()) {  // what --arch said, so that the folder loads alone
      std::ofstream config(fs::path(temp) / "config.json");
      config << nlohmann::json{{"architecture", o_.arch}}.dump(2) << "\n";
      if (!config.flush()) throw Error(o_.out, "cannot write its config.json");
    }
    const std::string& checkpoint = files_of_model_->weights;
    write_safetensors((fs::path(temp) / kInt8WeightsFile).string(), rounded.tensors,
                      {{"format", "vit int8 weights"},
                       {"method", "GPTQ (act-order, 1% damping), symmetric per output channel"},
                       {"grids", "127 (CPUs with VNNI), 64 (without)"},
                       {"checkpoint", fs::path(checkpoint).filename().string()},
                       {"checkpoint_bytes", checkpoint_bytes(checkpoint)},
                       {"calibration_images", std::to_string(r.images)}});
    // mkdtemp made it private; the folder gets the permissions a new folder would have.
    const mode_t mask = ::umask(0);
    ::umask(mask);
    fs::permissions(temp, fs::perms(0777 & ~mask));
    if (fs::exists(out)) fs::remove(out);
    fs::rename(temp, out);
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(temp, ec);
    throw Error(o_.out, std::string("cannot write the quantized model: ") + e.code().message());
  } catch (...) {
    fs::remove_all(temp, ec);
    throw;
  }
}

QuantizeResult Quantizer::Impl::run(const Progress& progress) {
  QuantizeResult r;
  r.failed = listing_failed_;
  const auto hessians = calibrate(progress, &r);
  if (r.images == 0) return r;
  Rounded rounded;
  round_layers(hessians, progress, &rounded, &r);
  write_folder(rounded, r);
  return r;
}

}  // namespace vit

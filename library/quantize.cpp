// `vit quantize`, see quantize.h: f32 forward passes over the calibration images add each block linear
// layer's inputs to its Hessian (H = Σ x xᵀ, from the {layer}.input taps), then GPTQ rounds the layer's
// weights on both int8 grids, and the folder is written beside its final place and renamed into it.
#include "vit/quantize.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

#include "engine/image/image.h"
#include "engine/io/safetensors.h"
#include "engine/nn/gptq.h"
#include "engine/nn/quantize.h"
#include "engine/preprocess/preprocess.h"
#include "models/int8_weights.h"
#include "models/vit.h"
#include "vit/error.h"
#include "vit/vit.h"

namespace vit {
namespace fs = std::filesystem;
namespace {

void say(const std::function<void(const std::string&)>& progress, const std::string& s) {
  if (progress) progress(s);
}

// The files a checkpoint needs beside it: itself and the configs ViT::load reads from its folder.
std::vector<std::string> model_files(const std::string& checkpoint) {
  const fs::path p(checkpoint), dir = p.parent_path();
  std::vector<std::string> files = {checkpoint};
  for (const char* beside : {"config.json", "open_clip_config.json", "preprocessor_config.json"})
    if (fs::exists(dir / beside)) files.push_back((dir / beside).string());
  return files;
}

}  // namespace

Quantizer::Quantizer(QuantizeOptions o) : o_(std::move(o)) {
  const fs::path out(o_.out);
  std::error_code ec;
  if (fs::exists(out, ec) && !(fs::is_directory(out, ec) && fs::is_empty(out, ec)))
    throw Error(o_.out, "exists and is not an empty folder: pick a new folder for the quantized model");
  const fs::path parent = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  if (!fs::is_directory(parent, ec)) throw Error(o_.out, "its folder " + parent.string() + " does not exist");
  if (o_.max_images < 1) throw Error("--images must be at least 1");
  model_ = std::make_unique<ViT>(ViT::load(o_.model, o_.config, 0, Precision::F32));
  for (const ImagePath& p : find_images(o_.calib, false)) {
    if (!p.error.empty()) listing_failed_.push_back({p.file, p.error});
    else if (int64_t(files_.size()) < o_.max_images) files_.push_back(p.file);
  }
  if (files_.empty())
    throw Error("no calibration images" + std::string(o_.calib.size() == 1 ? " in " + o_.calib[0] : ""));
}

Quantizer::~Quantizer() = default;

QuantizeResult Quantizer::run(const std::function<void(const std::string&)>& progress) {
  ViT& model = *model_;
  const ViTConfig& c = model.config();
  const std::vector<std::string>& files = files_;
  const QuantizeOptions& o = o_;
  const fs::path out(o.out), parent = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  std::error_code ec;
  QuantizeResult r;
  r.failed = listing_failed_;

  // The layers to round and their Hessians, by the name of the tap holding their input.
  const auto layers = model.block_linear_layers();
  struct Hessian {
    int64_t K;
    std::vector<double> h;  // [K, K]
  };
  std::map<std::string, Hessian> hessians;
  for (const auto& [name, lw] : layers) hessians[name + ".input"] = {lw->K, std::vector<double>(size_t(lw->K * lw->K), 0.0)};
  const int64_t per_image = c.input_floats();
  std::vector<float> batch(size_t(o.batch * per_image));
  for (size_t first = 0; first < files.size(); first += size_t(o.batch)) {
    int64_t n = 0;
    for (size_t i = first; i < std::min(files.size(), first + size_t(o.batch)); ++i) {
      try {
        preprocess(decode_image_file(files[i]), c.pre, batch.data() + n * per_image);
        ++n;
      } catch (const Error& e) {
        r.failed.push_back({files[i], e.problem()});
      }
    }
    if (n == 0) continue;
    model.forward_with_taps(batch.data(), n, [&](const std::string& tap, const float* data, int64_t count) {
      auto h = hessians.find(tap);
      if (h != hessians.end()) add_gram(data, count / h->second.K, h->second.K, h->second.h.data());
    });
    r.images += n;
    say(progress, "calibration: " + std::to_string(r.images) + " images");
  }
  if (r.images == 0) return r;

  std::vector<std::vector<int8_t>> qs;
  std::vector<std::vector<float>> scales;
  std::vector<TensorToWrite> tensors;
  qs.reserve(layers.size() * 2);
  scales.reserve(layers.size() * 2);
  for (const auto& [name, lw] : layers) {
    const std::vector<float> w = f32_weights(*lw);
    const std::vector<double>& H = hessians[name + ".input"].h;
    const int64_t N = lw->N, K = lw->K;
    const GptqFactor factor = gptq_factor(H.data(), K);
    for (int qmax : kInt8Grids) {
      qs.emplace_back(size_t(N * K));
      scales.emplace_back(size_t(N));
      gptq_quantize(w.data(), N, factor, qmax, qs.back().data(), scales.back().data());
      std::vector<int8_t> q_rtn(size_t(N * K));
      std::vector<float> s_rtn(static_cast<size_t>(N));
      quantize_weights(w.data(), N, K, qmax, q_rtn.data(), s_rtn.data());
      const double rtn = output_change(w.data(), q_rtn.data(), s_rtn.data(), N, K, H.data());
      const double gptq = output_change(w.data(), qs.back().data(), scales.back().data(), N, K, H.data());
      r.gain.push_back({rounded_name(name, "q", qmax), rtn > 0.0 ? gptq / rtn : 1.0});
      tensors.push_back({rounded_name(name, "q", qmax), {N, K}, qs.back().data(), DType::I8});
      tensors.push_back({rounded_name(name, "scale", qmax), {N}, scales.back().data(), DType::F32});
    }
    ++r.layers;
    say(progress, "rounded " + name);
  }

  // Written into a new folder beside the target, renamed into place when complete.
  std::string temp = (parent / ("." + out.filename().string() + ".XXXXXX")).string();
  if (!::mkdtemp(temp.data())) throw Error(o.out, std::string("cannot create a folder beside it: ") + std::strerror(errno));
  try {
    for (const std::string& f : model_files(model.source())) {
      const fs::path to = fs::path(temp) / fs::path(f).filename();
      fs::copy_file(f, to);
      fs::permissions(to, fs::perms::owner_write, fs::perm_options::add);
    }
    if (!o.config.empty()) fs::copy_file(o.config, fs::path(temp) / "config.json", fs::copy_options::overwrite_existing);
    write_safetensors((fs::path(temp) / kInt8WeightsFile).string(), tensors,
                      {{"format", "vit int8 weights"},
                       {"method", "GPTQ (act-order, 1% damping), symmetric per output channel"},
                       {"grids", "127 (CPUs with VNNI), 64 (without)"},
                       {"checkpoint", fs::path(model.source()).filename().string()},
                       {"checkpoint_bytes", checkpoint_bytes(model.source())},
                       {"calibration_images", std::to_string(r.images)}});
    // mkdtemp made it private; the folder gets the permissions a new folder would have.
    const mode_t mask = ::umask(0);
    ::umask(mask);
    fs::permissions(temp, fs::perms(0777 & ~mask));
    if (fs::exists(out)) fs::remove(out);
    fs::rename(temp, out);
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(temp, ec);
    throw Error(o.out, std::string("cannot write the quantized model: ") + e.code().message());
  } catch (...) {
    fs::remove_all(temp, ec);
    throw;
  }
  return r;
}

}  // namespace vit

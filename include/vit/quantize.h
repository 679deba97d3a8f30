// `vit quantize`: a model folder whose int8 weights are rounded ahead of time from a calibration folder's
// images (GPTQ, engine/nn/gptq.h) instead of to nearest at load: the checkpoint and its configs copied,
// and int8.safetensors beside them (models/int8_weights.h) with every block linear layer on both int8 grids.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace vit {

struct QuantizeOptions {
  std::string model;        // a checkpoint file or folder, as ViT::load takes it
  std::string config;       // a config.json overriding the one beside the weights ("" for none)
  std::string arch;         // the timm architecture of a checkpoint without a config ("" for none), as
                            // ClassifierOptions::arch; the folder written gets a config.json naming it
  std::vector<std::string> calib;  // image files or folders (searched as vit classify does)
  std::string out;          // the folder to create; must not exist, or be empty
  int64_t max_images = 256; // calibration images used at most (the first, in name order)
  int64_t batch = 8;
};

struct QuantizeResult {
  int64_t images = 0;                                       // calibration images used
  std::vector<std::pair<std::string, std::string>> failed;  // calibration inputs that did not decode, and why
  int64_t layers = 0;                                       // layers rounded
  // Per layer and grid, how much the rounding moves the calibration outputs, relative to rounding to
  // nearest: tr(ΔW H ΔWᵀ) of GPTQ over that of round-to-nearest (below 1 is better).
  std::vector<std::pair<std::string, double>> gain;
};

// One quantization: the constructor checks what can be checked before any work (the output is a new or
// empty folder in an existing folder that takes a new one, the model loads, every calibration PATH exists
// and they name at least one image file) and throws vit::Error otherwise; run() calibrates, rounds and
// writes the folder atomically (renamed into place when complete), telling progress (if set) each stage.
// When no calibration image decodes, run() writes nothing and returns images = 0 with every failure listed.
class Quantizer {
 public:
  using Progress = std::function<void(const std::string&)>;
  explicit Quantizer(QuantizeOptions o);
  ~Quantizer();
  QuantizeResult run(const Progress& progress = {});
  // What --model takes to run the folder written: the folder, or its checkpoint where that is not named as
  // a folder's is (model.safetensors).
  std::string model_path() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace vit

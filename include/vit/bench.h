// Timing a model's forward pass on preprocessed input (no decoding): the whole pass at a batch size, and
// each of its steps. What `vit bench` measures, for any program that measures the engine. Standard types
// only; errors are vit::Error (vit/error.h).
//
//   vit::Benchmark b = vit::Benchmark::random("vit_base_patch16_224", 0, vit::Precision::Int8);
//   vit::Benchmark::Runs r = b.run(8, 3, 2.0);  // 3 untimed passes at batch 8, then 2 s of timed ones
//   std::printf("%.1f img/s\n", 8 * r.ms.size() / r.seconds);
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "vit/precision.h"

namespace vit {

class Benchmark {
 public:
  // A model as vit::Classifier loads it: a .safetensors file or its folder, a config.json overriding the
  // one beside it ("" for none), an S x S input (0: the model's own), the precision of its linear layers, the
  // timm architecture of a checkpoint without a config ("" for none: ClassifierOptions::arch).
  explicit Benchmark(const std::string& model, const std::string& config = "", int img_size = 0,
                     Precision precision = Precision::F32, const std::string& arch = "");
  // A timm architecture (vit_base_patch16_224, ...) with random weights; an architecture the engine does
  // not run is refused by name.
  static Benchmark random(const std::string& arch, int img_size = 0, Precision precision = Precision::F32);
  ~Benchmark();
  Benchmark(Benchmark&&) noexcept;
  Benchmark& operator=(Benchmark&&) noexcept;

  std::string source() const;   // the weights file, or "random:<arch>"
  std::string name() const;     // as a person names the model: its architecture, else its folder's (or file's) name
  std::string summary() const;  // its shape in one line ("vit_base_patch16_224: 224x224, patch 16, ...")
  Precision precision() const;
  size_t weight_bytes() const;  // resident size of the weights at that precision

  // Forward passes at batch B on fixed pseudo-random input: `warmup` untimed, then timed ones until
  // `seconds` have passed, or `iters` of them when iters > 0. The passes run on the calling thread's
  // threads (vit/threads.h), the Plan for B made once and kept.
  struct Runs {
    std::vector<double> ms;  // each timed pass, in milliseconds
    double seconds = 0;      // all the timed passes, wall clock
    double flops = 0;        // one pass's 2 x multiply-adds
  };
  Runs run(int B, int warmup, double seconds, int iters = 0);

  // One forward pass at batch B, step by step, in order: each step's best time over `reps` passes (on a
  // shared machine a pass another process preempted says nothing about the step, so the minimum is kept).
  struct StepTime {
    std::string name;          // "blocks.3.mlp.fc1", "blocks.3.mlp.fc1.dequantize", ...
    std::string impl;          // oneDNN's kernel ("brg:avx512_core_vnni"), or host:ISA for the engine's own loops
    double seconds = 0;
    double flops = 0;          // 2 x multiply-adds
    bool is_product = false;   // a oneDNN product (matmul, convolution) ...
    Precision product = Precision::F32;  // ... multiplying in this precision
  };
  std::vector<StepTime> profile(int B, int reps);

  struct Impl;

 private:
  explicit Benchmark(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vit

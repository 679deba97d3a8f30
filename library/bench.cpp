// vit::Benchmark (vit/bench.h): a loaded or random ViT, one Plan per batch size fed fixed pseudo-random
// input, timed as a whole and step by step.
#include "vit/bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "models/network.h"
#include "vit/error.h"

namespace vit {

struct Benchmark::Impl {
  explicit Impl(ViT m) : model(std::move(m)) {}
  ViT model;
  std::string arch;  // for a random model

  // The Plan for batch B (made once), its input filled with the same pseudo-random values every time.
  const ViT::Plan& plan(int B) {
    ViT::Plan& p = model.plan(B);
    float* in = p.input();
    const size_t n = size_t(int64_t(B) * model.config().input_floats());
    uint32_t s = 12345;
    for (size_t i = 0; i < n; ++i) {
      s = s * 1664525u + 1013904223u;
      in[i] = float(int32_t(s)) / 2147483648.f * 2.f;
    }
    // A NaFlex model's images: each a grid that fills most of its budget (a square image's), padding the rest.
    const ViTConfig& c = model.config();
    if (c.naflex.on)
      for (int64_t b = 0; b < B; ++b) {
        const auto side = int(std::sqrt(double(c.naflex.max_patches)));
        p.set_grid(b, PatchGrid{side, int(c.naflex.max_patches / side)});
      }
    return p;
  }
};

Benchmark::Benchmark(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Benchmark::Benchmark(const std::string& model, const std::string& config, int img_size, Precision precision,
                     const std::string& arch)
    : impl_(std::make_unique<Impl>(ViT::load(model, config, img_size, precision, arch))) {}

Benchmark Benchmark::random(const std::string& arch, int img_size, Precision precision) {
  auto impl = std::make_unique<Impl>(ViT::random(config_for_arch(arch, img_size), 0, precision));
  impl->arch = arch;
  return Benchmark(std::move(impl));
}

Benchmark::~Benchmark() = default;
Benchmark::Benchmark(Benchmark&&) noexcept = default;
Benchmark& Benchmark::operator=(Benchmark&&) noexcept = default;

std::string Benchmark::source() const { return impl_->model.source(); }

std::string Benchmark::name() const {
  if (!impl_->arch.empty()) return impl_->arch;
  if (!impl_->model.config().arch.empty()) return impl_->model.config().arch;
  std::string p = impl_->model.source();
  const std::string file = "/model.safetensors";
  if (p.size() > file.size() && p.compare(p.size() - file.size(), file.size(), file) == 0) p.resize(p.size() - file.size());
  return p.substr(p.find_last_of('/') + 1);
}

std::string Benchmark::summary() const { return impl_->model.config().summary(); }
Precision Benchmark::precision() const { return impl_->model.precision(); }
size_t Benchmark::weight_bytes() const { return impl_->model.weight_bytes(); }

Benchmark::Runs Benchmark::run(int B, int warmup, double seconds, int iters) {
  using Clock = std::chrono::steady_clock;
  const Program& prog = impl_->plan(B).program();
  for (int i = 0; i < warmup; ++i) prog.run();
  Runs r;
  r.ms.reserve(size_t(iters > 0 ? iters : 100000));
  const auto t0 = Clock::now();
  for (;;) {
    const auto a = Clock::now();
    prog.run();
    const auto b = Clock::now();
    r.ms.push_back(std::chrono::duration<double, std::milli>(b - a).count());
    if (iters > 0 ? int(r.ms.size()) >= iters : std::chrono::duration<double>(b - t0).count() >= seconds) break;
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.flops = prog.flops();
  return r;
}

std::vector<Benchmark::StepTime> Benchmark::profile(int B, int reps) {
  const Program& prog = impl_->plan(B).program();
  std::vector<StepTime> out;
  for (const Step& st : prog.steps()) {
    StepTime t;
    t.name = st.name;
    t.impl = st.impl;
    t.flops = st.flops;
    if (const auto p = product_precision(st)) {
      t.is_product = true;
      t.product = *p;
    }
    out.push_back(std::move(t));
  }
  for (int rep = 0; rep < reps; ++rep) {
    const auto times = prog.profile();
    for (size_t i = 0; i < times.size(); ++i)
      out[i].seconds = rep == 0 ? times[i].second : std::min(out[i].seconds, times[i].second);
  }
  return out;
}

}  // namespace vit

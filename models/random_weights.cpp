// RandomSource: each tensor made from the seed and its name, whatever order the loader asks in.
#include "random_weights.h"

#include <cmath>

#include "engine/io/text.h"

namespace vit {
namespace {

// A linear congruential stream, its state first mixed from the seed and the tensor's name (FNV-1a).
struct Stream {
  uint64_t state;
  Stream(uint32_t seed, const std::string& name) : state(0x9E3779B97F4A7C15ull ^ seed) {
    for (unsigned char ch : name) state = (state ^ ch) * 0x100000001B3ull;
  }
  float next() {  // uniform in [-1, 1)
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return float(int32_t(state >> 32)) / 2147483648.f;
  }
  std::vector<float> fill(size_t n, float scale, float offset) {
    std::vector<float> v(n);
    for (auto& x : v) x = offset + scale * next();
    return v;
  }
};

// RoPE-Mixed: frequencies as init_random_2d_freqs makes them, magnitudes temperature^(-4k/Dh) turned by an
// angle per block and head; [2, depth, heads, Dh / 2], x's then y's.
std::vector<float> rope_mixed_freqs(const ViTConfig& c, Stream& s) {
  const int64_t half = c.head_dim() / 2, tables = c.depth * c.heads;
  const auto turn = s.fill(size_t(tables), 3.14159265f, 3.14159265f);
  std::vector<float> freqs(size_t(2 * tables * half));
  for (int64_t t = 0; t < tables; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const float mag = std::pow(c.rope.temperature, -float(4 * (i % (half / 2))) / float(c.head_dim()));
      const float a = turn[size_t(t)] + (i < half / 2 ? 0.f : 1.5707963f);
      freqs[size_t(t * half + i)] = mag * std::cos(a);
      freqs[size_t((tables + t) * half + i)] = mag * std::sin(a);
    }
  return freqs;
}

}  // namespace

TensorSource::Tensor RandomSource::take(const std::string& timm_name, const std::vector<int64_t>& shape) {
  Stream s(seed_, timm_name);
  if (timm_name == "rope.freqs") return Tensor(rope_mixed_freqs(cfg_, s));
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const int64_t fan_in = shape.empty() ? 1 : n / shape[0];
  if (ends_with(timm_name, ".weight") && shape.size() > 1)  // a linear layer's (or the patch conv's)
    return Tensor(s.fill(size_t(n), 1.f / std::sqrt(float(fan_in)), 0.f));
  if (ends_with(timm_name, ".weight") || ends_with(timm_name, "gamma") || ends_with(timm_name, "gamma_1") ||
      ends_with(timm_name, "gamma_2"))  // a norm's scale, a layer scale
    return Tensor(s.fill(size_t(n), 0.1f, 1.f));
  return Tensor(s.fill(size_t(n), 0.02f, 0.f));
}

}  // namespace vit

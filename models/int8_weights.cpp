// Reading the rounded int8 weights of a `vit quantize` folder into int8 layers; see int8_weights.h.
#include "models/int8_weights.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "engine/io/text.h"
#include "vit/error.h"

namespace vit {

std::string rounded_name(const std::string& layer, const char* what, int qmax) {
  return layer + "." + what + std::to_string(qmax);
}

std::string checkpoint_bytes(const std::string& checkpoint) {
  struct stat st{};
  if (::stat(checkpoint.c_str(), &st) != 0) throw Error(checkpoint, std::string("cannot stat: ") + std::strerror(errno));
  return std::to_string(int64_t(st.st_size));
}

std::unique_ptr<RoundedWeights> RoundedWeights::open(const std::string& path, const std::string& checkpoint) {
  std::unique_ptr<RoundedWeights> r(new RoundedWeights(path));
  const auto& meta = r->st_.metadata();
  const auto made_from = meta.find("checkpoint_bytes");
  const std::string bytes = checkpoint_bytes(checkpoint);
  if (made_from == meta.end() || made_from->second != bytes)
    throw Error(path, "was not made from " + checkpoint + " (made from a checkpoint of " +
                          (made_from == meta.end() ? std::string("unknown size") : made_from->second + " bytes") +
                          ", this one has " + bytes + "): run vit quantize again");
  return r;
}

LinearWeights RoundedWeights::linear(Arena& store, const std::string& layer, const float* bias, int64_t K, int64_t N,
                                     int64_t typical_rows, Epilogue ep) {
  const int qmax = int8_weight_max();
  const std::string qn = rounded_name(layer, "q", qmax), sn = rounded_name(layer, "scale", qmax);
  if (!st_.has(qn) || !st_.has(sn))
    throw Error(st_.path(), "has no rounded weights for " + layer + " (made for another model?)");
  const TensorView &qt = st_.get(qn), &stv = st_.get(sn);
  if (qt.dtype != DType::I8 || qt.shape != std::vector<int64_t>{N, K})
    throw Error(st_.path(), qn + " is " + dtype_name(qt.dtype) + " " + shape_string(qt.shape) + ", expected I8 " +
                                shape_string({N, K}) + " (made for another model?)");
  if (stv.dtype != DType::F32 || stv.shape != std::vector<int64_t>{N})
    throw Error(st_.path(), sn + " is " + dtype_name(stv.dtype) + " " + shape_string(stv.shape) + ", expected F32 " +
                                shape_string({N}));
  const std::vector<uint8_t> raw = st_.bytes(qn);
  std::vector<int8_t> q(raw.size());
  std::memcpy(q.data(), raw.data(), raw.size());
  for (int8_t v : q)
    if (v > qmax || v < -qmax) throw Error(st_.path(), qn + " holds " + std::to_string(v) + ", outside ±" + std::to_string(qmax));
  const std::vector<float> scale = st_.to_f32(sn);
  for (float s : scale)
    if (!(s > 0.f) || !std::isfinite(s)) throw Error(st_.path(), sn + " holds a scale that is not positive and finite");
  used_.insert(qn);
  used_.insert(sn);
  return make_int8_linear(store, {q.data(), scale.data()}, bias, K, N, typical_rows, ep);
}

void RoundedWeights::check_all_used() const {
  const int qmax = int8_weight_max();
  for (const auto& [name, t] : st_.tensors()) {
    const bool this_grid = ends_with(name, rounded_name("", "q", qmax)) || ends_with(name, rounded_name("", "scale", qmax));
    if (this_grid && !used_.count(name))
      throw Error(st_.path(), "holds " + name + ", a layer this model does not have (made for another model?)");
  }
}

}  // namespace vit

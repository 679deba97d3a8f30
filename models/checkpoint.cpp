// Checked access to a checkpoint's tensors by timm's names, through its layout's table (layouts.cpp).
#include "checkpoint.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "families.h"
#include "vit/error.h"

namespace vit {

Checkpoint::Checkpoint(const std::string& path, Tower tower) : st_(std::make_unique<SafeTensors>(path)), tower_(tower) {
  const std::string family = unsupported_family(*st_);
  if (!family.empty()) throw Error(path, family + " checkpoint: not supported yet");
  layout_ = detect_layout(*st_, path);
  if (tower == Tower::Text && !text_tower_prefix(layout_, *st_, &text_prefix_))
    throw Error(path, std::string("has no text tower: a ") + layout_name(layout_) +
                          " checkpoint of an image tower alone (a whole OpenCLIP model, CLIPModel or SiglipModel has one)");
}

StoredTensor Checkpoint::resolve(const std::string& name) const {
  return tower_ == Tower::Text ? text_layout_tensor(layout_, text_prefix_, name) : layout_tensor(layout_, name);
}

namespace {

// A NaN or infinite weight makes every answer NaN: loaded still (a model is the user's to judge), but
// named now, where the cause can be seen, rather than only in results that are not numbers.
void warn_not_finite(const std::string& path, const std::string& name, const std::vector<float>& v) {
  const size_t bad = size_t(std::count_if(v.begin(), v.end(), [](float x) { return !std::isfinite(x); }));
  if (bad)
    spdlog::warn("{}: tensor {} holds {} value(s) that are not finite (NaN or infinity): the model's answers will "
                 "not be numbers", path, name, bad);
}

}  // namespace

std::vector<int64_t> Checkpoint::part_shape(const StoredPart& p) const {
  std::vector<int64_t> s = st_->get(p.name).shape;
  if (p.dim >= 0) {
    if (p.dim >= int(s.size())) throw Error(path(), p.name + " has shape " + shape_string(s) + ", too few dimensions");
    const int64_t n = s[size_t(p.dim)];
    const int64_t b = p.thirds ? p.begin * n / 3 : p.begin, e = p.thirds ? p.end * n / 3 : p.end < 0 ? n : p.end;
    if ((p.thirds && n % 3) || b > e || e > n)
      throw Error(path(), p.name + " has shape " + shape_string(s) + ", too small for its parts");
    s[size_t(p.dim)] = e - b;
  }
  if (p.transpose) {
    if (s.size() != 2) throw Error(path(), p.name + " has shape " + shape_string(s) + ", expected 2 dimensions");
    std::swap(s[0], s[1]);
  }
  return s;
}

std::vector<float> Checkpoint::read_part(const StoredPart& p) {
  used_.insert(p.name);
  std::vector<float> v = st_->to_f32(p.name);
  warn_not_finite(path(), p.name, v);
  const std::vector<int64_t> full = st_->get(p.name).shape, s = part_shape(p);
  if (p.dim >= 0) {
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < p.dim; ++d) outer *= full[size_t(d)];
    for (size_t d = size_t(p.dim) + 1; d < full.size(); ++d) inner *= full[d];
    const int64_t n = full[size_t(p.dim)], kept = s[size_t(p.dim)];
    const int64_t b = p.thirds ? p.begin * n / 3 : p.begin;
    std::vector<float> out;
    out.reserve(size_t(outer * kept * inner));
    for (int64_t o = 0; o < outer; ++o) {
      const auto* from = v.data() + (o * n + b) * inner;
      out.insert(out.end(), from, from + kept * inner);
    }
    v = std::move(out);
  }
  if (p.transpose) {
    const int64_t r = full[0], c = full[1];  // stored [r, c] -> [c, r]
    std::vector<float> t(v.size());
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) t[size_t(j * r + i)] = v[size_t(i * c + j)];
    v = std::move(t);
  }
  return v;
}

bool Checkpoint::has(const std::string& timm_name) const {
  const StoredTensor t = resolve(timm_name);
  if (t.parts.empty()) return false;
  for (const auto* list : {&t.parts, &t.add})
    for (const StoredPart& p : *list)
      if (!st_->has(p.name)) return false;
  return true;
}

std::vector<int64_t> Checkpoint::shape(const std::string& timm_name) const {
  const StoredTensor t = resolve(timm_name);
  if (!has(timm_name)) throw Error(path(), "missing tensor " + timm_name);
  // Stacked parts (Hugging Face's q, k, v on dim 0) must agree in every other dimension, else the stacked
  // values would not fill the shape claimed.
  std::vector<std::vector<int64_t>> parts;
  for (const StoredPart& p : t.parts) parts.push_back(part_shape(p));
  std::vector<int64_t> s = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) {
    if (s.empty() || parts[i].size() != s.size() || !std::equal(s.begin() + 1, s.end(), parts[i].begin() + 1))
      throw Error(path(), t.parts[i].name + " has shape " + shape_string(parts[i]) + ", which does not stack with " +
                              t.parts[0].name + "'s " + shape_string(parts[0]) + " into " + timm_name);
    s[0] += parts[i][0];
  }
  s.insert(s.begin(), size_t(t.lead_ones), 1);
  return s;
}

Checkpoint::Tensor Checkpoint::take(const std::string& timm_name, const std::vector<int64_t>& expected) {
  const StoredTensor t = resolve(timm_name);
  if (!has(timm_name)) {
    const std::string& first = t.parts.empty() ? timm_name : t.parts[0].name;
    throw Error(path(), "missing tensor " + (first == timm_name ? timm_name : first + " (" + timm_name + ")"));
  }
  const std::vector<int64_t> got = shape(timm_name);
  if (got != expected)
    throw Error(path(), "" + (t.parts.size() == 1 ? t.parts[0].name : timm_name) + " has shape " + shape_string(got) +
                ", expected " + shape_string(expected));
  std::vector<float> values;
  for (const StoredPart& p : t.parts) {
    std::vector<float> part = read_part(p);
    if (values.empty()) values = std::move(part);
    else values.insert(values.end(), part.begin(), part.end());
  }
  for (const StoredPart& p : t.add) {
    const std::vector<float> part = read_part(p);
    if (part.size() != values.size())
      throw Error(path(), p.name + ": the part added to " + timm_name + " has " + std::to_string(part.size()) +
                              " values, expected " + std::to_string(values.size()));
    for (size_t i = 0; i < values.size(); ++i) values[i] += part[i];
  }
  return Tensor(std::move(values));
}

void Checkpoint::check_all_used() const {
  std::string unused;
  int count = 0;
  for (const auto& [name, t] : st_->tensors()) {
    const bool theirs = tower_ == Tower::Text ? !text_layout_holds(layout_, text_prefix_, name) : layout_ignores(layout_, name);
    if (used_.count(name) || theirs) continue;
    if (count++ < 5) unused += (unused.empty() ? "" : ", ") + name;
  }
  if (count)
    throw Error(path(), "" + std::to_string(count) + " tensor(s) the model does not use: " + unused +
                (count > 5 ? ", ..." : "") +
                (tower_ == Tower::Text ? " (not a text tower this engine knows)" : " (not a ViT layout this engine knows)"));
}

std::string Checkpoint::dtypes() const {
  std::set<std::string> names;
  for (const auto& [name, t] : st_->tensors()) names.insert(dtype_name(t.dtype));
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

int64_t Checkpoint::count_blocks() const {
  int64_t n = 0;
  while (has("blocks." + std::to_string(n) + ".norm1.weight")) ++n;
  return n;
}

}  // namespace vit

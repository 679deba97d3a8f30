// Loading a zero-shot labels file and scoring image embeddings against it (zero_shot.h). OpenCLIP's
// zero-shot classifier: softmax(logit_scale.exp() * normalize(image) @ classifier); SigLIP's:
// sigmoid(logit_scale.exp() * cos + logit_bias) per class. The file holds the scale already exponentiated.
#include "zero_shot.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/io/safetensors.h"
#include "vit/topk.h"
#include "vit/error.h"

namespace vit {
namespace {

constexpr const char* kHow = " (scripts/export_text_embeddings.py writes such a file)";

float number(const std::map<std::string, std::string>& meta, const char* key, const std::string& path) {
  const auto it = meta.find(key);
  if (it == meta.end()) throw Error(path, std::string("no ") + key + " in its __metadata__" + kHow);
  try {
    size_t used = 0;
    const float v = std::stof(it->second, &used);
    if (used == it->second.size() && std::isfinite(v)) return v;
  } catch (const std::exception&) {
  }
  throw Error(path, std::string(key) + " '" + it->second + "' is not a number");
}

}  // namespace

ZeroShot ZeroShot::load(const std::string& path, int64_t width) {
  std::unique_ptr<SafeTensors> st;
  try {
    st = std::make_unique<SafeTensors>(path);
  } catch (const Error& e) {
    throw Error(path, "not a text-embeddings file: " + e.problem());
  }
  if (!st->has("text_embeddings"))
    throw Error(path, std::string("no tensor text_embeddings [classes, width]") + kHow);
  const auto shape = st->get("text_embeddings").shape;
  if (shape.size() != 2 || shape[0] < 1)
    throw Error(path, "text_embeddings has shape " + shape_string(shape) + ", expected [classes, width]");
  if (shape[1] != width)
    throw ArgumentError(path, "text embeddings of width " + std::to_string(shape[1]) + ", but the model's image embeddings "
                      "have width " + std::to_string(width) + " (made for another model?)");
  ZeroShot z;
  z.width_ = width;
  const auto& meta = st->metadata();
  const auto labels = meta.find("labels");
  if (labels == meta.end()) throw Error(path, std::string("no labels in its __metadata__") + kHow);
  try {
    z.labels_ = nlohmann::json::parse(labels->second).get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception&) {
    throw Error(path, "its labels are not a JSON list of names");
  }
  if (int64_t(z.labels_.size()) != shape[0])
    throw Error(path, std::to_string(z.labels_.size()) + " labels for " + std::to_string(shape[0]) + " text embeddings");
  std::set<std::string> seen;
  for (const std::string& label : z.labels_)
    if (!seen.insert(label).second) throw Error(path, "the label '" + label + "' is there twice: each class once");
  z.scale_ = number(meta, "logit_scale", path);
  if (!(z.scale_ > 0)) throw Error(path, "logit_scale must be positive");
  // How scores become probabilities is said, never guessed: CLIP's softmax over the classes, or SigLIP's
  // sigmoid per class, which needs the model's logit_bias.
  const auto act = meta.find("activation");
  if (act == meta.end())
    throw Error(path, std::string("no activation in its __metadata__ (softmax for CLIP, sigmoid for SigLIP)") + kHow);
  if (act->second != "softmax" && act->second != "sigmoid")
    throw Error(path, "activation '" + act->second + "' is not softmax or sigmoid");
  z.sigmoid_ = act->second == "sigmoid";
  if (z.sigmoid_ && !meta.count("logit_bias"))
    throw Error(path, std::string("activation sigmoid (SigLIP) without its logit_bias in the __metadata__") + kHow);
  if (meta.count("logit_bias")) z.bias_ = number(meta, "logit_bias", path);
  return ZeroShot(std::move(z.labels_), st->to_f32("text_embeddings"), width, z.scale_, z.bias_, z.sigmoid_, path);
}

ZeroShot::ZeroShot(std::vector<std::string> labels, std::vector<float> text, int64_t width, float scale, float bias,
                   bool sigmoid, const std::string& what)
    : labels_(std::move(labels)), text_(std::move(text)), width_(width), scale_(scale), bias_(bias), sigmoid_(sigmoid) {
  for (int64_t c = 0; c < classes(); ++c) {  // unit rows, as the classifier's columns are
    float* row = text_.data() + c * width;
    double ss = 0;
    for (int64_t e = 0; e < width; ++e) ss += double(row[e]) * row[e];
    if (!(ss > 0) || !std::isfinite(ss)) throw Error(what, "the text embedding of '" + labels_[size_t(c)] + "' is zero or not finite");
    const double inv = 1.0 / std::sqrt(ss);
    for (int64_t e = 0; e < width; ++e) row[e] = float(row[e] * inv);
  }
}

void ZeroShot::score(const float* embedding, float* scores) const {
  double ss = 0;  // F.normalize: x / max(||x||, 1e-12)
  for (int64_t e = 0; e < width_; ++e) ss += double(embedding[e]) * embedding[e];
  const double inv = 1.0 / std::max(std::sqrt(ss), 1e-12);
  for (int64_t c = 0; c < classes(); ++c) {
    const float* t = text_.data() + c * width_;
    double dot = 0;
    for (int64_t e = 0; e < width_; ++e) dot += double(embedding[e]) * t[e];
    scores[c] = float(scale_ * dot * inv + bias_);
  }
}

std::vector<Scored> ZeroShot::top(const float* scores, int k) const {
  if (!sigmoid_) return top_k(scores, classes(), k);
  std::vector<Scored> all;
  for (int64_t c = 0; c < classes(); ++c) all.push_back({int(c), float(1.0 / (1.0 + std::exp(-double(scores[c]))))});
  const size_t n = std::min(all.size(), size_t(std::max(k, 0)));
  std::partial_sort(all.begin(), all.begin() + long(n), all.end(),
                    [](const Scored& a, const Scored& b) { return a.prob > b.prob || (a.prob == b.prob && a.index < b.index); });
  all.resize(n);
  return all;
}

}  // namespace vit

// Reading and writing a zero-shot labels file, and scoring image embeddings against it (zero_shot.h). OpenCLIP's
// zero-shot classifier: softmax(logit_scale.exp() * normalize(image) @ classifier); SigLIP's:
// sigmoid(logit_scale.exp() * cos + logit_bias) per class. The file holds the scale already exponentiated.
#include "zero_shot.h"

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/io/safetensors.h"
#include "engine/io/text.h"
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

// The file's class embeddings; with width > 0, refused first when of another width (the likeliest mistake: a
// file made for another model).
ClassEmbeddings read_file(const std::string& path, int64_t width) {
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
  if (width > 0 && shape[1] != width)
    throw ArgumentError(path, "text embeddings of width " + std::to_string(shape[1]) + ", but the model's image embeddings "
                        "have width " + std::to_string(width) + " (made for another model?)");
  ClassEmbeddings z;
  z.width = shape[1];
  const auto& meta = st->metadata();
  const auto labels = meta.find("labels");
  if (labels == meta.end()) throw Error(path, std::string("no labels in its __metadata__") + kHow);
  try {
    z.labels = nlohmann::json::parse(labels->second).get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception&) {
    throw Error(path, "its labels are not a JSON list of names");
  }
  if (int64_t(z.labels.size()) != shape[0])
    throw Error(path, std::to_string(z.labels.size()) + " labels for " + std::to_string(shape[0]) + " text embeddings");
  z.logit_scale = number(meta, "logit_scale", path);
  // How scores become probabilities is said, never guessed: CLIP's softmax over the classes, or SigLIP's
  // sigmoid per class, which needs the model's logit_bias.
  const auto act = meta.find("activation");
  if (act == meta.end())
    throw Error(path, std::string("no activation in its __metadata__ (softmax for CLIP, sigmoid for SigLIP)") + kHow);
  if (act->second != "softmax" && act->second != "sigmoid")
    throw Error(path, "activation '" + act->second + "' is not softmax or sigmoid");
  z.activation = act->second == "sigmoid" ? ZeroShotActivation::Sigmoid : ZeroShotActivation::Softmax;
  if (z.activation == ZeroShotActivation::Sigmoid && !meta.count("logit_bias"))
    throw Error(path, std::string("activation sigmoid (SigLIP) without its logit_bias in the __metadata__") + kHow);
  if (meta.count("logit_bias")) z.logit_bias = number(meta, "logit_bias", path);
  z.rows = st->to_f32("text_embeddings");
  return z;
}

}  // namespace

ClassEmbeddings read_class_embeddings(const std::string& path) { return read_file(path, 0); }

void write_class_embeddings(const std::string& path, const ClassEmbeddings& classes, const std::string& about) {
  const int64_t E = classes.width;
  if (classes.labels.empty() || E < 1 || classes.rows.size() != classes.labels.size() * size_t(E))
    throw Error(path, std::to_string(classes.rows.size()) + " numbers for " + std::to_string(classes.labels.size()) +
                          " classes of width " + std::to_string(E));
  std::string labels = "[";
  for (const std::string& n : classes.labels) labels += (labels.size() > 1 ? "," : "") + json_string(n);
  std::map<std::string, std::string> meta{{"labels", labels + "]"}, {"model", about}};
  char number[32];
  std::snprintf(number, sizeof number, "%.9g", double(classes.logit_scale));
  meta["logit_scale"] = number;
  const bool sigmoid = classes.activation == ZeroShotActivation::Sigmoid;
  meta["activation"] = sigmoid ? "sigmoid" : "softmax";
  if (sigmoid || classes.logit_bias != 0) {
    std::snprintf(number, sizeof number, "%.9g", double(classes.logit_bias));
    meta["logit_bias"] = number;
  }
  RowWriter w(path, E);
  for (size_t c = 0; c < classes.labels.size(); ++c) w.add(classes.rows.data() + c * size_t(E));
  w.finish("text_embeddings", meta);
}

ZeroShot ZeroShot::load(const std::string& path, int64_t width) { return ZeroShot(read_file(path, width), width, path); }

ZeroShot::ZeroShot(ClassEmbeddings classes, int64_t width, const std::string& source)
    : labels_(std::move(classes.labels)), text_(std::move(classes.rows)), width_(width), scale_(classes.logit_scale),
      bias_(classes.logit_bias), sigmoid_(classes.activation == ZeroShotActivation::Sigmoid) {
  if (classes.width != width)
    throw ArgumentError(source, "text embeddings of width " + std::to_string(classes.width) + ", but the model's image "
                        "embeddings have width " + std::to_string(width) + " (made for another model?)");
  if (labels_.empty() || text_.size() != labels_.size() * size_t(width))
    throw ArgumentError(source, std::to_string(labels_.size()) + " labels for " + std::to_string(text_.size()) +
                                    " numbers of text embeddings of width " + std::to_string(width));
  std::set<std::string> seen;
  for (const std::string& label : labels_)
    if (!seen.insert(label).second) throw Error(source, "the label '" + label + "' is there twice: each class once");
  if (!(scale_ > 0) || !std::isfinite(scale_)) throw Error(source, "logit_scale must be positive");
  if (!std::isfinite(bias_)) throw Error(source, "logit_bias must be a number");
  for (size_t c = 0; c < labels_.size(); ++c) {  // unit rows, as the classifier's columns are
    float* row = text_.data() + c * size_t(width);
    double ss = 0;
    for (int64_t e = 0; e < width; ++e) ss += double(row[e]) * row[e];
    if (!(ss > 0) || !std::isfinite(ss)) throw Error(source, "the text embedding of '" + labels_[c] + "' is zero or not finite");
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

// Zero-shot labels for CLIP and SigLIP image towers: class names and their text embeddings, made once from
// the model's text tower (scripts/export_text_embeddings.py), and each image scored by cosine similarity with
// them times the model's logit scale (plus its bias, SigLIP), as the reference code's zero-shot classifier
// does: probabilities by softmax (CLIP) or sigmoid (SigLIP).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vit {

struct Scored;

class ZeroShot {
 public:
  // A safetensors file: `text_embeddings` [C, E], __metadata__ labels (a JSON list of C distinct names),
  // logit_scale, activation ("softmax" or "sigmoid") and, with sigmoid, logit_bias (softmax may have one).
  // E must be `width`, the image embedding's; errors name the file and what is wrong.
  static ZeroShot load(const std::string& path, int64_t width);
  // The same from memory: labels (C distinct names), text [C, E] (made unit rows here, as load makes them), the
  // scale (exponentiated), the bias, and whether each class has its own sigmoid. `what` names the rows in errors.
  ZeroShot(std::vector<std::string> labels, std::vector<float> text, int64_t width, float scale, float bias,
           bool sigmoid, const std::string& what);

  int64_t classes() const { return int64_t(labels_.size()); }
  const std::vector<std::string>& labels() const { return labels_; }
  // An image embedding [E] -> scores [C]: logit_scale * cos(image, text_c) + logit_bias.
  void score(const float* embedding, float* scores) const;
  // The k best classes of a row of scores, with their probabilities (softmax over the classes, or each
  // class's own sigmoid).
  std::vector<Scored> top(const float* scores, int k) const;

 private:
  ZeroShot() = default;
  std::vector<std::string> labels_;
  std::vector<float> text_;  // [C, E], unit rows
  int64_t width_ = 0;
  float scale_ = 1, bias_ = 0;
  bool sigmoid_ = false;
};

}  // namespace vit

// Zero-shot labels for CLIP and SigLIP image towers: class names and their text embeddings, made once from
// the model's text tower (scripts/export_text_embeddings.py), and each image scored by cosine similarity with
// them times the model's logit scale (plus its bias, SigLIP), as the reference code's zero-shot classifier
// does: probabilities by softmax (CLIP) or sigmoid (SigLIP).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "vit/class_embeddings.h"

namespace vit {

struct Scored;

class ZeroShot {
 public:
  // Class embeddings for a model whose image embeddings have `width`: refused (errors naming `source`, the file
  // or flag they came from) unless of that width, with distinct labels, a positive scale and rows neither zero
  // nor infinite.
  ZeroShot(ClassEmbeddings classes, int64_t width, const std::string& source);
  // A text-embeddings file (read_class_embeddings, vit/class_embeddings.h), checked as above.
  static ZeroShot load(const std::string& path, int64_t width);

  int64_t classes() const { return int64_t(labels_.size()); }
  const std::vector<std::string>& labels() const { return labels_; }
  // An image embedding [E] -> scores [C]: logit_scale * cos(image, text_c) + logit_bias.
  void score(const float* embedding, float* scores) const;
  // The k best classes of a row of scores, with their probabilities (softmax over the classes, or each
  // class's own sigmoid).
  std::vector<Scored> top(const float* scores, int k) const;

 private:
  std::vector<std::string> labels_;
  std::vector<float> text_;  // [C, E], unit rows
  int64_t width_ = 0;
  float scale_ = 1, bias_ = 0;
  bool sigmoid_ = false;
};

}  // namespace vit

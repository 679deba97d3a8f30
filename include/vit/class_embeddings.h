// Zero-shot classes in memory: class names, their text embeddings and how the model scores an image against them.
// What `vit classify --labels-text` makes with the model's own text tower (vit::TextModel::zero_shot_classes) and
// what a --text-embeddings file (scripts/export_text_embeddings.py) holds; a loaded vit::Model takes it in memory.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace vit {

// How an image's scores become probabilities.
enum class ZeroShotActivation {
  Softmax,  // over the classes (CLIP)
  Sigmoid,  // each class's own (SigLIP, with its logit_bias)
};

struct ClassEmbeddings {
  std::vector<std::string> labels;  // C distinct class names
  std::vector<float> rows;          // [C, width], row-major; scaled to unit length when the model takes them
  int64_t width = 0;                // the image embedding's width (timm's model(x))
  float logit_scale = 1;            // already exponentiated: score = logit_scale * cosine + logit_bias
  float logit_bias = 0;
  ZeroShotActivation activation = ZeroShotActivation::Softmax;
};

// A text-embeddings file: `text_embeddings` [C, E] and in its __metadata__ labels (a JSON list of C names),
// logit_scale, activation ("softmax" or "sigmoid") and, with sigmoid, logit_bias. Throws vit::Error naming the
// file and what is missing or malformed (what a model then checks of the value: see LoadOptions).
ClassEmbeddings read_class_embeddings(const std::string& path);
// Writes them as that file, with `about` (the model they were made with) in its metadata. Throws vit::Error naming
// the file when it cannot be written.
void write_class_embeddings(const std::string& path, const ClassEmbeddings& classes, const std::string& about);

}  // namespace vit

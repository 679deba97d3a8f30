// One way to ask a loaded model: a Request (inputs of one kind, the output wanted) and its Answer. What
// Classifier::run answers and Batcher::submit queues (Classifier's other methods answer one kind each).
//
//   vit::Answer a = classifier.run(vit::Request::of_files({"a.jpg", "b.png"}, vit::Output::Top).with_topk(3));
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "vit/vit.h"

namespace vit {

// Which inputs a request holds.
enum class InputKind {
  Paths,    // image files (a path named like a video: embedded as Classifier::embed_video embeds it)
  Encoded,  // encoded images in memory (name, bytes)
  Pixels,   // decoded RGB images (views: valid until the answer)
  Tensors,  // preprocessed images [n, 3, H, W], as Classifier::preprocess gives them
};

// What a request asks of them.
enum class Output {
  Top,        // images: the top classes (Result)
  Embedding,  // images: an Embedding each; tensors: rows [n, embedding_size(embed)]
  Logits,     // tensors: rows [n, logits_size()] (of images: Result::logits, with keep_logits)
};

struct Request {
  InputKind input = InputKind::Encoded;  // which of the four below is filled
  std::vector<std::string> paths;
  std::vector<std::pair<std::string, std::string>> encoded;
  std::vector<Pixels> pixels;
  std::vector<float> tensors;  // [n, 3, H, W]
  int64_t n = 0;               // the tensors' images
  Output output = Output::Top;
  int topk = 5;                // Output::Top
  EmbedOptions embed;          // Output::Embedding (its video sampling: for video paths)

  static Request of_files(std::vector<std::string> paths, Output output);
  static Request of_images(std::vector<std::pair<std::string, std::string>> encoded, Output output);
  static Request of_images(std::vector<Pixels> pixels, Output output);
  static Request of_tensors(std::vector<float> tensors, int64_t n, Output output);
  Request with_topk(int k) && {
    topk = k;
    return std::move(*this);
  }
  Request with_embed(const EmbedOptions& options) && {
    embed = options;
    return std::move(*this);
  }

  int64_t size() const;                   // its inputs
  const std::string& name(size_t i) const;  // input i's file or name ("" for a tensor)
};

// Throws vit::ArgumentError when a request asks what its inputs cannot give (Top of tensors, Logits of images),
// its tensors' count is negative or its tensors are not per_image_floats floats each (the model's 3 x H x W):
// the one check of a request, Classifier::run's and Batcher::submit's.
void check_request(const Request& request, int64_t per_image_floats);

// One item per input, in order, in the field of the output asked for.
struct Answer {
  std::vector<Result> results;        // Output::Top
  std::vector<Embedding> embeddings;  // Output::Embedding of images
  std::vector<float> rows;            // tensors: [n, width]
  std::string error;                  // tensors: what stopped their pass (then no rows); images carry their own
};

}  // namespace vit

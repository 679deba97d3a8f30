// vit::Request (vit/request.h): its makers and check, and Classifier::run, the one place a request's input kind
// and output choose the Classifier's call.
#include "vit/request.h"

namespace vit {

Request Request::of_files(std::vector<std::string> paths, Output output) {
  Request r;
  r.input = InputKind::Paths;
  r.paths = std::move(paths);
  r.output = output;
  return r;
}

Request Request::of_images(std::vector<std::pair<std::string, std::string>> encoded, Output output) {
  Request r;
  r.input = InputKind::Encoded;
  r.encoded = std::move(encoded);
  r.output = output;
  return r;
}

Request Request::of_images(std::vector<Pixels> pixels, Output output) {
  Request r;
  r.input = InputKind::Pixels;
  r.pixels = std::move(pixels);
  r.output = output;
  return r;
}

Request Request::of_tensors(std::vector<float> tensors, int64_t n, Output output) {
  Request r;
  r.input = InputKind::Tensors;
  r.tensors = std::move(tensors);
  r.n = n;
  r.output = output;
  return r;
}

int64_t Request::size() const {
  switch (input) {
    case InputKind::Paths: return int64_t(paths.size());
    case InputKind::Encoded: return int64_t(encoded.size());
    case InputKind::Pixels: return int64_t(pixels.size());
    case InputKind::Tensors: return n;
  }
  return 0;
}

const std::string& Request::name(size_t i) const {
  static const std::string none;
  switch (input) {
    case InputKind::Paths: return paths[i];
    case InputKind::Encoded: return encoded[i].first;
    case InputKind::Pixels: return pixels[i].name;
    case InputKind::Tensors: return none;
  }
  return none;
}

void check_request(const Request& r, int64_t per_image_floats) {
  if (r.input == InputKind::Tensors) {
    if (r.n < 0) throw ArgumentError("a request of " + std::to_string(r.n) + " tensors");
    if (r.output == Output::Top)
      throw ArgumentError("the top classes are asked of images; of tensors ask their logits (Output::Logits)");
    if (int64_t(r.tensors.size()) != r.n * per_image_floats)
      throw ArgumentError(std::to_string(r.tensors.size()) + " floats for " + std::to_string(r.n) + " images of " +
                          std::to_string(per_image_floats));
  } else if (r.output == Output::Logits) {
    throw ArgumentError("logits are asked of tensors; of images ask the top classes with keep_logits");
  }
}

Answer Classifier::run(const Request& r, const BetweenBatches& between) const {
  const ModelInfo info = r.input == InputKind::Tensors ? this->info() : ModelInfo{};  // only tensors need its size
  check_request(r, 3 * info.input_height * info.input_width);
  Answer a;
  const bool top = r.output == Output::Top;
  switch (r.input) {
    case InputKind::Paths:
      if (top) a.results = classify(r.paths, r.topk, between);
      else a.embeddings = embed(r.paths, r.embed, between);
      break;
    case InputKind::Encoded:
      if (top) a.results = classify_encoded(r.encoded, r.topk, between);
      else a.embeddings = embed_encoded(r.encoded, r.embed, between);
      break;
    case InputKind::Pixels:
      if (top) a.results = classify_pixels(r.pixels, r.topk, between);
      else a.embeddings = embed_pixels(r.pixels, r.embed, between);
      break;
    case InputKind::Tensors:
      a.rows = r.output == Output::Logits ? logits(r.tensors.data(), r.n, between)
                                          : embeddings(r.tensors.data(), r.n, r.embed, between);
      break;
  }
  return a;
}

}  // namespace vit

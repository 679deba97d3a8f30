// vit::Request (vit/request.h): its makers and check, and Classifier::run and TextModel::run, the one place a
// request's input kind and output choose the call that answers it.
#include "vit/request.h"

#include "library/model_impl.h"

namespace vit {

namespace {

Request request_of(InputKind input, Output output) {
  Request r;
  r.input = input;
  r.output = output;
  return r;
}

}  // namespace

Request Request::of_files(std::vector<std::string> paths, Output output) {
  Request r = request_of(InputKind::Paths, output);
  r.paths = std::move(paths);
  return r;
}

Request Request::of_images(std::vector<std::pair<std::string, std::string>> encoded, Output output) {
  Request r = request_of(InputKind::Encoded, output);
  r.encoded = std::move(encoded);
  return r;
}

Request Request::of_images(std::vector<Pixels> pixels, Output output) {
  Request r = request_of(InputKind::Pixels, output);
  r.pixels = std::move(pixels);
  return r;
}

Request Request::of_tensors(std::vector<float> tensors, int64_t n, Output output) {
  Request r = request_of(InputKind::Tensors, output);
  r.tensors = std::move(tensors);
  r.n = n;
  return r;
}

Request Request::of_video(std::string path, Output output) {
  Request r = request_of(InputKind::Video, output);
  r.paths = {std::move(path)};
  return r;
}

Request Request::of_texts(std::vector<std::string> texts, Output output) {
  Request r = request_of(InputKind::Texts, output);
  r.texts = std::move(texts);
  return r;
}

int64_t Request::size() const {
  switch (input) {
    case InputKind::Paths: return int64_t(paths.size());
    case InputKind::Encoded: return int64_t(encoded.size());
    case InputKind::Pixels: return int64_t(pixels.size());
    case InputKind::Tensors: return n;
    case InputKind::Video: return int64_t(paths.size());
    case InputKind::Texts: return int64_t(texts.size());
  }
  return 0;
}

const std::string& Request::name(size_t i) const {
  static const std::string none;
  switch (input) {
    case InputKind::Paths:
    case InputKind::Video: return paths[i];
    case InputKind::Encoded: return encoded[i].first;
    case InputKind::Pixels: return pixels[i].name;
    case InputKind::Tensors:
    case InputKind::Texts: return none;
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
  if (r.output == Output::Attention && r.input != InputKind::Paths && r.input != InputKind::Encoded)
    throw ArgumentError("attention is explained of image files or encoded images");
  if (r.input == InputKind::Video && r.paths.size() != 1)
    throw ArgumentError("a video request holds one video, not " + std::to_string(r.paths.size()));
  if (r.input == InputKind::Texts && r.output != Output::Embedding)
    throw ArgumentError("texts are asked for their embeddings (Output::Embedding)");
}

namespace {

// Output::Attention of image files or encoded images: an Explainer over the Classifier's own Model (the same
// weights, their passes keeping the attention), drawing as the request asks.
std::vector<Explanation> explain(const Classifier& c, const ClassifierSettings& settings, const Request& r,
                                 const BetweenBatches& between) {
  ExplainerSettings drawing;
  drawing.max_pixels = settings.max_pixels;
  drawing.exif_transpose = settings.exif_transpose;
  drawing.method = r.method;
  drawing.picture_size = r.picture_size;
  const Explainer explainer(c.model(), drawing);
  if (r.input == InputKind::Encoded) return explainer.explain_encoded(r.encoded, between);
  std::vector<ImagePath> inputs;
  for (const std::string& p : r.paths) inputs.push_back(ImagePath{p, ""});
  std::vector<Explanation> all;
  explainer.explain(inputs, [&](std::vector<Explanation>& batch) {
    for (Explanation& e : batch) all.push_back(std::move(e));
  }, between);
  return all;
}

}  // namespace

Answer Classifier::run(const Request& r, const BetweenBatches& between) const {
  const ViTConfig& c = model().impl().network.config();
  check_request(r, c.in_chans * c.img_h() * c.img_w());  // a NaFlex model's are refused by name when run
  Answer a;
  const bool top = r.output == Output::Top;
  if (r.output == Output::Attention) {
    a.explanations = explain(*this, settings(), r, between);  // the Explainer checks the picture size
    return a;
  }
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
    case InputKind::Video:
      if (top) {
        classify_video(r.paths[0], r.embed.video, [&](const std::vector<Result>& frames) {
          a.results.insert(a.results.end(), frames.begin(), frames.end());
        }, r.topk, between);
      } else {
        a.embeddings = {embed_video(r.paths[0], r.embed, between)};
      }
      break;
    case InputKind::Texts:
      throw ArgumentError("texts go to the text tower (vit::TextModel::run); a Classifier runs the image tower");
  }
  return a;
}

Answer TextModel::run(const Request& r) const {
  check_request(r, 0);
  if (r.input != InputKind::Texts)
    throw ArgumentError("a TextModel embeds texts; images go to the image tower (vit::Classifier::run)");
  Answer a;
  a.texts = embed(r.texts, r.embed.normalize);
  return a;
}

}  // namespace vit

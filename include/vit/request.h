// One way to ask a loaded model: a Request (inputs of one kind, the output wanted) and its Answer. What
// Classifier::run answers for the image tower, TextModel::run for the text tower, and Batcher::submit queues
// (images and tensors; Classifier's and Explainer's other methods answer one kind each).
//
//   vit::Answer a = classifier.run(vit::Request::of_files({"a.jpg", "b.png"}, vit::Output::Top).with_topk(3));
//   vit::Answer v = classifier.run(vit::Request::of_video("clip.mp4", vit::Output::Embedding));
//   vit::Answer m = classifier.run(vit::Request::of_files({"a.jpg"}, vit::Output::Attention));
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "vit/explain.h"
#include "vit/text.h"
#include "vit/vit.h"

namespace vit {

// Which inputs a request holds.
enum class InputKind {
  Paths,    // image files (a path named like a video: embedded as Classifier::embed_video embeds it)
  Encoded,  // encoded images in memory (name, bytes)
  Pixels,   // decoded RGB images (views: valid until the answer)
  Tensors,  // preprocessed images [n, 3, H, W], as Classifier::preprocess gives them
  Video,    // one video file (paths[0]): its frames sampled as `embed.video` says
  Texts,    // strings for a text tower (TextModel::run; the image tower refuses them)
};

// What a request asks of them.
enum class Output {
  Top,        // images: the top classes (Result)
  Embedding,  // images: an Embedding each; tensors: rows [n, embedding_size(embed)]
  Logits,     // tensors: rows [n, logits_size()] (of images: Result::logits, with keep_logits)
  Attention,  // image files or encoded images: an Explanation each (top class, attention maps, pictures)
};

struct Request {
  InputKind input = InputKind::Encoded;  // which of the five below is filled
  std::vector<std::string> paths;        // Paths; Video: the one video
  std::vector<std::pair<std::string, std::string>> encoded;
  std::vector<Pixels> pixels;
  std::vector<float> tensors;  // [n, 3, H, W]
  int64_t n = 0;               // the tensors' images
  std::vector<std::string> texts;
  Output output = Output::Top;
  int topk = 5;                // Output::Top
  EmbedOptions embed;          // Output::Embedding (texts: its normalize); its video: which frames of a video
                               // (InputKind::Video, or a video among Paths) are classified or embedded
  ExplainMethod method = ExplainMethod::Rollout;  // Output::Attention: the map the picture shows
  int picture_size = 1024;     // Output::Attention: the pictures' longer side, kMinPictureSize to kMaxPictureSize

  static Request of_files(std::vector<std::string> paths, Output output);
  static Request of_images(std::vector<std::pair<std::string, std::string>> encoded, Output output);
  static Request of_images(std::vector<Pixels> pixels, Output output);
  static Request of_tensors(std::vector<float> tensors, int64_t n, Output output);
  static Request of_video(std::string path, Output output);
  static Request of_texts(std::vector<std::string> texts, Output output = Output::Embedding);
  Request with_topk(int k) && {
    topk = k;
    return std::move(*this);
  }
  Request with_embed(const EmbedOptions& options) && {
    embed = options;
    return std::move(*this);
  }
  Request with_video(const VideoSampling& sampling) && {
    embed.video = sampling;
    return std::move(*this);
  }
  Request with_picture(ExplainMethod m, int size) && {
    method = m;
    picture_size = size;
    return std::move(*this);
  }

  int64_t size() const;                   // its inputs
  const std::string& name(size_t i) const;  // input i's file or name ("" for a tensor)
};

// Throws vit::ArgumentError when a request asks what its inputs cannot give (Top of tensors, Logits of images,
// Attention of anything but image files and encoded images, anything but an Embedding of texts or a video's Top
// or Embedding, a video request of other than one path), its tensors' count is negative or its tensors are not
// per_image_floats floats each (the model's 3 x H x W): the one check of a request, Classifier::run's,
// TextModel::run's and Batcher::submit's.
void check_request(const Request& request, int64_t per_image_floats);

// One item per input, in order, in the field of the output asked for.
struct Answer {
  std::vector<Result> results;        // Output::Top (a video: one per sampled frame, frame and time_s set; an error
                                      // that stopped it last, frame -1)
  std::vector<Embedding> embeddings;  // Output::Embedding of images (a video: one, the mean of its frames')
  std::vector<Explanation> explanations;  // Output::Attention
  std::vector<TextEmbedding> texts;   // Output::Embedding of texts
  std::vector<float> rows;            // tensors: [n, width]
  std::string error;                  // tensors: what stopped their pass (then no rows); images carry their own
};

}  // namespace vit

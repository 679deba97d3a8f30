// What a classifier looked at: per image its top class, attention rolled out through every block (Abnar
// & Zuidema 2020) and the last block's attention of the answering token per head, and pictures of them
// over the photo. What `vit explain` runs (in f32) and `vit serve`'s /v1/explain (at the served model's
// precision, over its one copy of the weights); every block's attention kept. Standard types only;
// errors are vit::Error (vit/error.h).
//
//   vit::Explainer e("model_dir");
//   e.explain(vit::find_images({"photos/"}), [](std::vector<vit::Explanation>& batch) {
//     for (const vit::Explanation& x : batch) save(x.file + ".png", x.picture);  // PNG bytes
//   });
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "vit/vit.h"

namespace vit {

// What the picture shows: attention rolled out through every block, or the last block's alone (the mean
// of its heads).
enum class ExplainMethod { Rollout, Last };

// The range of a picture's longer side (ExplainOptions::picture_size, `vit explain --size`, /v1/explain's size).
constexpr int kMinPictureSize = 64, kMaxPictureSize = 8192;

// How an Explainer's calls draw, whatever the model (what is fixed at load is the Model's LoadOptions).
struct ExplainerSettings {
  int64_t max_pixels = kDefaultMaxPixels;  // larger images are refused from their header, before decoding
  bool exif_transpose = false;     // turn images as their EXIF orientation says (PIL's exif_transpose)
  ExplainMethod method = ExplainMethod::Rollout;
  int picture_size = 1024;         // the pictures' longer side at most, kMinPictureSize to kMaxPictureSize
  bool heads = false;              // also heads_picture
  std::string picture_software;    // named in each picture's "Software" text chunk, as image editors name themselves ("" for none)
};

// Both, for an Explainer that loads its own Model (at LoadOptions::precision, f32 unless asked otherwise).
struct ExplainOptions : LoadOptions, ExplainerSettings {};

// One input's explanation, or the error that kept it from being explained.
struct Explanation {
  std::string file;
  std::string error;           // empty when it worked
  Prediction top{};            // the most probable class
  std::vector<float> logits;   // [classes]
  // Over the image's patch grid [grid_rows, grid_cols] (the model's square grid, or a NaFlex model's grid
  // for this image at its own aspect ratio): the class token's attention (a model without one: every
  // token's, weighted equally) rolled out through the blocks, its maximum 1; and the last block's, per
  // head, as it is [heads, grid_rows, grid_cols].
  int64_t grid_rows = 0, grid_cols = 0;
  std::vector<float> rollout, last;
  std::string picture;         // PNG: the photo, the method's map blended over what the model saw, the top class below
  std::string heads_picture;   // PNG, with ExplainOptions::heads: one panel per head of the last block
};

class Explainer {
 public:
  // model: as vit::Classifier takes it. A model without classes (embeddings only, or a projection into a
  // joint image-text space without text_embeddings) has none to explain: explain() refuses it.
  explicit Explainer(const std::string& model, const ExplainOptions& options = {});
  // Over a loaded Model, sharing its weights: the maps come from passes at the model's precision (an int8
  // model's attention is its int8 passes' attention; Explainer::precision() says which).
  explicit Explainer(const Model& model, const ExplainerSettings& settings = {});
  ~Explainer();
  Explainer(Explainer&&) noexcept;
  Explainer& operator=(Explainer&&) noexcept;

  // The inputs (as find_images lists them; one that comes with an error keeps it, a video is refused)
  // a batch at a time: on_batch gets each batch's Explanations in input order as soon as they are made,
  // so that a long run holds one batch of pictures at a time. Safe to call from several threads at once.
  void explain(const std::vector<ImagePath>& inputs, const std::function<void(std::vector<Explanation>&)>& on_batch,
               const BetweenBatches& between = {}) const;

  // Encoded images in memory (name, bytes), as Classifier::classify_encoded takes them: their
  // Explanations in order, one batch at a time as explain() makes them.
  std::vector<Explanation> explain_encoded(const std::vector<std::pair<std::string, std::string>>& images,
                                           const BetweenBatches& between = {}) const;
  // The same drawn with this method and picture size (64 to 8192) instead of the options' (a server's
  // requests each choose theirs).
  std::vector<Explanation> explain_encoded(const std::vector<std::pair<std::string, std::string>>& images,
                                           ExplainMethod method, int picture_size,
                                           const BetweenBatches& between = {}) const;

  int64_t classes() const;  // 0 for a model without classes: explain() refuses it
  int64_t heads() const;
  // The patch grid every Explanation is over; 0 for a NaFlex model, whose images each have their own
  // (Explanation::grid_rows, grid_cols).
  int64_t grid_h() const;
  int64_t grid_w() const;
  const std::vector<std::string>& labels() const;
  // The precision of the passes the maps come from: the model's.
  Precision precision() const;
  ModelInfo info() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace vit

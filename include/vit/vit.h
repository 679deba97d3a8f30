// The engine as a library: load a ViT image classifier once (a vit::Model, vit/model.h), then classify image
// files, encoded images in memory, decoded pixels or preprocessed tensors. What `vit classify`, the Python module and the Spark
// job all call. Only standard types here; errors are vit::Error (vit/error.h).
//
//   vit::Classifier c("model_dir");
//   for (const vit::Result& r : c.classify({"a.jpg", "b.png"}, 5))
//     std::cout << r.file << ": " << (r.error.empty() ? r.top[0].label : r.error) << "\n";
//
// Signals: while a forward pass runs (and while weights are reordered at load), the calling thread and
// every OpenMP thread working for it block all asynchronous signals, because oneDNN 2.6's JIT GEMM
// kernels run with the stack pointer in a heap workspace, where a handler's frame would corrupt memory.
// A signal sent meanwhile is delivered when the pass ends, and each thread then gets back exactly the
// mask it had (a signal the host keeps blocked stays blocked). SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP
// and SIGSYS are never blocked. glibc's internal signals cannot be: do not pthread_cancel() a thread
// inside these calls, nor call setuid()/setgid() and their kin from another thread meanwhile. To end a
// long call early (a signal handler having set a flag, say), pass a BetweenBatches hook.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "vit/error.h"
#include "vit/limits.h"
#include "vit/model.h"
#include "vit/model_files.h"
#include "vit/model_kinds.h"
#include "vit/precision.h"

namespace vit {

// An image file to classify, or the reason a path cannot be one, known before it is read.
struct ImagePath {
  std::string file;
  std::string error;  // empty for a file to read
};

// PATHs in order; a folder contributes its image files (.jpg .jpeg .png .bmp .webp .tif .tiff .jp2 .j2k,
// any case), and with `videos` its videos too, recursively, sorted by name, each real folder once (so
// symbolic-link loops end); a PATH that does not exist, or an entry named like an image that is a folder
// or a broken link, comes with its error. How `vit classify`, the Python module and the Spark job turn
// folders into files.
std::vector<ImagePath> find_images(const std::vector<std::string>& paths, bool videos = false);

// Whether a path names a video, by its extension: .mp4 .mkv .avi .mov .webm, any case.
bool is_video_name(const std::string& path);

// The extensions find_images takes from folders, as help texts print them: ".jpg .jpeg ... .j2k" and
// ".mp4 ... .webm".
std::string image_extensions();
std::string video_extensions();

// How a Classifier's calls run, whatever the model (what is fixed at load is the Model's LoadOptions).
struct ClassifierSettings {
  int batch = 8;                     // images per forward pass
  int64_t max_pixels = kDefaultMaxPixels;  // larger images are refused from their header, before decoding
  bool keep_logits = false;          // fill Result::logits
  bool exif_transpose = false;       // turn images as their EXIF orientation says (PIL's exif_transpose;
                                     // timm does not, so off by default)
};

// Both, for a Classifier that loads its own Model.
struct ClassifierOptions : LoadOptions, ClassifierSettings {};

// Which frames of a video are classified or embedded: every Nth (every > 0), else the first frame at or after each
// multiple of 1/fps seconds.
struct VideoSampling {
  int every = 0;
  double fps = 1.0;
};

// What Classifier::embed returns per image. By default timm's forward_head(forward_features(x),
// pre_logits=True): the pooled features before any head.
struct EmbedOptions {
  bool head = false;       // apply the head too: timm's model(x) (logits; a model without a head: the same features)
  bool tokens = false;     // also keep the token sequence timm's forward_features returns
  bool normalize = false;  // scale each embedding to unit length (a video's: its mean, after averaging)
  VideoSampling video;     // which frames of a video are embedded
};

struct Embedding {
  std::string file;
  std::string error;             // empty when it worked
  std::vector<float> embedding;  // [E]
  std::vector<float> tokens;     // [T, D] with EmbedOptions::tokens
  int64_t sequence = 0;          // the tokens it ran as: prefix tokens and patches (a NaFlex image: its own grid's)
};

// Called by a long call between its batches (never while a forward pass runs): return false to stop the
// call, which then throws vit::Interrupted; the Classifier stays usable. How a host that handles signals
// (Python's Ctrl-C, a server shutting down) makes a long call end within about one batch.
using BetweenBatches = std::function<bool()>;

struct Prediction {
  int index;
  std::string label;
  float prob;
};

// One input's answer: its top classes, or the error that kept it from being classified.
struct Result {
  std::string file;              // the path, or the name given with the bytes or pixels
  std::string error;             // empty when it worked
  std::vector<Prediction> top;   // most probable first
  std::vector<float> logits;     // [classes], with ClassifierOptions::keep_logits
  int64_t frame = -1;            // a video frame's index (0 for the first); -1 for an image
  double time_s = 0;             // that frame's presentation time
};

// A decoded image: 8-bit RGB, rows of width * 3 bytes.
struct Pixels {
  std::string name;
  int width = 0, height = 0;
  const uint8_t* rgb = nullptr;
};

// What an encoded image's header declares, read without decoding it (how a server prices an image before
// it takes it): `image` when the bytes begin as an image of a format the engine reads; its width and
// height where the header is read without its decoder (JPEG, PNG, WebP, BMP, GIF, TGA), else 0.
struct ImageHeader {
  bool image = false;
  int64_t width = 0, height = 0;
};
ImageHeader read_image_header(const std::string& bytes);

// What one image becomes for a model: its decoded size, the size it is resized (and cropped) to, and the grid
// of patches that covers it: a NaFlex model's own grid for the image within its budget, else the model's
// square input's.
struct ImageInput {
  int width = 0, height = 0;              // decoded
  int input_width = 0, input_height = 0;  // resized to (NaFlex: the grid's pixels; else the crop)
  int grid_rows = 0, grid_cols = 0;       // patches
  int64_t max_patches = 0;                // a NaFlex model's budget, else 0
  int64_t tokens = 0;                     // prefix tokens and patches: the image's own sequence
};

struct Request;  // vit/request.h
struct Answer;

class Classifier {
 public:
  // model: a .safetensors file or the folder holding model.safetensors (and config.json). Throws
  // vit::Error when the model, the config or the labels cannot be used, vit::ArgumentError (a vit::Error)
  // when an option is out of range or does not suit the model (img_size not a multiple of its patch).
  explicit Classifier(const std::string& model, const ClassifierOptions& options = {});
  // Over a loaded Model, sharing its weights with whatever else holds it.
  explicit Classifier(const Model& model, const ClassifierSettings& settings = {});
  ~Classifier();
  Classifier(Classifier&&) noexcept;
  Classifier& operator=(Classifier&&) noexcept;

  // The one way to ask (vit/request.h): inputs of one kind and the output wanted, answered by the method below
  // for that kind and output. Throws vit::ArgumentError for a request its inputs cannot answer (check_request).
  Answer run(const Request& request, const BetweenBatches& between = {}) const;

  // One Result per input, in order. A file that is missing, unreadable or not an image gets its error;
  // the others are classified. Safe to call from several threads at once (each call runs its own Plan).
  std::vector<Result> classify(const std::vector<std::string>& paths, int topk = 5,
                               const BetweenBatches& between = {}) const;
  // Encoded image files in memory (name, bytes), as Spark's binaryFile source hands them over.
  std::vector<Result> classify_encoded(const std::vector<std::pair<std::string, std::string>>& images,
                                       int topk = 5, const BetweenBatches& between = {}) const;
  std::vector<Result> classify_pixels(const std::vector<Pixels>& images, int topk = 5,
                                      const BetweenBatches& between = {}) const;
  // A video's sampled frames, read through OpenCV's FFmpeg reader, a batch at a time: on_results gets
  // each batch's Results (frame and time_s set) in frame order as soon as it is classified. A video that
  // cannot be opened, or that stops early or is damaged, then gets one Result carrying that error (frame
  // -1), after the frames that could be read. Returns the number of frames classified.
  int64_t classify_video(const std::string& path, const VideoSampling& sampling,
                         const std::function<void(const std::vector<Result>&)>& on_results, int topk = 5,
                         const BetweenBatches& between = {}) const;

  // One Embedding per input, in order; failures as in classify(). A path named like a video
  // (is_video_name) is embedded as embed_video() embeds it, with options.video's sampling.
  std::vector<Embedding> embed(const std::vector<std::string>& paths, const EmbedOptions& options = {},
                               const BetweenBatches& between = {}) const;
  std::vector<Embedding> embed_encoded(const std::vector<std::pair<std::string, std::string>>& images,
                                       const EmbedOptions& options = {}, const BetweenBatches& between = {}) const;
  // A video's embedding: the mean of its sampled frames' embeddings (each before normalizing; the mean
  // normalized with options.normalize), and with options.tokens the mean of their token sequences, so a
  // video's row has the shape of an image's. A video that cannot be opened, stops early, is damaged or
  // has no sampled frame gets its error and no embedding: a mean over the frames that happened to be
  // read would stand for a different video.
  Embedding embed_video(const std::string& path, const EmbedOptions& options = {},
                        const BetweenBatches& between = {}) const;
  // Decoded images, as classify_pixels() takes them.
  std::vector<Embedding> embed_pixels(const std::vector<Pixels>& images, const EmbedOptions& options = {},
                                      const BetweenBatches& between = {}) const;
  // E for these options, and T and D of the tokens.
  int64_t embedding_size(const EmbedOptions& options = {}) const;
  int64_t tokens() const;
  int64_t width() const;

  // Preprocessed images [n, 3, H, W] (as preprocess() gives them) -> [n, logits_size()]: timm's model(x),
  // which is a classifier's logits [classes()], a CLIP tower's projection (its embedding; classes() is 0),
  // or the pooled features of a model without a head (DINOv2, a SigLIP tower: embed()'s rows); with
  // ClassifierOptions::text_embeddings the zero-shot scores [classes()], logit_scale * cosine + logit_bias.
  std::vector<float> logits(const float* images, int64_t n, const BetweenBatches& between = {}) const;
  int64_t logits_size() const;
  // Preprocessed images [n, 3, H, W] -> their embeddings [n, embedding_size(options)], as embed() gives
  // them for the images these tensors were made from (options.tokens and options.video aside).
  std::vector<float> embeddings(const float* images, int64_t n, const EmbedOptions& options = {},
                                const BetweenBatches& between = {}) const;
  // Probabilities [n, classes()] of the logits [n, classes()] logits() gives a model with classes, made as
  // Result::top's are: a softmax over the classes, or with text embeddings each class's sigmoid where the
  // file says so.
  std::vector<float> probabilities(const float* logits, int64_t n) const;
  // An image file as the model is fed it: [3, H, W], timm's eval transform.
  std::vector<float> preprocess(const std::string& path) const;
  // What an image file becomes for this model (`vit inspect --image`): the grid of patches it gets.
  ImageInput image_input(const std::string& path) const;

  const Model& model() const;
  const ClassifierSettings& settings() const;
  const std::vector<std::string>& labels() const;
  // The classes classify() ranks: the head's, or the text embeddings'; 0 for a model without a classifier
  // head (a projection or none), which classify() refuses.
  int64_t classes() const;
  ModelInfo info() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace vit

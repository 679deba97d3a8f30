// The engine as a library: load a ViT image classifier once, then classify image files, encoded images
// in memory, decoded pixels or preprocessed tensors. What `vit classify`, the Python module and the Spark
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

// The files loading a model reads, found as every loader finds them (the one place that knows the
// names): the weights (a folder's model.safetensors, or OpenCLIP's open_clip_model.safetensors; or the
// .safetensors file given), the config beside them (config.json; open_clip_config.json beside OpenCLIP's
// weights) unless one is given, preprocessor_config.json, and int8.safetensors (the rounded weights of a
// `vit quantize` folder). What `vit quantize` copies, and what no command's output may replace.
struct ModelFiles {
  std::string folder;        // where the weights are ("." for a bare file name)
  std::string weights;       // the checkpoint
  std::string config;        // the config read: the one given, else the one beside; "" for none
  std::string preprocessor;  // preprocessor_config.json beside the weights; "" for none
  std::string int8;          // int8.safetensors beside the weights; "" for none
  std::string name;          // the name loading takes hints from: the folder's, or a file's not named model.safetensors
  bool open_clip = false;    // OpenCLIP's names (open_clip_model.safetensors, open_clip_config.json)
  // Every path loading would read if it were there, present or not: the weights, the configs, the
  // preprocessor's and the int8 weights beside them.
  std::vector<std::string> read_paths() const;
};

// model: a .safetensors file or the folder holding one; config: a config.json given instead of the one
// beside ("" for that one). Throws vit::Error when there is no such path or the folder has no weights.
ModelFiles find_model_files(const std::string& model, const std::string& config = "");
// The name a model goes by (ModelInfo::name): the folder's, for a folder or the weights file a folder is
// loaded from (model.safetensors, open_clip_model.safetensors), else the file's stem.
std::string model_name(const std::string& model);

// How a model pools its tokens into the head's input: the class token's row, the mean of the patch tokens,
// or an attention pool (SigLIP's MAP head, attn_pool). The CLI's --pool and Python's pool= say cls, mean, map.
enum class Pool { Token, Avg, Map };
const char* pool_name(Pool p);  // timm's global_pool names: "token", "avg", "map"

// What a model's head is: a classifier over labels, a projection into a joint image-text space (a CLIP
// tower's: it labels nothing without text embeddings), or none (embeddings only: DINOv2, a SigLIP tower).
enum class HeadKind { None, Classifier, Projection };
const char* head_kind_name(HeadKind k);  // "none", "classifier", "projection"

struct ClassifierOptions {
  Precision precision = Precision::F32;
  int threads = 0;                   // threads for decoding and inference (0: all cores)
  std::string labels;                // a labels file, one per line; "" for the checkpoint's, else ImageNet-1k's
  std::string config;                // a config.json overriding the one beside the weights
  std::string arch;                  // the timm architecture of a checkpoint in timm's names without a config
                                     // (timm's create_model(arch) and its default pretrained config); "" for none
  int img_size = 0;                  // run at S x S, the position table resampled as timm does (0: the model's)
  int max_patches = 0;               // NaFlex models (SigLIP 2's naflexvit_*): each image at its own aspect ratio
                                     // within this many patches (0: 256, SigLIP 2's); refused for other models
  int batch = 8;                     // images per forward pass
  int64_t max_pixels = kDefaultMaxPixels;  // larger images are refused from their header, before decoding
  bool keep_logits = false;          // fill Result::logits
  bool exif_transpose = false;       // turn images as their EXIF orientation says (PIL's exif_transpose;
                                     // timm does not, so off by default)
  std::optional<Pool> pool;          // pool otherwise than the checkpoint (unset: its own)
  // Zero-shot labels for a CLIP or SigLIP image tower: a safetensors file of class names and their text
  // embeddings (scripts/export_text_embeddings.py). Its classes replace the model's: each image is scored
  // by the cosine similarity of its embedding (timm's model(x)) with theirs times the model's logit scale.
  std::string text_embeddings;
};

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

// What the engine understood of the model, as `vit inspect` prints it.
struct ModelInfo {
  std::string name;    // the model folder's name (of a lone weights file: the file's name without .safetensors)
  std::string family;  // ViT, DeiT, DeiT III, DINOv2, CLIP image tower, ...
  HeadKind head = HeadKind::None;
  int64_t embedding = 0;  // the width of Classifier::embed's rows (the pooled features)
  int64_t classes = 0;     // a classifier's classes, 0 for any other head (labels() has as many)
  int64_t projection = 0;  // a projection's width into its image-text space (embed's rows with head), else 0
  std::string file, arch, stored_as, precision, pool, interpolation, crop_mode;
  int64_t patch, width, depth, heads, mlp, input_height, input_width, tokens, parameters;
  double crop_pct;
  int resize;
  float mean[3], std[3];
  int64_t max_patches = 0;  // a NaFlex model's budget of patches per image (each at its own aspect ratio), else 0
  // The rest of what `vit inspect` prints. The model in words, a topic and its line each, in order
  // ("tokens", "197 = 196 patches (14x14) + class token"; "position table", ...).
  std::vector<std::pair<std::string, std::string>> description;
  // How it runs on this CPU: FLOPs per image (2 x multiply-adds), the weights' resident size at the
  // precision, the int8.safetensors `vit quantize` made beside them ("" for none), each linear layer
  // (the blocks' as blocks.*) and attention's products.
  double flops = 0;
  int64_t weight_bytes = 0;
  std::string int8_weights;
  struct Layer {
    std::string name, precision, how;  // "blocks.*.mlp.fc1", "int8", "matmul, s32 product, then dequantized per row"
  };
  std::vector<Layer> layers;
  std::string attention;
  // Where each setting came from, for those whose origin is known: ("heads", a config file's path),
  // ("patch", "file (tensor shapes)"), ("input size", "--img-size"), ...
  std::vector<std::pair<std::string, std::string>> origins;
};

class Classifier {
 public:
  // model: a .safetensors file or the folder holding model.safetensors (and config.json). Throws
  // vit::Error when the model, the config or the labels cannot be used, vit::ArgumentError (a vit::Error)
  // when an option is out of range or does not suit the model (img_size not a multiple of its patch).
  explicit Classifier(const std::string& model, const ClassifierOptions& options = {});
  ~Classifier();
  Classifier(Classifier&&) noexcept;
  Classifier& operator=(Classifier&&) noexcept;

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

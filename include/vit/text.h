// The text side of a CLIP or SigLIP checkpoint as programs embed it: texts to embeddings in the space the image
// tower's projection shares (docs/TEXT.md), each text tokenized as the checkpoint's own library tokenizes it, and
// the class embeddings of open_clip's zero-shot classifier. Only standard types here; errors are vit::Error.
//
//   vit::TextModel text("ViT-B-32");
//   for (const vit::TextEmbedding& e : text.embed({"a dog on a beach", "a cat"}, true))
//     std::cout << (e.error.empty() ? std::to_string(e.embedding[0]) : e.error) << "\n";
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "vit/class_embeddings.h"
#include "vit/error.h"
#include "vit/precision.h"

namespace vit {

struct TextOptions {
  Precision precision = Precision::F32;  // the blocks' linear layers' (as ClassifierOptions::precision)
  int threads = 0;                       // 0: all cores
  std::string tokenizer;                 // the folder of the tokenizer's files, when not the model's own
  int batch = 32;                        // texts per forward pass
};

// What the engine understood of a text tower, as `vit inspect` prints it.
struct TextInfo {
  std::string tower;      // "CLIP", "EVA-02 CLIP", "SigLIP", "SigLIP 2"
  std::string tokenizer;  // "open_clip's CLIP BPE", ... (docs/TEXT.md's table)
  std::string tokenizer_file;  // the file its vocabulary or model is read from
  std::string summary;    // blocks, width, heads, activation, mask, pooling, projection in one line
  int64_t context = 0;    // the most tokens a text has, start and end tokens included (77 CLIP, 64 SigLIP)
  int64_t embedding = 0;  // the width of an embedding
  // How the model scores an image against a text: logit_scale * cosine (+ logit_bias); the probabilities a
  // softmax over the classes (CLIP), or each class's sigmoid (SigLIP: a model with a logit_bias).
  float logit_scale = 0;  // already exponentiated; NaN when the checkpoint holds none
  std::optional<float> logit_bias;
};

// One text's tokens as the reference tokenizer makes them: the sequence, start and end tokens included, without
// the padding; or the reason the text cannot be one.
struct TextTokens {
  std::string error;           // empty when it worked: "not valid UTF-8: ...", "empty", "holds a NUL byte"
  std::vector<int32_t> ids;
  bool truncated = false;      // the text had more tokens than the context, and was cut as the reference cuts
};

struct TextEmbedding {
  std::string error;               // as TextTokens::error
  std::vector<float> embedding;    // [TextInfo::embedding]
  int64_t tokens = 0;              // its sequence's length (after cutting)
  bool truncated = false;
};

// The prompt templates of open_clip's zero-shot classification (open_clip/zero_shot_metadata.py), each with "{}"
// where the class name goes.
enum class PromptTemplates {
  ImageNet,  // OPENAI_IMAGENET_TEMPLATES: CLIP's 80 ("a bad photo of a {}.", ...)
  Simple,    // SIMPLE_IMAGENET_TEMPLATES: the 7 of them CLIP's paper kept ("itap of a {}.", ...)
};
const std::vector<std::string>& prompt_templates(PromptTemplates t);

struct Request;  // vit/request.h
struct Answer;

class TextModel {
 public:
  // model: a whole CLIP or SigLIP checkpoint (an OpenCLIP folder, a Hugging Face CLIPModel or SiglipModel folder, or
  // its weights file), with its tokenizer's files beside the weights (docs/TEXT.md) unless options.tokenizer names
  // their folder. Throws vit::Error naming the problem: a model with no text tower, a tokenizer file missing or
  // unreadable, a text tower the engine does not run; vit::ArgumentError for options out of range.
  explicit TextModel(const std::string& model, const TextOptions& options = {});
  const TextInfo& info() const;
  ~TextModel();
  TextModel(TextModel&&) noexcept;
  TextModel& operator=(TextModel&&) noexcept;

  // One answer per text, in order. A text that is empty, holds a NUL byte or is not UTF-8 gets its error, the others
  // their tokens. A text with more tokens than the context is cut as the reference cuts it (truncated).
  std::vector<TextTokens> tokens(const std::vector<std::string>& texts) const;
  // Their embeddings (open_clip's encode_text, transformers' get_text_features), each scaled to unit length with
  // `normalize`; the texts that cannot be tokenized get their errors, the others their embeddings. Safe to call
  // from several threads (the calls take turns).
  std::vector<TextEmbedding> embed(const std::vector<std::string>& texts, bool normalize = false) const;
  // The one way to ask (vit/request.h): Request::of_texts, answered in Answer::texts as embed() answers them
  // (normalized with request.embed.normalize). Throws vit::ArgumentError for any other request.
  Answer run(const Request& request) const;
  // Class embeddings [names, E], unit rows, as open_clip's build_zero_shot_classifier makes its columns: each name in
  // each template, each embedding normalized, their mean per name normalized again. Throws vit::ArgumentError
  // naming the class whose texts cannot be embedded.
  std::vector<float> class_embeddings(const std::vector<std::string>& names, PromptTemplates templates) const;
  // The same with the model's logit scale, bias and activation: the zero-shot classes a vit::Model takes
  // (LoadOptions::class_embeddings). Throws vit::Error when the checkpoint holds no logit_scale.
  ClassEmbeddings zero_shot_classes(const std::vector<std::string>& names, PromptTemplates templates) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Zero-shot labels from memory: the k most probable of the classes (TextModel::zero_shot_classes) for each image
// embedding [width] (the image tower's projection, or a headless tower's pooled features, as a Classifier scores
// it; null: an image without one, its list empty), scored exactly as a Model given the same classes scores them:
// logit_scale * cosine (+ logit_bias), softmax over the classes or each class's sigmoid. Throws vit::Error for
// classes a Model would refuse (ClassEmbeddings).
std::vector<std::vector<std::pair<int, float>>> zero_shot_top(const ClassEmbeddings& classes,
                                                              const std::vector<const float*>& images, int k);

// Whether a model's weights hold a text tower beside the image tower (read from the file's tensor names alone; what
// a TextModel of it makes of the tower is for its constructor to say). Throws vit::Error when the file cannot be read.
bool has_text_tower(const std::string& model);

}  // namespace vit

// The tensors of KServe v2's infer: reading a request (its one input, `image` BYTES, `pixel_values` FP32 or, on
// a model with a text tower, `text` BYTES, in JSON or as binary tensor data after the JSON header, and the outputs it names) and writing an
// answer's outputs the same two ways. Protocol only: what the tensors hold comes from kserve.cpp.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "http.h"
#include "models.h"

namespace vit::app {

enum class InferInput { Image, PixelValues, Text };
enum class InferOutput { Probabilities, Logits, TopIndices, TopProbabilities, Embedding };

const char* output_name(InferOutput o);
// The outputs a model gives: the four of its classes (if it has any) and its embedding.
std::vector<InferOutput> model_outputs(const ServedModel& m);

struct WantedOutput {
  InferOutput output;
  bool binary;
};

// An infer request, parsed: its one input and the outputs it asks for.
struct InferRequest {
  InferInput input = InferInput::Image;
  std::string datatype;
  nlohmann::json shape_json;
  std::vector<int64_t> shape;
  bool binary = false;   // its data came as binary tensor data (parameters.binary_data_size): ...
  std::string_view raw;  // ... these bytes of the body
  JsonBulk data;         // else its JSON data, flattened
  int64_t topk = 0;      // 0: no top-k output
  bool normalize = true; // the embedding at unit length (parameters.normalize)
  std::vector<WantedOutput> outputs;
  nlohmann::json id;
  bool wants(InferOutput o) const;
  bool wants_classes() const;  // any output but the embedding
};

// Reads the request's JSON header (and the binary data after it) for model m; throws HttpError 400.
InferRequest parse_infer(const HttpRequest& req, const ServedModel& m, int max_queue);
// The BYTES input's elements (`image`'s or `text`'s), named image[i] or text[i], and the `pixel_values` input's
// batch and values.
EncodedImages infer_bytes(InferRequest& r);
int64_t pixels_batch(const InferRequest& r, int64_t height, int64_t width);
std::vector<float> infer_pixels(InferRequest& r, int64_t n);

// What an answer holds: [B, C] logits and probabilities (and, for encoded images, the engine's top-k of
// each) and [B, E] embeddings, each as the request asked for them.
struct InferResults {
  int64_t batch = 0, classes = 0, embedding_size = 0;
  std::vector<float> logits, probabilities, embeddings;
  std::vector<Result> results;  // encoded images' top-k; empty for pixel_values
};
HttpResponse infer_answer(const InferRequest& r, const std::string& model, const InferResults& x);

}  // namespace vit::app

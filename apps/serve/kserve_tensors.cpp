// Reading and writing KServe v2 infer tensors (kserve_tensors.h).
#include "kserve_tensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace vit::app {

using nlohmann::json;

namespace {

struct OutputName {
  InferOutput output;
  const char* name;
};
constexpr OutputName kOutputs[] = {{InferOutput::Probabilities, "probabilities"},
                                   {InferOutput::Logits, "logits"},
                                   {InferOutput::TopIndices, "top_indices"},
                                   {InferOutput::TopProbabilities, "top_probabilities"},
                                   {InferOutput::Embedding, "embedding"}};

std::string output_list(const std::vector<InferOutput>& outputs) {
  std::string s;
  for (InferOutput o : outputs) s += (s.empty() ? "" : ", ") + std::string(output_name(o));
  return s;
}

// The request's one input; binary_at: where the binary data after the JSON header starts.
void parse_input(const std::string& body, const json& head, size_t binary_at, InferRequest* r) {
  if (!head.is_object()) throw HttpError(400, "the request is not a JSON object");
  if (!head.contains("inputs") || !head["inputs"].is_array() || head["inputs"].size() != 1)
    throw HttpError(400, "expected 'inputs' with one input, 'image' (BYTES), 'pixel_values' (FP32) or 'text' (BYTES)");
  const json& in = head["inputs"][0];
  if (!in.is_object() || !in.contains("name") || !in["name"].is_string()) throw HttpError(400, "an input without a name");
  const std::string name = in["name"];
  if (name != "image" && name != "pixel_values" && name != "text")
    throw HttpError(400, "unknown input '" + name + "'; this model takes 'image' (BYTES) or 'pixel_values' (FP32), "
                         "and 'text' (BYTES) with a text tower");
  r->input = name == "image" ? InferInput::Image : name == "text" ? InferInput::Text : InferInput::PixelValues;
  r->datatype = in.value("datatype", "");
  if (!in.contains("shape") || !in["shape"].is_array()) throw HttpError(400, "input '" + name + "' has no shape");
  r->shape_json = in["shape"];
  for (const json& d : in["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      throw HttpError(400, "input '" + name + "': shape " + in["shape"].dump() + " is not a list of sizes");
    r->shape.push_back(d.get<int64_t>());
  }
  const json params = in.value("parameters", json::object());
  r->binary = params.is_object() && params.contains("binary_data_size");
  if (r->binary) {
    const json& size = params["binary_data_size"];
    if (!size.is_number_unsigned() || size.get<uint64_t>() > body.size() - binary_at)
      throw HttpError(400, "input '" + name + "': binary_data_size " + size.dump() + " is more than the " +
                               std::to_string(body.size() - binary_at) + " bytes after the JSON header");
    r->raw = std::string_view(body).substr(binary_at, size.get<size_t>());
    binary_at += size.get<size_t>();
  } else if (!in.contains("data")) {
    throw HttpError(400, "input '" + name + "' has neither data nor parameters.binary_data_size");
  }
  if (binary_at != body.size())
    throw HttpError(400, std::to_string(body.size() - binary_at) + " bytes of binary data that no input claims");
}

// The outputs: those named, else the model's first (probabilities, or a headless model's embedding) and
// the top-k pair with parameters.topk.
void parse_outputs(const json& head, const ServedModel& m, InferRequest* r) {
  const std::vector<InferOutput> gives = model_outputs(m);
  const json rparams = head.value("parameters", json::object());
  if (rparams.is_object() && rparams.contains("topk")) {
    const json& k = rparams["topk"];
    if (r->input == InferInput::Text) throw HttpError(400, "parameters.topk: input 'text' gives embedding only");
    if (m.classes == 0) throw HttpError(400, "parameters.topk: model '" + m.name + "' has no classes; it gives embedding");
    if (!k.is_number_integer() || k.get<int64_t>() < 1 || k.get<int64_t>() > m.classes)
      throw HttpError(400, "parameters.topk: " + k.dump() + " is not a number from 1 to " + std::to_string(m.classes));
    r->topk = k.get<int64_t>();
  }
  if (rparams.is_object() && rparams.contains("normalize")) {
    if (!rparams["normalize"].is_boolean()) throw HttpError(400, "parameters.normalize: " + rparams["normalize"].dump() + " is not true or false");
    r->normalize = rparams["normalize"].get<bool>();
  }
  const bool all_binary = rparams.is_object() && rparams.value("binary_data_output", false);
  if (head.contains("outputs")) {
    if (!head["outputs"].is_array()) throw HttpError(400, "'outputs' is not a list");
    for (const json& o : head["outputs"]) {
      const std::string oname = o.is_object() && o.contains("name") && o["name"].is_string() ? o["name"].get<std::string>() : "";
      const auto known = std::find_if(gives.begin(), gives.end(), [&](InferOutput x) { return oname == output_name(x); });
      if (known == gives.end())
        throw HttpError(400, "unknown output '" + oname + "'; this model gives " + output_list(gives));
      if (r->input == InferInput::Text && *known != InferOutput::Embedding)
        throw HttpError(400, "output '" + oname + "': input 'text' gives embedding only");
      const json op = o.value("parameters", json::object());
      r->outputs.push_back({*known, all_binary || (op.is_object() && op.value("binary_data", false))});
    }
  } else {
    r->outputs.push_back({r->input == InferInput::Text ? InferOutput::Embedding : gives.front(), all_binary});
    if (r->topk) {
      r->outputs.push_back({InferOutput::TopIndices, all_binary});
      r->outputs.push_back({InferOutput::TopProbabilities, all_binary});
    }
  }
  if ((r->wants(InferOutput::TopIndices) || r->wants(InferOutput::TopProbabilities)) && !r->topk) r->topk = 5;
  r->id = head.contains("id") ? head["id"] : json();
}

// One output tensor of an answer.
struct Tensor {
  std::string datatype = "FP32";
  std::vector<int64_t> shape;
  std::vector<float> f32;
  std::vector<int64_t> i64;
};

// The k most probable classes of row b: the engine's for encoded images, else from the probabilities
// (the most probable first; ties: the lower index first).
std::vector<std::pair<int64_t, float>> top(const InferResults& x, int64_t b, int64_t k) {
  std::vector<std::pair<int64_t, float>> out;
  if (!x.results.empty()) {
    for (const Prediction& p : x.results[size_t(b)].top) out.push_back({p.index, p.prob});
    return out;
  }
  std::vector<int64_t> idx(static_cast<size_t>(x.classes));
  std::iota(idx.begin(), idx.end(), 0);
  const float* row = x.probabilities.data() + b * x.classes;
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int64_t i, int64_t j) { return row[i] > row[j] || (row[i] == row[j] && i < j); });
  for (int64_t i = 0; i < k; ++i) out.push_back({idx[size_t(i)], row[idx[size_t(i)]]});
  return out;
}

Tensor output(const InferRequest& r, InferOutput kind, const InferResults& x) {
  Tensor t;
  switch (kind) {
    case InferOutput::Probabilities:
    case InferOutput::Logits:
      t.shape = {x.batch, x.classes};
      t.f32 = kind == InferOutput::Logits ? x.logits : x.probabilities;
      return t;
    case InferOutput::Embedding:
      t.shape = {x.batch, x.embedding_size};
      t.f32 = x.embeddings;
      return t;
    case InferOutput::TopIndices:
    case InferOutput::TopProbabilities:
      break;
  }
  t.shape = {x.batch, r.topk};
  if (kind == InferOutput::TopIndices) t.datatype = "INT64";
  for (int64_t b = 0; b < x.batch; ++b)
    for (const auto& [index, prob] : top(x, b, r.topk)) {
      if (kind == InferOutput::TopIndices) t.i64.push_back(index);
      else t.f32.push_back(prob);
    }
  return t;
}

}  // namespace

const char* output_name(InferOutput o) {
  for (const OutputName& n : kOutputs)
    if (n.output == o) return n.name;
  return "";
}

std::vector<InferOutput> model_outputs(const ServedModel& m) {
  if (m.classes == 0) return {InferOutput::Embedding};
  return {InferOutput::Probabilities, InferOutput::Logits, InferOutput::TopIndices, InferOutput::TopProbabilities,
          InferOutput::Embedding};
}

bool InferRequest::wants(InferOutput o) const {
  return std::any_of(outputs.begin(), outputs.end(), [&](const WantedOutput& w) { return w.output == o; });
}

bool InferRequest::wants_classes() const {
  return std::any_of(outputs.begin(), outputs.end(), [](const WantedOutput& w) { return w.output != InferOutput::Embedding; });
}

InferRequest parse_infer(const HttpRequest& req, const ServedModel& m, int max_queue) {
  const std::string type = media_type(req.content_type);
  if (!type.empty() && type != "application/json" && type != "application/octet-stream")
    throw HttpError(415, "Content-Type " + type + ": the v2 protocol takes application/json, or JSON followed by "
                         "binary tensor data (application/octet-stream with Inference-Header-Content-Length)");
  size_t header_len = req.body.size();
  if (!req.inference_header_length.empty()) {
    const auto n = parse_count(req.inference_header_length, 0, int64_t(req.body.size()));
    if (!n)
      throw HttpError(400, "Inference-Header-Content-Length: '" + req.inference_header_length +
                               "' is not a length within the body's " + std::to_string(req.body.size()) + " bytes");
    header_len = size_t(*n);
  }
  InferRequest r;
  const JsonLimits limits{{"data"}, max_queue, "more than " + std::to_string(max_queue) +
                                                   " elements in an input's data (--max-queue)"};
  const json head = read_json(std::string_view(req.body).substr(0, header_len), limits, &r.data);
  parse_input(req.body, head, header_len, &r);
  parse_outputs(head, m, &r);
  return r;
}

EncodedImages infer_bytes(InferRequest& r) {
  const std::string input = r.input == InferInput::Text ? "text" : "image";
  if (r.datatype != "BYTES") throw HttpError(400, "input '" + input + "' has datatype '" + r.datatype + "', expected BYTES");
  if (r.shape.size() != 1) throw HttpError(400, "input '" + input + "' has shape " + r.shape_json.dump() + ", expected [B]");
  EncodedImages elements;
  const auto name = [&] { return input + "[" + std::to_string(elements.size()) + "]"; };
  if (r.binary) {  // each element a 4-byte little-endian length and its bytes
    for (size_t at = 0; at < r.raw.size();) {
      if (r.raw.size() - at < 4) throw HttpError(400, "input '" + input + "': binary data ends inside an element's length");
      uint32_t len = 0;
      for (int b = 3; b >= 0; --b) len = (len << 8) | uint8_t(r.raw[at + size_t(b)]);
      at += 4;
      if (len > r.raw.size() - at)
        throw HttpError(400, "input '" + input + "' element " + std::to_string(elements.size()) + ": length " +
                                 std::to_string(len) + " runs past the binary data");
      elements.emplace_back(name(), std::string(r.raw.substr(at, len)));
      at += len;
    }
  } else {
    if (!r.data.numbers.empty()) throw HttpError(400, "input '" + input + "' holds numbers, expected strings (BYTES)");
    for (std::string& e : r.data.strings) elements.emplace_back(name(), std::move(e));
  }
  if (int64_t(elements.size()) != r.shape[0])
    throw HttpError(400, "input '" + input + "' has shape [" + std::to_string(r.shape[0]) + "] but holds " +
                             std::to_string(elements.size()) + " elements");
  if (elements.empty()) throw HttpError(400, "input '" + input + "' holds no elements");
  return elements;
}

int64_t pixels_batch(const InferRequest& r, int64_t height, int64_t width) {
  if (r.datatype != "FP32") throw HttpError(400, "input 'pixel_values' has datatype '" + r.datatype + "', expected FP32");
  if (r.shape.size() != 4 || r.shape[1] != 3 || r.shape[2] != height || r.shape[3] != width || r.shape[0] < 1)
    throw HttpError(400, "input 'pixel_values' has shape " + r.shape_json.dump() + ", expected [B, 3, " +
                             std::to_string(height) + ", " + std::to_string(width) + "]");
  return r.shape[0];
}

std::vector<float> infer_pixels(InferRequest& r, int64_t n) {
  std::vector<float> pixels;
  if (r.binary) {
    if (int64_t(r.raw.size()) != n * 4)
      throw HttpError(400, "input 'pixel_values': " + std::to_string(r.raw.size()) + " bytes of binary data, expected " +
                               std::to_string(n * 4) + " for its shape");
    pixels.resize(size_t(n));
    std::memcpy(pixels.data(), r.raw.data(), r.raw.size());
  } else {
    if (!r.data.strings.empty()) throw HttpError(400, "input 'pixel_values' holds strings, expected numbers (FP32)");
    pixels = std::move(r.data.numbers);
    if (int64_t(pixels.size()) != n)
      throw HttpError(400, "input 'pixel_values': " + std::to_string(pixels.size()) + " numbers, expected " +
                               std::to_string(n) + " for its shape");
  }
  for (float v : pixels)
    if (!std::isfinite(v)) throw HttpError(400, "input 'pixel_values' holds a value that is not finite");
  return pixels;
}

HttpResponse infer_answer(const InferRequest& r, const std::string& model, const InferResults& x) {
  json response{{"model_name", model}, {"model_version", "1"}};
  if (!r.id.is_null()) response["id"] = r.id;
  response["outputs"] = json::array();
  std::string binary;
  for (const WantedOutput& w : r.outputs) {
    const Tensor t = output(r, w.output, x);
    json j{{"name", output_name(w.output)}, {"datatype", t.datatype}, {"shape", t.shape}};
    const bool i64 = t.datatype == "INT64";
    if (w.binary) {
      const size_t n = i64 ? t.i64.size() * 8 : t.f32.size() * 4;
      j["parameters"] = {{"binary_data_size", n}};
      binary.append(i64 ? reinterpret_cast<const char*>(t.i64.data()) : reinterpret_cast<const char*>(t.f32.data()), n);
    } else if (i64) {
      j["data"] = t.i64;
    } else {
      j["data"] = t.f32;
    }
    response["outputs"].push_back(std::move(j));
  }
  HttpResponse res = json_answer(response);
  if (!binary.empty()) {
    res.headers.push_back({"Inference-Header-Content-Length", std::to_string(res.body.size())});
    res.content_type = "application/octet-stream";
    res.body += binary;
  }
  return res;
}

}  // namespace vit::app

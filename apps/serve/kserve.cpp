// The KServe v2 routes of kserve.h: parsing an infer request (its one input and the outputs it names),
// queueing its images, and writing the outputs as JSON or as binary tensor data after the JSON header.
#include "kserve.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string_view>

namespace vit::app {

using nlohmann::json;

namespace {

enum class Input { Image, PixelValues };
enum class Output { Probabilities, Logits, TopIndices, TopProbabilities };

struct OutputName {
  Output output;
  const char* name;
};
constexpr OutputName kOutputs[] = {{Output::Probabilities, "probabilities"}, {Output::Logits, "logits"},
                                   {Output::TopIndices, "top_indices"}, {Output::TopProbabilities, "top_probabilities"}};

const char* name_of(Output o) {
  for (const OutputName& n : kOutputs)
    if (n.output == o) return n.name;
  return "";
}

struct Wanted {
  Output output;
  bool binary;
};

// An infer request, parsed: its one input and the outputs it asks for.
struct InferRequest {
  Input input = Input::Image;
  std::string datatype;
  json shape_json;
  std::vector<int64_t> shape;
  bool binary = false;      // its data came as binary tensor data (parameters.binary_data_size): ...
  std::string_view raw;     // ... these bytes of the body
  JsonBulk data;            // else its JSON data, flattened
  int64_t topk = 0;         // 0: no top-k output
  std::vector<Wanted> outputs;
  json id;
};

// The request's one input; binary_at: where the binary data after the JSON header starts.
void parse_input(const std::string& body, const json& head, size_t binary_at, InferRequest* r) {
  if (!head.is_object()) throw HttpError(400, "the request is not a JSON object");
  if (!head.contains("inputs") || !head["inputs"].is_array() || head["inputs"].size() != 1)
    throw HttpError(400, "expected 'inputs' with one input, 'image' (BYTES) or 'pixel_values' (FP32)");
  const json& in = head["inputs"][0];
  if (!in.is_object() || !in.contains("name") || !in["name"].is_string()) throw HttpError(400, "an input without a name");
  const std::string name = in["name"];
  if (name != "image" && name != "pixel_values")
    throw HttpError(400, "unknown input '" + name + "'; this model takes 'image' (BYTES) or 'pixel_values' (FP32)");
  r->input = name == "image" ? Input::Image : Input::PixelValues;
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

// The outputs: those named, else probabilities (and the top-k pair with parameters.topk).
void parse_outputs(const json& head, int64_t classes, InferRequest* r) {
  const json rparams = head.value("parameters", json::object());
  if (rparams.is_object() && rparams.contains("topk")) {
    const json& k = rparams["topk"];
    if (!k.is_number_integer() || k.get<int64_t>() < 1 || k.get<int64_t>() > classes)
      throw HttpError(400, "parameters.topk: " + k.dump() + " is not a number from 1 to " + std::to_string(classes));
    r->topk = k.get<int64_t>();
  }
  const bool all_binary = rparams.is_object() && rparams.value("binary_data_output", false);
  if (head.contains("outputs")) {
    if (!head["outputs"].is_array()) throw HttpError(400, "'outputs' is not a list");
    for (const json& o : head["outputs"]) {
      const std::string oname = o.is_object() ? o.value("name", "") : "";
      const auto known = std::find_if(std::begin(kOutputs), std::end(kOutputs),
                                      [&](const OutputName& n) { return oname == n.name; });
      if (known == std::end(kOutputs))
        throw HttpError(400, "unknown output '" + oname +
                                 "'; this model gives probabilities, logits, top_indices, top_probabilities");
      const json op = o.value("parameters", json::object());
      r->outputs.push_back({known->output, all_binary || (op.is_object() && op.value("binary_data", false))});
    }
  } else {
    r->outputs.push_back({Output::Probabilities, all_binary});
    if (r->topk) {
      r->outputs.push_back({Output::TopIndices, all_binary});
      r->outputs.push_back({Output::TopProbabilities, all_binary});
    }
  }
  for (const Wanted& w : r->outputs)
    if ((w.output == Output::TopIndices || w.output == Output::TopProbabilities) && !r->topk) r->topk = 5;
  r->id = head.contains("id") ? head["id"] : json();
}

// The 'image' input's elements: BYTES, each a 4-byte little-endian length and its bytes when binary.
EncodedImages infer_images(InferRequest& r) {
  if (r.datatype != "BYTES") throw HttpError(400, "input 'image' has datatype '" + r.datatype + "', expected BYTES");
  if (r.shape.size() != 1) throw HttpError(400, "input 'image' has shape " + r.shape_json.dump() + ", expected [B]");
  EncodedImages images;
  const auto name = [&] { return "image[" + std::to_string(images.size()) + "]"; };
  if (r.binary) {
    for (size_t at = 0; at < r.raw.size();) {
      if (r.raw.size() - at < 4) throw HttpError(400, "input 'image': binary data ends inside an element's length");
      uint32_t len = 0;
      for (int b = 3; b >= 0; --b) len = (len << 8) | uint8_t(r.raw[at + size_t(b)]);
      at += 4;
      if (len > r.raw.size() - at)
        throw HttpError(400, "input 'image' element " + std::to_string(images.size()) + ": length " +
                                 std::to_string(len) + " runs past the binary data");
      images.emplace_back(name(), std::string(r.raw.substr(at, len)));
      at += len;
    }
  } else {
    if (!r.data.numbers.empty()) throw HttpError(400, "input 'image' holds numbers, expected strings (BYTES)");
    for (std::string& e : r.data.strings) images.emplace_back(name(), std::move(e));
  }
  if (int64_t(images.size()) != r.shape[0])
    throw HttpError(400, "input 'image' has shape [" + std::to_string(r.shape[0]) + "] but holds " +
                             std::to_string(images.size()) + " elements");
  if (images.empty()) throw HttpError(400, "input 'image' holds no images");
  return images;
}

// The 'pixel_values' input's batch size, once its datatype and shape are checked against the model's.
int64_t pixels_batch(const InferRequest& r, int64_t height, int64_t width) {
  if (r.datatype != "FP32") throw HttpError(400, "input 'pixel_values' has datatype '" + r.datatype + "', expected FP32");
  if (r.shape.size() != 4 || r.shape[1] != 3 || r.shape[2] != height || r.shape[3] != width || r.shape[0] < 1)
    throw HttpError(400, "input 'pixel_values' has shape " + r.shape_json.dump() + ", expected [B, 3, " +
                             std::to_string(height) + ", " + std::to_string(width) + "]");
  return r.shape[0];
}

// The 'pixel_values' input's n values, all finite.
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

// What an answer needs besides the numbers: the outputs asked for, the request's id, the model.
struct AnswerSpec {
  std::vector<Wanted> outputs;
  json id;
  std::string model;
  int64_t classes = 0, topk = 0;
};

// One output tensor of an answer.
struct Tensor {
  std::string datatype = "FP32";
  std::vector<int64_t> shape;
  std::vector<float> f32;
  std::vector<int64_t> i64;
};

// The outputs asked for, from [B, C] logits and probabilities and, for images, their engine-computed top-k.
Tensor output(const AnswerSpec& a, Output kind, const std::vector<float>& logits, const std::vector<float>& probs,
              const std::vector<Result>* results) {
  const int64_t B = int64_t(logits.size()) / a.classes, C = a.classes;
  Tensor t;
  if (kind == Output::Probabilities || kind == Output::Logits) {
    t.shape = {B, C};
    t.f32 = kind == Output::Logits ? logits : probs;
    return t;
  }
  t.shape = {B, a.topk};
  if (kind == Output::TopIndices) t.datatype = "INT64";
  for (int64_t b = 0; b < B; ++b) {
    std::vector<std::pair<int64_t, float>> top;
    if (results) {
      for (const Prediction& p : (*results)[size_t(b)].top) top.push_back({p.index, p.prob});
    } else {  // the most probable first; ties: the lower index first
      std::vector<int64_t> idx(static_cast<size_t>(C));
      std::iota(idx.begin(), idx.end(), 0);
      const float* row = probs.data() + b * C;
      std::partial_sort(idx.begin(), idx.begin() + a.topk, idx.end(),
                        [&](int64_t i, int64_t j) { return row[i] > row[j] || (row[i] == row[j] && i < j); });
      for (int64_t k = 0; k < a.topk; ++k) top.push_back({idx[size_t(k)], row[idx[size_t(k)]]});
    }
    for (const auto& [index, prob] : top) {
      if (kind == Output::TopIndices) t.i64.push_back(index);
      else t.f32.push_back(prob);
    }
  }
  return t;
}

// The answer: JSON, with the outputs asked for as binary after it (Inference-Header-Content-Length).
HttpResponse infer_answer(const AnswerSpec& a, const std::vector<float>& logits, const std::vector<float>& probs,
                          const std::vector<Result>* results) {
  json response{{"model_name", a.model}, {"model_version", "1"}};
  if (!a.id.is_null()) response["id"] = a.id;
  response["outputs"] = json::array();
  std::string binary;
  for (const Wanted& w : a.outputs) {
    const Tensor t = output(a, w.output, logits, probs, results);
    json j{{"name", name_of(w.output)}, {"datatype", t.datatype}, {"shape", t.shape}};
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
  HttpResponse r = json_answer(response);
  if (!binary.empty()) {
    r.headers.push_back({"Inference-Header-Content-Length", std::to_string(r.body.size())});
    r.content_type = "application/octet-stream";
    r.body += binary;
  }
  return r;
}

void infer(Service& service, HttpRequest& req, const PathParams& params, const Reply& reply) {
  ServedModel& m = service.model(params.at("name"));
  Service::require_classes(m);
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
  const int max_queue = service.options().max_queue;
  InferRequest r;
  const json head = read_json(std::string_view(req.body).substr(0, header_len),
                              {{"data"}, max_queue, "more than " + std::to_string(max_queue) +
                                                        " elements in an input's data (--max-queue)"}, &r.data);
  parse_input(req.body, head, header_len, &r);
  parse_outputs(head, m.classes, &r);
  auto spec = std::make_shared<const AnswerSpec>(AnswerSpec{r.outputs, r.id, m.name, m.classes, r.topk});
  const Classifier* classifier = m.classifier.get();
  if (r.input == Input::Image) {
    EncodedImages images = infer_images(r);
    service.check_queue_room(int64_t(images.size()));
    const int64_t pixels = service.take_pixels(images);
    const bool ok = m.batcher->submit(std::move(images), int(std::max<int64_t>(r.topk, 1)),
                                      [&service, spec, reply, pixels, classifier](std::vector<Result> rs) {
      service.give_pixels(pixels);
      for (size_t i = 0; i < rs.size(); ++i)
        if (!rs[i].error.empty()) {
          service.images_done(0, 1);
          return reply.fail(HttpError(400, "input 'image' element " + std::to_string(i) + ": " + rs[i].error));
        }
      service.images_done(int64_t(rs.size()), 0);
      std::vector<float> logits;
      for (const Result& x : rs) logits.insert(logits.end(), x.logits.begin(), x.logits.end());
      reply(infer_answer(*spec, logits, classifier->probabilities(logits.data(), int64_t(rs.size())), &rs));
    });
    if (!ok) {
      service.give_pixels(pixels);
      throw service.queue_full();
    }
    return;
  }
  const int64_t B = pixels_batch(r, m.info.input_height, m.info.input_width);
  service.check_queue_room(B);
  std::vector<float> pixels = infer_pixels(r, B * 3 * m.info.input_height * m.info.input_width);
  const bool ok = m.batcher->submit(std::move(pixels), B, [&service, spec, reply, B, classifier](std::vector<float> logits,
                                                                                                std::string error) {
    if (!error.empty()) return reply.fail(HttpError(500, error));
    service.images_done(B, 0);
    reply(infer_answer(*spec, logits, classifier->probabilities(logits.data(), B), nullptr));
  });
  if (!ok) throw service.queue_full();
}

json model_metadata(const ServedModel& m) {
  const json io = json::array({json{{"name", "image"}, {"datatype", "BYTES"}, {"shape", {-1}}},
                               json{{"name", "pixel_values"}, {"datatype", "FP32"},
                                    {"shape", {-1, 3, m.info.input_height, m.info.input_width}}}});
  const json out = json::array({json{{"name", "probabilities"}, {"datatype", "FP32"}, {"shape", {-1, m.classes}}},
                                json{{"name", "logits"}, {"datatype", "FP32"}, {"shape", {-1, m.classes}}},
                                json{{"name", "top_indices"}, {"datatype", "INT64"}, {"shape", {-1, -1}}},
                                json{{"name", "top_probabilities"}, {"datatype", "FP32"}, {"shape", {-1, -1}}}});
  return {{"name", m.name}, {"versions", json::array({"1"})}, {"platform", "vit"}, {"inputs", io}, {"outputs", out}};
}

// {"ready": ...}, 503 until ready.
HttpResponse readiness(json body, bool ready) {
  body["ready"] = ready;
  return json_answer(body, ready ? 200 : 503);
}

}  // namespace

void add_kserve_routes(Service& service, std::vector<Route>* routes) {
  Service* s = &service;
  const auto route = [&](const char* method, const char* pattern, auto handle) {
    routes->push_back({method, pattern, ErrorForm::Plain, handle});
  };
  route("GET", "/v2", [](HttpRequest&, const PathParams&, const Reply& reply) {
    reply(json_answer({{"name", "vit"}, {"version", VIT_VERSION}, {"extensions", json::array({"binary_tensor_data"})}}));
  });
  route("GET", "/v2/health/live", [](HttpRequest&, const PathParams&, const Reply& reply) {
    reply(json_answer({{"live", true}}));
  });
  route("GET", "/v2/health/ready", [s](HttpRequest&, const PathParams&, const Reply& reply) {
    reply(readiness(json::object(), s->ready()));
  });
  route("GET", "/v2/models/{name}", [s](HttpRequest&, const PathParams& p, const Reply& reply) {
    reply(json_answer(model_metadata(s->model(p.at("name")))));
  });
  route("GET", "/v2/models/{name}/ready", [s](HttpRequest&, const PathParams& p, const Reply& reply) {
    const ServedModel& m = s->model(p.at("name"));
    reply(readiness({{"name", m.name}}, m.ready));
  });
  route("POST", "/v2/models/{name}/infer", [s](HttpRequest& req, const PathParams& p, const Reply& reply) {
    infer(*s, req, p, reply);
  });
}

}  // namespace vit::app

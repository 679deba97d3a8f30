// The endpoints of `vit serve` (apps/serve_api.h): parsing and checking each request, queueing its images
// on the Batcher, and writing its answer as JSON, or as KServe's binary tensor data when asked.
#include "serve_api.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "vit/topk.h"

namespace vit::app {

using nlohmann::json;

HttpResponse json_error(int status, const std::string& message) {
  HttpResponse r;
  r.status = status;
  r.body = json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

namespace {

HttpResponse json_ok(const json& j) {
  HttpResponse r;
  r.body = j.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

// A request's top classes as `vit classify --json` writes them.
json top_json(const Result& r) {
  json t = json::array();
  for (const Prediction& p : r.top) t.push_back({{"index", p.index}, {"label", p.label}, {"prob", p.prob}});
  return t;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

// The media type of a Content-Type value, lower case, parameters dropped.
std::string media_type(const std::string& content_type) {
  std::string t = lower(content_type.substr(0, content_type.find(';')));
  t.erase(0, t.find_first_not_of(" \t"));
  t.erase(t.find_last_not_of(" \t") + 1);
  return t;
}

// A parameter of a Content-Type value (boundary=...), quotes removed; "" when absent.
std::string content_type_parameter(const std::string& content_type, const std::string& name) {
  size_t pos = 0;
  while ((pos = content_type.find(';', pos)) != std::string::npos) {
    ++pos;
    const size_t start = content_type.find_first_not_of(" \t", pos);
    if (start == std::string::npos) break;
    const size_t eq = content_type.find('=', start);
    if (eq == std::string::npos) break;
    if (lower(content_type.substr(start, eq - start)) != name) continue;
    std::string v = content_type.substr(eq + 1, content_type.find(';', eq) - eq - 1);
    v.erase(v.find_last_not_of(" \t") + 1);
    if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
    return v;
  }
  return "";
}

std::string query_value(const std::string& query, const std::string& key, bool* found) {
  *found = false;
  size_t pos = 0;
  while (pos <= query.size()) {
    const size_t amp = std::min(query.find('&', pos), query.size());
    const std::string item = query.substr(pos, amp - pos);
    const size_t eq = item.find('=');
    if (item.substr(0, eq) == key) {
      *found = true;
      return eq == std::string::npos ? "" : item.substr(eq + 1);
    }
    pos = amp + 1;
  }
  return "";
}

// A whole number in [lo, hi] or an error message naming what.
bool parse_int(const std::string& s, int64_t lo, int64_t hi, int64_t* out) {
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos) return false;
  *out = std::stoll(s);
  return *out >= lo && *out <= hi;
}

struct Part {
  std::string name, bytes;
};

// multipart/form-data (RFC 7578): each part's file name (else its field name) and bytes. Throws a message.
std::vector<Part> parse_multipart(const std::string& body, const std::string& boundary) {
  if (boundary.empty()) throw std::string("multipart/form-data without a boundary");
  const std::string delim = "--" + boundary;
  size_t pos = body.find(delim);
  if (pos == std::string::npos) throw std::string("multipart body without its boundary");
  std::vector<Part> parts;
  for (;;) {
    pos += delim.size();
    if (body.compare(pos, 2, "--") == 0) break;  // the closing delimiter
    if (body.compare(pos, 2, "\r\n") != 0) throw std::string("malformed multipart body after a boundary");
    pos += 2;
    const size_t head_end = body.find("\r\n\r\n", pos);
    if (head_end == std::string::npos) throw std::string("multipart part without the end of its headers");
    const std::string head = body.substr(pos, head_end - pos);
    const size_t next = body.find("\r\n" + delim, head_end + 4);
    if (next == std::string::npos) throw std::string("multipart body without its closing boundary");
    Part p;
    p.bytes = body.substr(head_end + 4, next - head_end - 4);
    // Content-Disposition: form-data; name="x"; filename="y.jpg"
    for (size_t line = 0; line < head.size();) {
      const size_t end = std::min(head.find("\r\n", line), head.size());
      const std::string h = head.substr(line, end - line);
      if (lower(h.substr(0, 20)) == "content-disposition:") {
        const std::string v = h.substr(20);
        const std::string file = content_type_parameter(v, "filename"), name = content_type_parameter(v, "name");
        p.name = !file.empty() ? file : name;
      }
      line = end + 2;
    }
    if (p.name.empty()) p.name = "part " + std::to_string(parts.size() + 1);
    parts.push_back(std::move(p));
    pos = next + 2;
  }
  if (parts.empty()) throw std::string("multipart body without parts");
  return parts;
}

void softmax(const float* logits, int64_t classes, float* out) {
  const float mx = *std::max_element(logits, logits + classes);
  double sum = 0;
  for (int64_t i = 0; i < classes; ++i) sum += std::exp(double(logits[i] - mx));
  for (int64_t i = 0; i < classes; ++i) out[i] = float(std::exp(double(logits[i] - mx)) / sum);
}

// The flattened numbers of a JSON tensor's data (nested or flat). Throws a message.
void flatten_numbers(const json& j, std::vector<float>* out) {
  if (j.is_array()) {
    for (const json& e : j) flatten_numbers(e, out);
  } else if (j.is_number()) {
    out->push_back(j.get<float>());
  } else {
    throw std::string("data holds " + std::string(j.type_name()) + ", expected numbers");
  }
}

void flatten_strings(const json& j, std::vector<std::string>* out) {
  if (j.is_array()) {
    for (const json& e : j) flatten_strings(e, out);
  } else if (j.is_string()) {
    out->push_back(j.get<std::string>());
  } else {
    throw std::string("data holds " + std::string(j.type_name()) + ", expected strings");
  }
}

// One output tensor of an infer answer, in JSON or as binary data.
struct Output {
  std::string name, datatype;
  std::vector<int64_t> shape;
  std::vector<float> f32;
  std::vector<int64_t> i64;
  bool binary = false;
};

// A KServe v2 infer request, parsed: its one input ('image' or 'pixel_values') and the outputs it asks
// for. The parse functions throw a std::string naming what is wrong (a 400).
struct V2Request {
  std::string name, datatype;  // the input
  json shape_json;
  std::vector<int64_t> shape;
  bool binary = false;         // its data came as binary (parameters.binary_data_size) ...
  std::string raw;             // ... these bytes
  json data;                   // else its JSON data
  int64_t topk = 0;            // 0: no top-k output
  std::vector<std::pair<std::string, bool>> wanted;  // outputs: name, binary
  json id;
};

// The request's one input; binary_at: where the binary data after the JSON header starts.
void parse_v2_input(const std::string& body, const json& head, size_t binary_at, V2Request* r) {
  if (!head.is_object()) throw std::string("the request is not a JSON object");
  if (!head.contains("inputs") || !head["inputs"].is_array() || head["inputs"].size() != 1)
    throw std::string("expected 'inputs' with one input, 'image' (BYTES) or 'pixel_values' (FP32)");
  const json& in = head["inputs"][0];
  if (!in.is_object() || !in.contains("name") || !in["name"].is_string()) throw std::string("an input without a name");
  const std::string name = in["name"];
  if (name != "image" && name != "pixel_values")
    throw std::string("unknown input '" + name + "'; this model takes 'image' (BYTES) or 'pixel_values' (FP32)");
  r->name = name;
  r->datatype = in.value("datatype", "");
  if (!in.contains("shape") || !in["shape"].is_array()) throw std::string("input '" + name + "' has no shape");
  r->shape_json = in["shape"];
  for (const json& d : in["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      throw std::string("input '" + name + "': shape " + in["shape"].dump() + " is not a list of sizes");
    r->shape.push_back(d.get<int64_t>());
  }
  const json params = in.value("parameters", json::object());
  r->binary = params.is_object() && params.contains("binary_data_size");
  if (r->binary) {
    const json& size = params["binary_data_size"];
    if (!size.is_number_unsigned() || size.get<uint64_t>() > body.size() - binary_at)
      throw std::string("input '" + name + "': binary_data_size " + size.dump() + " is more than the " +
                        std::to_string(body.size() - binary_at) + " bytes after the JSON header");
    r->raw = body.substr(binary_at, size.get<size_t>());
    binary_at += size.get<size_t>();
  } else if (!in.contains("data")) {
    throw std::string("input '" + name + "' has neither data nor parameters.binary_data_size");
  } else {
    r->data = in["data"];
  }
  if (binary_at != body.size())
    throw std::string(std::to_string(body.size() - binary_at) + " bytes of binary data that no input claims");
}

// The outputs: those named, else probabilities (and the top-k pair with parameters.topk).
void parse_v2_outputs(const json& head, int64_t classes, V2Request* r) {
  const json rparams = head.value("parameters", json::object());
  if (rparams.is_object() && rparams.contains("topk")) {
    const json& k = rparams["topk"];
    if (!k.is_number_integer() || k.get<int64_t>() < 1 || k.get<int64_t>() > classes)
      throw std::string("parameters.topk: " + k.dump() + " is not a number from 1 to " + std::to_string(classes));
    r->topk = k.get<int64_t>();
  }
  const bool all_binary = rparams.is_object() && rparams.value("binary_data_output", false);
  if (head.contains("outputs")) {
    if (!head["outputs"].is_array()) throw std::string("'outputs' is not a list");
    for (const json& o : head["outputs"]) {
      const std::string oname = o.is_object() ? o.value("name", "") : "";
      if (oname != "probabilities" && oname != "logits" && oname != "top_indices" && oname != "top_probabilities")
        throw std::string("unknown output '" + oname + "'; this model gives probabilities, logits, top_indices, top_probabilities");
      const json op = o.value("parameters", json::object());
      r->wanted.push_back({oname, all_binary || (op.is_object() && op.value("binary_data", false))});
    }
  } else {
    r->wanted.push_back({"probabilities", all_binary});
    if (r->topk) {
      r->wanted.push_back({"top_indices", all_binary});
      r->wanted.push_back({"top_probabilities", all_binary});
    }
  }
  for (const auto& w : r->wanted)
    if (w.first.rfind("top_", 0) == 0 && !r->topk) r->topk = 5;
  r->id = head.contains("id") ? head["id"] : json();
}

V2Request parse_v2(const std::string& body, const json& head, size_t header_len, int64_t classes) {
  V2Request r;
  parse_v2_input(body, head, header_len, &r);
  parse_v2_outputs(head, classes, &r);
  return r;
}

// The 'image' input's elements: BYTES, each a 4-byte little-endian length and its bytes when binary.
std::vector<std::pair<std::string, std::string>> v2_images(const V2Request& r) {
  if (r.datatype != "BYTES") throw std::string("input 'image' has datatype '" + r.datatype + "', expected BYTES");
  if (r.shape.size() != 1) throw std::string("input 'image' has shape " + r.shape_json.dump() + ", expected [B]");
  std::vector<std::pair<std::string, std::string>> images;
  if (r.binary) {
    for (size_t at = 0; at < r.raw.size();) {
      if (r.raw.size() - at < 4) throw std::string("input 'image': binary data ends inside an element's length");
      uint32_t len = 0;
      for (int b = 3; b >= 0; --b) len = (len << 8) | uint8_t(r.raw[at + size_t(b)]);
      at += 4;
      if (len > r.raw.size() - at)
        throw std::string("input 'image' element " + std::to_string(images.size()) + ": length " + std::to_string(len) +
                          " runs past the binary data");
      images.emplace_back("image[" + std::to_string(images.size()) + "]", r.raw.substr(at, len));
      at += len;
    }
  } else {
    std::vector<std::string> elements;
    flatten_strings(r.data, &elements);
    for (std::string& e : elements) images.emplace_back("image[" + std::to_string(images.size()) + "]", std::move(e));
  }
  if (int64_t(images.size()) != r.shape[0])
    throw std::string("input 'image' has shape [" + std::to_string(r.shape[0]) + "] but holds " +
                      std::to_string(images.size()) + " elements");
  if (images.empty()) throw std::string("input 'image' holds no images");
  return images;
}

// The 'pixel_values' input's batch size, once its datatype and shape are checked against the model's.
int64_t v2_pixels_batch(const V2Request& r, int64_t height, int64_t width) {
  if (r.datatype != "FP32") throw std::string("input 'pixel_values' has datatype '" + r.datatype + "', expected FP32");
  if (r.shape.size() != 4 || r.shape[1] != 3 || r.shape[2] != height || r.shape[3] != width || r.shape[0] < 1)
    throw std::string("input 'pixel_values' has shape " + r.shape_json.dump() + ", expected [B, 3, " +
                      std::to_string(height) + ", " + std::to_string(width) + "]");
  return r.shape[0];
}

// The 'pixel_values' input's n values, all finite.
std::vector<float> v2_pixels(const V2Request& r, int64_t n) {
  std::vector<float> pixels;
  if (r.binary) {
    if (int64_t(r.raw.size()) != n * 4)
      throw std::string("input 'pixel_values': " + std::to_string(r.raw.size()) + " bytes of binary data, expected " +
                        std::to_string(n * 4) + " for its shape");
    pixels.resize(size_t(n));
    std::memcpy(pixels.data(), r.raw.data(), r.raw.size());
  } else {
    flatten_numbers(r.data, &pixels);
    if (int64_t(pixels.size()) != n)
      throw std::string("input 'pixel_values': " + std::to_string(pixels.size()) + " numbers, expected " +
                        std::to_string(n) + " for its shape");
  }
  for (float v : pixels)
    if (!std::isfinite(v)) throw std::string("input 'pixel_values' holds a value that is not finite");
  return pixels;
}

// What an answer needs besides the logits: the outputs asked for, the request's id, the model.
struct V2Answer {
  std::vector<std::pair<std::string, bool>> wanted;
  json id;
  std::string model;
  int64_t C = 0, K = 0;
};

// The outputs asked for, from [B, C] logits and, for images, their engine-computed top-k.
std::vector<Output> v2_outputs(const V2Answer& a, const std::vector<float>& logits, const std::vector<Result>* results) {
  const int64_t B = int64_t(logits.size()) / a.C;
  std::vector<Output> outs;
  for (const auto& [oname, bin] : a.wanted) {
    Output o;
    o.name = oname;
    o.binary = bin;
    if (oname == "probabilities" || oname == "logits") {
      o.datatype = "FP32";
      o.shape = {B, a.C};
      o.f32 = logits;
      if (oname == "probabilities")
        for (int64_t b = 0; b < B; ++b) softmax(logits.data() + b * a.C, a.C, o.f32.data() + b * a.C);
    } else {
      o.shape = {B, a.K};
      o.datatype = oname == "top_indices" ? "INT64" : "FP32";
      for (int64_t b = 0; b < B; ++b) {
        std::vector<Scored> top;
        if (results) {
          for (const Prediction& p : (*results)[size_t(b)].top) top.push_back({p.index, p.prob});
        } else {
          top = top_k(logits.data() + b * a.C, a.C, int(a.K));
        }
        for (const Scored& s : top) {
          if (oname == "top_indices") o.i64.push_back(s.index);
          else o.f32.push_back(s.prob);
        }
      }
    }
    outs.push_back(std::move(o));
  }
  return outs;
}

// The v2 response: JSON, with the outputs asked for as binary after it (Inference-Header-Content-Length).
HttpResponse v2_response(const V2Answer& a, const std::vector<float>& logits, const std::vector<Result>* results) {
  json response{{"model_name", a.model}, {"model_version", "1"}};
  if (!a.id.is_null()) response["id"] = a.id;
  response["outputs"] = json::array();
  std::string binary;
  for (const Output& o : v2_outputs(a, logits, results)) {
    json j{{"name", o.name}, {"datatype", o.datatype}, {"shape", o.shape}};
    if (o.binary) {
      const size_t n = o.datatype == "INT64" ? o.i64.size() * 8 : o.f32.size() * 4;
      j["parameters"] = {{"binary_data_size", n}};
      binary.append(o.datatype == "INT64" ? reinterpret_cast<const char*>(o.i64.data())
                                          : reinterpret_cast<const char*>(o.f32.data()), n);
    } else if (o.datatype == "INT64") {
      j["data"] = o.i64;
    } else {
      j["data"] = o.f32;
    }
    response["outputs"].push_back(std::move(j));
  }
  HttpResponse r = json_ok(response);
  if (!binary.empty()) {
    r.headers.push_back({"Inference-Header-Content-Length", std::to_string(r.body.size())});
    r.content_type = "application/octet-stream";
    r.body += binary;
  }
  return r;
}


}  // namespace

void Metrics::Histogram::observe(double v) {
  if (counts.empty()) counts.assign(bounds.size() + 1, 0);
  size_t i = 0;
  while (i < bounds.size() && v > bounds[i]) ++i;
  ++counts[i];
  sum += v;
  ++count;
}

void Metrics::request(const std::string& endpoint, int status, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{endpoint, status}];
  auto it = latency_.find(endpoint);
  if (it == latency_.end())
    it = latency_.emplace(endpoint, Histogram{{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
                                              {}, 0, 0}).first;
  it->second.observe(seconds);
}

void Metrics::batch(const BatchStats& s) {
  std::lock_guard<std::mutex> lock(mu_);
  ++batches_;
  batch_size_.observe(double(s.images));
  inference_.observe(s.run_s);
  for (double w : s.waits_s) queue_wait_.observe(w);
}

void Metrics::images(int64_t classified, int64_t failed) {
  std::lock_guard<std::mutex> lock(mu_);
  classified_ += uint64_t(classified);
  failed_ += uint64_t(failed);
}

void Metrics::connection_refused() {
  std::lock_guard<std::mutex> lock(mu_);
  ++refused_;
}

namespace {

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void write_histogram(std::string* out, const std::string& name, const std::string& labels,
                     const Metrics::Histogram& h) {
  const std::string sep = labels.empty() ? "" : ",";
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= h.bounds.size(); ++i) {
    cumulative += h.counts.empty() ? 0 : h.counts[i];
    char bound[32];
    std::snprintf(bound, sizeof bound, "%g", i < h.bounds.size() ? h.bounds[i] : 0.0);
    const std::string le = i < h.bounds.size() ? bound : "+Inf";
    *out += name + "_bucket{" + labels + sep + "le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  const std::string braces = labels.empty() ? "" : "{" + labels + "}";
  *out += name + "_sum" + braces + " " + number(h.sum) + "\n";
  *out += name + "_count" + braces + " " + std::to_string(h.count) + "\n";
}

}  // namespace

std::string Metrics::text(int64_t queue_depth) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string o;
  o += "# HELP vit_requests_total HTTP requests answered, by endpoint and status.\n# TYPE vit_requests_total counter\n";
  for (const auto& [key, n] : requests_)
    o += "vit_requests_total{endpoint=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"} " +
         std::to_string(n) + "\n";
  o += "# HELP vit_request_duration_seconds Time from a request's last byte read to its answer, by endpoint.\n"
       "# TYPE vit_request_duration_seconds histogram\n";
  for (const auto& [endpoint, h] : latency_) write_histogram(&o, "vit_request_duration_seconds", "endpoint=\"" + endpoint + "\"", h);
  o += "# HELP vit_queue_wait_seconds Time a request waited in the batch queue.\n# TYPE vit_queue_wait_seconds histogram\n";
  write_histogram(&o, "vit_queue_wait_seconds", "", queue_wait_);
  o += "# HELP vit_batch_size Images per forward pass.\n# TYPE vit_batch_size histogram\n";
  write_histogram(&o, "vit_batch_size", "", batch_size_);
  o += "# HELP vit_inference_duration_seconds Decode, preprocessing and forward pass of one batch.\n"
       "# TYPE vit_inference_duration_seconds histogram\n";
  write_histogram(&o, "vit_inference_duration_seconds", "", inference_);
  o += "# HELP vit_queue_depth Images waiting for a forward pass.\n# TYPE vit_queue_depth gauge\n";
  o += "vit_queue_depth " + std::to_string(queue_depth) + "\n";
  o += "# HELP vit_images_classified_total Images classified.\n# TYPE vit_images_classified_total counter\n";
  o += "vit_images_classified_total " + std::to_string(classified_) + "\n";
  o += "# HELP vit_images_failed_total Images that could not be classified (undecodable, too large).\n"
       "# TYPE vit_images_failed_total counter\n";
  o += "vit_images_failed_total " + std::to_string(failed_) + "\n";
  o += "# HELP vit_connections_open Connections open now.\n# TYPE vit_connections_open gauge\n";
  o += "vit_connections_open " + std::to_string(connections.load()) + "\n";
  o += "# HELP vit_connections_refused_total Connections refused past --max-connections.\n"
       "# TYPE vit_connections_refused_total counter\n";
  o += "vit_connections_refused_total " + std::to_string(refused_) + "\n";
  return o;
}

Api::Api(const Classifier& classifier, Batcher& batcher, Metrics& metrics, ApiOptions options)
    : classifier_(classifier), batcher_(batcher), metrics_(metrics), opt_(std::move(options)) {
  const ModelInfo i = classifier.info();
  classes_ = i.classes;
  height_ = i.input_height;
  width_ = i.input_width;
}

std::string Api::endpoint(const std::string& method, const std::string& path) {
  (void)method;
  if (path == "/v1/classify" || path == "/metrics" || path == "/v2" || path == "/v2/health/live" ||
      path == "/v2/health/ready")
    return path;
  if (path.rfind("/v2/models/", 0) == 0) {
    const std::string rest = path.substr(11);
    const size_t slash = rest.find('/');
    if (slash == std::string::npos) return "/v2/models/{name}";
    const std::string tail = rest.substr(slash);
    if (tail == "/ready" || tail == "/infer") return "/v2/models/{name}" + tail;
  }
  return "other";
}

HttpResponse Api::queue_full() const {
  HttpResponse r = json_error(503, "the queue is full (" + std::to_string(opt_.max_queue) +
                                       " images, --max-queue); try again shortly");
  r.headers.push_back({"Retry-After", "1"});
  return r;
}

void Api::handle(const HttpRequest& req, std::function<void(HttpResponse)> done) {
  const size_t q = req.target.find('?');
  const std::string path = req.target.substr(0, q), query = q == std::string::npos ? "" : req.target.substr(q + 1);
  auto only = [&](const char* method) {
    if (req.method == method) return true;
    HttpResponse r = json_error(405, req.method + " is not allowed on " + path + "; use " + method);
    r.headers.push_back({"Allow", method});
    done(std::move(r));
    return false;
  };
  if (path == "/v1/classify") {
    if (only("POST")) classify_v1(req, query, std::move(done));
    return;
  }
  if (path == "/metrics") {
    if (!only("GET")) return;
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = metrics_.text(batcher_.queued());
    return done(std::move(r));
  }
  if (path == "/v2") {
    if (only("GET"))
      done(json_ok({{"name", "vit"}, {"version", VIT_VERSION}, {"extensions", json::array({"binary_tensor_data"})}}));
    return;
  }
  if (path == "/v2/health/live") {
    if (only("GET")) done(json_ok({{"live", true}}));
    return;
  }
  if (path == "/v2/health/ready") {
    if (!only("GET")) return;
    HttpResponse r = json_ok({{"ready", bool(ready_)}});
    if (!ready_) r.status = 503;
    return done(std::move(r));
  }
  if (path.rfind("/v2/models/", 0) == 0) {
    const std::string rest = path.substr(11);
    const size_t slash = rest.find('/');
    const std::string name = rest.substr(0, slash), tail = slash == std::string::npos ? "" : rest.substr(slash);
    if (name != opt_.name)
      return done(json_error(404, "no model named '" + name + "'; this server has '" + opt_.name + "'"));
    if (tail.empty()) {
      if (only("GET")) done(model_metadata());
    } else if (tail == "/ready") {
      if (!only("GET")) return;
      HttpResponse r = json_ok({{"name", opt_.name}, {"ready", bool(ready_)}});
      if (!ready_) r.status = 503;
      done(std::move(r));
    } else if (tail == "/infer") {
      if (only("POST")) infer_v2(req, std::move(done));
    } else {
      done(json_error(404, "no endpoint " + path));
    }
    return;
  }
  done(json_error(404, "no endpoint " + path +
                           " (POST /v1/classify, GET /metrics, KServe v2 under /v2: /v2/health/live, "
                           "/v2/health/ready, /v2/models/" + opt_.name + "[/ready|/infer])"));
}

void Api::classify_v1(const HttpRequest& req, const std::string& query, std::function<void(HttpResponse)> done) {
  bool has_topk = false;
  const std::string topk_text = query_value(query, "topk", &has_topk);
  int64_t topk = 5;
  if (has_topk && !parse_int(topk_text, 1, classes_, &topk))
    return done(json_error(400, "topk: '" + topk_text + "' is not a number from 1 to " + std::to_string(classes_)));
  const std::string type = media_type(req.content_type);
  std::vector<std::pair<std::string, std::string>> images;
  bool multipart = false;
  if (type == "multipart/form-data") {
    multipart = true;
    try {
      for (Part& p : parse_multipart(req.body, content_type_parameter(req.content_type, "boundary")))
        images.emplace_back(std::move(p.name), std::move(p.bytes));
    } catch (const std::string& why) {
      return done(json_error(400, why));
    }
  } else if (type.empty() || type == "application/octet-stream" || type.rfind("image/", 0) == 0 ||
             type == "application/x-www-form-urlencoded") {  // what `curl --data-binary @photo.jpg` says
    if (req.body.empty()) return done(json_error(400, "an empty body: send one encoded image, or multipart/form-data"));
    images.emplace_back("image", req.body);
  } else {
    return done(json_error(415, "Content-Type " + type +
                                    " is not an image: send the encoded image's bytes (image/jpeg, "
                                    "application/octet-stream, ...) or multipart/form-data"));
  }
  if (int64_t(images.size()) > opt_.max_queue)
    return done(json_error(413, std::to_string(images.size()) + " images in one request; at most " +
                                    std::to_string(opt_.max_queue) + " (--max-queue)"));
  Metrics* metrics = &metrics_;
  const bool ok = batcher_.submit(std::move(images), int(topk), [done, multipart, metrics](std::vector<Result> rs) {
    int64_t failed = 0;
    for (const Result& r : rs) failed += !r.error.empty();
    metrics->images(int64_t(rs.size()) - failed, failed);
    if (!multipart) {
      const Result& r = rs[0];
      return done(r.error.empty() ? json_ok({{"top", top_json(r)}}) : json_error(400, r.error));
    }
    json a = json::array();
    for (const Result& r : rs)
      a.push_back(r.error.empty() ? json{{"file", r.file}, {"top", top_json(r)}} : json{{"file", r.file}, {"error", r.error}});
    done(json_ok(a));
  });
  if (!ok) done(queue_full());
}

HttpResponse Api::model_metadata() const {
  const json io = json::array({json{{"name", "image"}, {"datatype", "BYTES"}, {"shape", {-1}}},
                               json{{"name", "pixel_values"}, {"datatype", "FP32"}, {"shape", {-1, 3, height_, width_}}}});
  const json out = json::array({json{{"name", "probabilities"}, {"datatype", "FP32"}, {"shape", {-1, classes_}}},
                                json{{"name", "logits"}, {"datatype", "FP32"}, {"shape", {-1, classes_}}},
                                json{{"name", "top_indices"}, {"datatype", "INT64"}, {"shape", {-1, -1}}},
                                json{{"name", "top_probabilities"}, {"datatype", "FP32"}, {"shape", {-1, -1}}}});
  return json_ok({{"name", opt_.name}, {"versions", json::array({"1"})}, {"platform", "vit"}, {"inputs", io}, {"outputs", out}});
}

void Api::infer_v2(const HttpRequest& req, std::function<void(HttpResponse)> done) {
  const std::string type = media_type(req.content_type);
  if (!type.empty() && type != "application/json" && type != "application/octet-stream")
    return done(json_error(415, "Content-Type " + type + ": the v2 protocol takes application/json, or JSON followed "
                                "by binary tensor data (application/octet-stream with Inference-Header-Content-Length)"));
  size_t header_len = req.body.size();
  if (!req.inference_header_length.empty()) {
    int64_t n = 0;
    if (!parse_int(req.inference_header_length, 0, int64_t(req.body.size()), &n))
      return done(json_error(400, "Inference-Header-Content-Length: '" + req.inference_header_length +
                                      "' is not a length within the body's " + std::to_string(req.body.size()) + " bytes"));
    header_len = size_t(n);
  }
  json head;
  try {
    head = json::parse(req.body.begin(), req.body.begin() + long(header_len));
  } catch (const json::parse_error& e) {
    return done(json_error(400, std::string("malformed JSON: ") + e.what()));
  }
  try {
    const V2Request r = parse_v2(req.body, head, header_len, classes_);
    const V2Answer answer{r.wanted, r.id, opt_.name, classes_, r.topk};
    Metrics* metrics = &metrics_;
    if (r.name == "image") {
      std::vector<std::pair<std::string, std::string>> images = v2_images(r);
      if (int64_t(images.size()) > opt_.max_queue)
        return done(json_error(413, std::to_string(images.size()) + " images in one request; at most " +
                                        std::to_string(opt_.max_queue) + " (--max-queue)"));
      const int64_t C = classes_;
      const bool ok = batcher_.submit(std::move(images), int(std::max<int64_t>(r.topk, 1)),
                                      [answer, done, C, metrics](std::vector<Result> rs) {
        for (const Result& x : rs)
          if (!x.error.empty()) {
            metrics->images(0, 1);
            return done(json_error(400, "input 'image' element " + x.file.substr(6, x.file.size() - 7) + ": " + x.error));
          }
        metrics->images(int64_t(rs.size()), 0);
        std::vector<float> logits;
        for (const Result& x : rs) logits.insert(logits.end(), x.logits.begin(), x.logits.end());
        if (int64_t(logits.size()) != int64_t(rs.size()) * C) return done(json_error(500, "the classifier kept no logits"));
        done(v2_response(answer, logits, &rs));
      });
      if (!ok) done(queue_full());
      return;
    }
    const int64_t B = v2_pixels_batch(r, height_, width_);
    if (B > opt_.max_queue)
      return done(json_error(413, std::to_string(B) + " images in one request; at most " + std::to_string(opt_.max_queue) +
                                      " (--max-queue)"));
    std::vector<float> pixels = v2_pixels(r, B * 3 * height_ * width_);
    const bool ok = batcher_.submit(std::move(pixels), B, [answer, done, metrics, B](std::vector<float> logits, std::string error) {
      if (!error.empty()) return done(json_error(500, error));
      metrics->images(B, 0);
      done(v2_response(answer, logits, nullptr));
    });
    if (!ok) done(queue_full());
  } catch (const std::string& why) {
    done(json_error(400, why));
  } catch (const json::exception& e) {
    done(json_error(400, std::string("bad request JSON: ") + e.what()));
  }
}

}  // namespace vit::app

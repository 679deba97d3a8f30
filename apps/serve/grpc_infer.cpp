// ModelInfer messages to and from the HTTP side's infer body and answer (grpc_infer.h).
#include "grpc_infer.h"

#include <cstring>
#include <nlohmann/json.hpp>

namespace vit::app {

using nlohmann::json;
using inference::InferParameter;
using inference::InferTensorContents;

namespace {

// An InferParameter as the JSON value the HTTP side reads (null when none of its kinds is set).
json parameter(const InferParameter& p) {
  switch (p.parameter_choice_case()) {
    case InferParameter::kBoolParam: return p.bool_param();
    case InferParameter::kInt64Param: return p.int64_param();
    case InferParameter::kStringParam: return p.string_param();
    case InferParameter::PARAMETER_CHOICE_NOT_SET: break;
  }
  return nullptr;
}

// The typed contents field that holds values, "" when none does.
std::string contents_field(const InferTensorContents& c) {
  const std::pair<int, const char*> fields[] = {
      {c.bool_contents_size(), "bool_contents"},     {c.int_contents_size(), "int_contents"},
      {c.int64_contents_size(), "int64_contents"},   {c.uint_contents_size(), "uint_contents"},
      {c.uint64_contents_size(), "uint64_contents"}, {c.fp32_contents_size(), "fp32_contents"},
      {c.fp64_contents_size(), "fp64_contents"},     {c.bytes_contents_size(), "bytes_contents"}};
  for (const auto& [n, name] : fields)
    if (n > 0) return name;
  return "";
}

// Typed contents as binary tensor data: BYTES elements each after its 4-byte little-endian length, FP32
// values as their bytes. Another datatype gives nothing: the infer parser names the datatype it expected.
std::string typed_as_raw(const inference::ModelInferRequest::InferInputTensor& in) {
  const InferTensorContents& c = in.contents();
  const std::string field = contents_field(c);
  const std::string want = in.datatype() == "BYTES" ? "bytes_contents" : in.datatype() == "FP32" ? "fp32_contents" : "";
  if (field.empty())
    throw HttpError(400, "input '" + in.name() + "' has neither contents nor raw_input_contents");
  if (want.empty()) return "";
  if (field != want)
    throw HttpError(400, "input '" + in.name() + "' is " + in.datatype() + ", whose values go in " + want +
                             " (or raw_input_contents), not " + field);
  std::string raw;
  if (want == "fp32_contents") {
    raw.resize(size_t(c.fp32_contents_size()) * sizeof(float));
    std::memcpy(raw.data(), c.fp32_contents().data(), raw.size());
    return raw;
  }
  for (const std::string& e : c.bytes_contents()) {
    const uint32_t n = uint32_t(e.size());
    for (int b = 0; b < 4; ++b) raw += char((n >> (8 * b)) & 0xff);
    raw += e;
  }
  return raw;
}

}  // namespace

HttpRequest infer_http_request(const inference::ModelInferRequest& r) {
  const bool raw = r.raw_input_contents_size() > 0;
  if (raw && r.raw_input_contents_size() != r.inputs_size())
    throw HttpError(400, "raw_input_contents holds " + std::to_string(r.raw_input_contents_size()) + " tensors for " +
                             std::to_string(r.inputs_size()) + " inputs");
  json head = json::object();
  if (!r.id().empty()) head["id"] = r.id();
  json params = json::object();
  for (const auto& [key, value] : r.parameters()) params[key] = parameter(value);
  params["binary_data_output"] = true;
  head["parameters"] = params;
  head["inputs"] = json::array();
  std::string data;
  for (int i = 0; i < r.inputs_size(); ++i) {
    const auto& in = r.inputs(i);
    if (raw && !contents_field(in.contents()).empty())
      throw HttpError(400, "input '" + in.name() + "' has contents beside raw_input_contents: send one or the other");
    const std::string bytes = raw ? std::string() : typed_as_raw(in);
    const std::string& tensor = raw ? r.raw_input_contents(i) : bytes;
    head["inputs"].push_back({{"name", in.name()}, {"datatype", in.datatype()},
                              {"shape", std::vector<int64_t>(in.shape().begin(), in.shape().end())},
                              {"parameters", {{"binary_data_size", tensor.size()}}}});
    data += tensor;
  }
  if (r.outputs_size() > 0) {
    head["outputs"] = json::array();
    for (const auto& o : r.outputs()) head["outputs"].push_back({{"name", o.name()}, {"parameters", {{"binary_data", true}}}});
  }
  HttpRequest req;
  req.method = "POST";
  req.path = "/v2/models/" + r.model_name() + "/infer";
  req.content_type = "application/octet-stream";
  req.body = head.dump(-1, ' ', false, json::error_handler_t::replace);
  req.inference_header_length = std::to_string(req.body.size());
  req.body += data;
  return req;
}

grpc::StatusCode status_code(int http_status) {
  switch (http_status) {
    case 404: return grpc::StatusCode::NOT_FOUND;
    case 413: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case 503: return grpc::StatusCode::UNAVAILABLE;
    default: return http_status >= 500 ? grpc::StatusCode::INTERNAL : grpc::StatusCode::INVALID_ARGUMENT;
  }
}

grpc::Status infer_response(const HttpResponse& answer, inference::ModelInferResponse* out) {
  if (answer.status != 200) {
    const json e = json::parse(answer.body, nullptr, false);
    const std::string message = e.is_object() && e.contains("error") && e["error"].is_string() ? e["error"].get<std::string>() : answer.body;
    return grpc::Status(status_code(answer.status), message);
  }
  size_t header = answer.body.size();
  for (const auto& [k, v] : answer.headers)
    if (k == "Inference-Header-Content-Length") header = std::stoul(v);
  const json head = json::parse(answer.body.substr(0, header));
  out->set_model_name(head.at("model_name").get<std::string>());
  out->set_model_version(head.at("model_version").get<std::string>());
  if (head.contains("id") && head["id"].is_string()) out->set_id(head["id"].get<std::string>());
  size_t at = header;
  for (const json& o : head.at("outputs")) {
    auto* t = out->add_outputs();
    t->set_name(o.at("name").get<std::string>());
    t->set_datatype(o.at("datatype").get<std::string>());
    for (const json& d : o.at("shape")) t->add_shape(d.get<int64_t>());
    const size_t n = o.at("parameters").at("binary_data_size").get<size_t>();
    out->add_raw_output_contents(answer.body.substr(at, n));
    at += n;
  }
  return grpc::Status::OK;
}

}  // namespace vit::app

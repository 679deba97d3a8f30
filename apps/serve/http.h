// The HTTP that `vit serve`'s protocols share: a request and its answer as plain structs, the typed error
// every handler throws (its status, message and headers), and reading what a request carries: its media
// type, query, multipart form, and a JSON body read within limits (depth, values, bulk arrays streamed).
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vit::app {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string peer;                     // the client's address:port, for the log
  std::string method, path, query;      // the target, split at '?'
  std::string content_type;
  std::string inference_header_length;  // KServe's Inference-Header-Content-Length, "" if absent
  std::string origin;                   // the page's origin a browser sends (CORS), "" if absent
  std::string cors_method, cors_headers;  // a preflight's Access-Control-Request-Method and -Headers
  std::string body;
  // Whether the client still waits for this request's answer: its connection is open and nothing has
  // answered it yet. Safe to call from any thread; unset means always.
  std::function<bool()> wanted;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  Headers headers;
  std::string body;
  bool close = false;  // end the connection after this answer
};

// What keeps a request from being answered: its HTTP status (4xx; 503 for a server too busy to take it
// now), the message naming the problem, the request field to blame (OpenAI's `param`, when one is) and
// headers to send with it (Retry-After). Every handler throws it; each route writes it in its form.
class HttpError : public std::runtime_error {
 public:
  HttpError(int status, const std::string& message, std::string param = "")
      : std::runtime_error(message), status_(status), param_(std::move(param)) {}
  int status() const { return status_; }
  const std::string& param() const { return param_; }
  Headers headers;

 private:
  int status_;
  std::string param_;
};

// 503 with Retry-After: 1, for a budget that is full now and will not be shortly.
HttpError busy(const std::string& message);

// A JSON answer; invalid UTF-8 in strings is replaced, never an exception.
HttpResponse json_answer(const nlohmann::json& body, int status = 200);

// The media type of a Content-Type value, lower case, parameters dropped; a parameter's value
// (boundary=...), quotes removed, "" when absent.
std::string media_type(const std::string& content_type);
std::string content_type_parameter(const std::string& content_type, const std::string& name);
// A query's value for key (undecoded), nullopt when the key is absent.
std::optional<std::string> query_value(const std::string& query, const std::string& key);
// A whole number from lo to hi, or nullopt.
std::optional<int64_t> parse_count(const std::string& s, int64_t lo, int64_t hi);
// A path segment with its %XX escapes decoded.
std::string percent_decode(std::string_view s);

// multipart/form-data (RFC 7578): each part's file name (else its field name) and bytes.
struct FormPart {
  std::string name, bytes;
};
std::vector<FormPart> parse_multipart(const std::string& body, const std::string& boundary);

// The elements of a request's bulk arrays (KServe's tensor `data`, OpenAI's `input`), taken out of the
// JSON tree as they are read: numbers as 4-byte floats, strings as they are. Arrays nested in them are
// flattened in order, as a tensor's row-major data is.
struct JsonBulk {
  std::vector<float> numbers;
  std::vector<std::string> strings;
  std::string key;  // the key of the bulk array met, "" when none
};

struct JsonLimits {
  std::vector<std::string> bulk_keys;  // arrays under these keys are bulk
  int64_t max_strings = 256;           // bulk strings at most ...
  std::string too_many;                // ... else a 400 with this message
  int max_depth = 32;                  // nesting at most
  int64_t max_values = 4096;           // values kept in the tree at most (bulk elements aside)
};

// A JSON body read so that what it holds stays near its size whatever it is (a 30 MB string, 100 000
// inputs, nesting a million deep): throws HttpError 400 for malformed JSON (invalid UTF-8 included) and
// for each limit passed, naming it.
nlohmann::json read_json(std::string_view text, const JsonLimits& limits, JsonBulk* bulk);

}  // namespace vit::app

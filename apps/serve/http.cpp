// Reading requests (http.h): media types and their parameters, queries, multipart forms, and JSON bodies
// through nlohmann's parser callback, which sees every value as it is read and drops what is not kept.
#include "http.h"

#include <algorithm>
#include <cctype>

namespace vit::app {

using nlohmann::json;

HttpError busy(const std::string& message) {
  HttpError e(503, message + "; try again shortly");
  e.headers.push_back({"Retry-After", "1"});
  return e;
}

HttpResponse json_answer(const json& body, int status) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

}  // namespace

std::string media_type(const std::string& content_type) {
  std::string t = lower(content_type.substr(0, content_type.find(';')));
  t.erase(0, t.find_first_not_of(" \t"));
  t.erase(t.find_last_not_of(" \t") + 1);
  return t;
}

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

std::optional<std::string> query_value(const std::string& query, const std::string& key) {
  for (size_t pos = 0; pos <= query.size();) {
    const size_t amp = std::min(query.find('&', pos), query.size());
    const std::string item = query.substr(pos, amp - pos);
    const size_t eq = item.find('=');
    if (item.substr(0, eq) == key) return eq == std::string::npos ? "" : item.substr(eq + 1);
    pos = amp + 1;
  }
  return std::nullopt;
}

std::optional<int64_t> parse_count(const std::string& s, int64_t lo, int64_t hi) {
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const int64_t v = std::stoll(s);
  if (v < lo || v > hi) return std::nullopt;
  return v;
}

std::string percent_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(uint8_t(s[i + 1])) && std::isxdigit(uint8_t(s[i + 2]))) {
      out += char(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::vector<FormPart> parse_multipart(const std::string& body, const std::string& boundary) {
  if (boundary.empty()) throw HttpError(400, "multipart/form-data without a boundary");
  const std::string delim = "--" + boundary;
  size_t pos = body.find(delim);
  if (pos == std::string::npos) throw HttpError(400, "multipart body without its boundary");
  std::vector<FormPart> parts;
  for (;;) {
    pos += delim.size();
    if (body.compare(pos, 2, "--") == 0) break;  // the closing delimiter
    if (body.compare(pos, 2, "\r\n") != 0) throw HttpError(400, "malformed multipart body after a boundary");
    pos += 2;
    const size_t head_end = body.find("\r\n\r\n", pos);
    if (head_end == std::string::npos) throw HttpError(400, "multipart part without the end of its headers");
    const std::string head = body.substr(pos, head_end - pos);
    const size_t next = body.find("\r\n" + delim, head_end + 4);
    if (next == std::string::npos) throw HttpError(400, "multipart body without its closing boundary");
    FormPart p;
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
  if (parts.empty()) throw HttpError(400, "multipart body without parts");
  return parts;
}

json read_json(std::string_view text, const JsonLimits& limits, JsonBulk* bulk) {
  std::string key;                // the key just read, "" once its value has begun
  int bulk_depth = -1;            // the depth of the bulk array being read, -1 outside one
  int64_t values = 0;
  const auto keep = [&] {
    if (++values > limits.max_values)
      throw HttpError(400, "JSON with more than " + std::to_string(limits.max_values) + " values besides tensor data");
    return true;
  };
  const auto deep = [&](int depth) {
    if (depth >= limits.max_depth) throw HttpError(400, "JSON nested deeper than " + std::to_string(limits.max_depth) + " levels");
  };
  const auto callback = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    const bool in_bulk = bulk_depth >= 0 && depth > bulk_depth;
    const std::string after = std::move(key);
    key.clear();
    switch (event) {
      case json::parse_event_t::key:
        key = parsed.get<std::string>();
        return true;
      case json::parse_event_t::object_start:
        deep(depth);
        if (in_bulk) throw HttpError(400, "'" + bulk->key + "' holds an object, expected numbers or strings");
        return keep();
      case json::parse_event_t::array_start:
        deep(depth);
        if (bulk_depth < 0 && std::count(limits.bulk_keys.begin(), limits.bulk_keys.end(), after)) {
          bulk_depth = depth;
          bulk->key = after;
          return keep();
        }
        return in_bulk || keep();  // a nested bulk array is kept while read, dropped at its end
      case json::parse_event_t::array_end:
        if (depth == bulk_depth) bulk_depth = -1;
        return !in_bulk;
      case json::parse_event_t::object_end:
        return true;
      case json::parse_event_t::value:
        if (!in_bulk) return keep();
        if (parsed.is_number()) {
          bulk->numbers.push_back(parsed.get<float>());
        } else if (parsed.is_string()) {
          if (int64_t(bulk->strings.size()) >= limits.max_strings) throw HttpError(400, limits.too_many);
          bulk->strings.push_back(std::move(parsed.get_ref<std::string&>()));
        } else {
          throw HttpError(400, "'" + bulk->key + "' holds " + std::string(parsed.type_name()) +
                                   ", expected numbers or strings");
        }
        return false;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), callback);
  } catch (const json::parse_error& e) {
    // Inside a bulk array, the element being read is named: `'input'[3]: ... ill-formed UTF-8 byte`; a string that
    // is not UTF-8 (raw bytes, or a lone surrogate escape such as the \udcXX of Python's surrogateescape) is said to
    // be that before the parser's words.
    const std::string at = bulk_depth >= 0 ? "'" + bulk->key + "'[" + std::to_string(bulk->strings.size() + bulk->numbers.size()) + "]: " : "";
    const std::string what = e.what();
    const bool surrogate = what.find("surrogate") != std::string::npos, utf8 = what.find("UTF-8") != std::string::npos;
    const std::string why = surrogate ? "a string holding a lone surrogate escape (\\udcXX), which is no character: "
                                        "a JSON string carries UTF-8 text only; "
                            : utf8 ? "a string that is not UTF-8: a JSON string carries UTF-8 text only; " : "";
    throw HttpError(400, "malformed JSON: " + at + why + what);
  }
}

}  // namespace vit::app

// The OpenAI-compatible routes of openai.h: reading an embeddings request within limits (its inputs streamed
// out of the JSON tree, at most --max-inputs), each input an encoded image or, on a model with a text tower, a
// text; queueing them on the model's Batcher, and answering OpenAI's list of embeddings in input order.
#include "openai.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <mutex>

namespace vit::app {

using nlohmann::json;

namespace {

const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

HttpError bad(const std::string& message, const std::string& param) { return HttpError(400, message, param); }

bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

// Whether text (from `from` on) begins with a URL's scheme and "://" (http://, HTTPS://, ftp://, ...).
bool url(const std::string& text, size_t from) {
  const size_t sep = text.find("://", from);
  if (sep == std::string::npos || sep == from || sep - from > 32 || !std::isalpha(uint8_t(text[from]))) return false;
  return std::all_of(text.begin() + long(from), text.begin() + long(sep),
                     [](char c) { return std::isalnum(uint8_t(c)) || c == '+' || c == '-' || c == '.'; });
}

// Whether a string reads as words rather than base64: a space between two of its characters, or a character
// base64 has not.
bool words(const std::string& text, size_t from) {
  const size_t first = text.find_first_not_of(" \t\r\n\f\v", from), last = text.find_last_not_of(" \t\r\n\f\v");
  if (first == std::string::npos) return false;
  for (size_t i = first; i <= last; ++i)
    if (text[i] == ' ' || (!space(text[i]) && !std::isalnum(uint8_t(text[i])) && !std::strchr("+/=", text[i])))
      return true;
  return false;
}

// Whether a string (leading whitespace aside) is a data URI: what is an image on a model that also embeds text.
bool data_uri(const std::string& text) {
  size_t from = 0;
  while (from < text.size() && space(text[from])) ++from;
  return lower(text.substr(from, 5)) == "data:";
}

// Input i for model m as an encoded image: a data URI (data:image/...;base64,...) or bare base64, as RFC
// 2045's decoders read them (whitespace anywhere ignored: line-wrapped base64 too; the scheme and media type
// in any case).
std::string input_image(size_t i, const std::string& text, const ServedModel& m) {
  const std::string at = "input[" + std::to_string(i) + "]: ";
  size_t from = 0;
  while (from < text.size() && space(text[from])) ++from;
  if (url(text, from))
    throw bad(at + "URLs are not fetched: send the image as a data URI (data:image/jpeg;base64,...)", "input");
  const bool uri = data_uri(text);
  if (uri) {
    const size_t comma = text.find(',', from);
    const std::string head = lower(text.substr(from + 5, comma == std::string::npos ? 64 : comma - from - 5));
    if (comma == std::string::npos || head.size() < 7 || head.compare(head.size() - 7, 7, ";base64") != 0)
      throw bad(at + "a data URI must carry base64 (data:image/jpeg;base64,...)", "input");
    const std::string type = head.substr(0, head.find(';'));
    if (!type.empty() && type.rfind("image/", 0) != 0 && type != "application/octet-stream")
      throw bad(at + "a data URI of " + type + " is not an image", "input");
    from = comma + 1;
  }
  std::string bytes;
  const bool decoded = base64_decode(text, from, &bytes);
  if (!uri && words(text, from) && (!decoded || !read_image_header(bytes).image))
    throw bad(at + "text: " + m.text_error + "; send each image as a data URI or base64 of its encoded bytes", "input");
  if (!decoded)
    throw bad(at + "not base64: send each image as a data URI or bare base64 of its encoded bytes", "input");
  if (bytes.empty()) throw bad(at + "an empty image", "input");
  return bytes;
}

// Infinity's `modality` field: what every input is; unset, a model with a text tower takes data URIs as images
// and every other string as text, an image-only model every string as an image.
enum class Modality { Either, Text, Image };

Modality read_modality(const json& body, const ServedModel& m) {
  if (!body.contains("modality")) return Modality::Either;
  const json& v = body["modality"];
  if (v == "image") return Modality::Image;
  if (v != "text") throw bad("'modality': " + v.dump() + " is not \"text\" or \"image\"", "modality");
  if (!m.text) throw bad("'modality': \"text\": " + m.text_error, "modality");
  return Modality::Text;
}

// A request's inputs, each an image or a text, their answers in input order.
struct EmbeddingsRequest {
  ServedModel* model = nullptr;
  EncodedImages images;
  std::vector<size_t> image_at;  // the input index of each image
  std::vector<std::string> texts;
  std::vector<size_t> text_at;   // ... and of each text
  bool base64 = false;     // encoding_format
  bool normalize = true;
  size_t size() const { return images.size() + texts.size(); }
};

void read_options(const json& body, EmbeddingsRequest* r) {
  if (body.contains("encoding_format")) {
    const json& f = body["encoding_format"];
    if (f != "float" && f != "base64") throw bad("'encoding_format': " + f.dump() + " is not \"float\" or \"base64\"", "encoding_format");
    r->base64 = f == "base64";
  }
  if (body.contains("dimensions")) {
    const json& d = body["dimensions"];
    if (!d.is_number_integer() || d.get<int64_t>() != r->model->embedding_size)
      throw bad("'dimensions': " + d.dump() + "; model '" + r->model->name + "' gives embeddings of " +
                    std::to_string(r->model->embedding_size), "dimensions");
  }
  if (body.contains("normalize")) {
    if (!body["normalize"].is_boolean()) throw bad("'normalize': " + body["normalize"].dump() + " is not true or false", "normalize");
    r->normalize = body["normalize"].get<bool>();
  }
}

// Each input to an image or a text, as the model and the modality say.
void sort_inputs(std::vector<std::string> inputs, Modality modality, EmbeddingsRequest* r) {
  const ServedModel& m = *r->model;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const bool text = modality == Modality::Text || (modality == Modality::Either && m.text && !data_uri(inputs[i]));
    if (text) {
      r->texts.push_back(std::move(inputs[i]));
      r->text_at.push_back(i);
    } else {
      r->images.emplace_back("input[" + std::to_string(i) + "]", input_image(i, inputs[i], m));
      r->image_at.push_back(i);
      std::string().swap(inputs[i]);
    }
  }
}

EmbeddingsRequest parse_request(const Service& service, HttpRequest& req) {
  const std::string type = media_type(req.content_type);
  if (!type.empty() && type != "application/json")
    throw HttpError(415, "Content-Type " + type + ": /v1/embeddings takes application/json");
  const int max_inputs = service.options().max_inputs;
  JsonBulk bulk;
  json body = read_json(req.body, {{"input"}, max_inputs, "more than " + std::to_string(max_inputs) +
                                                              " inputs in one request (--max-inputs)"}, &bulk);
  std::string().swap(req.body);  // the inputs are out of it
  if (!body.is_object()) throw bad("the request is not a JSON object", "");
  EmbeddingsRequest r;
  if (body.contains("model") && !body["model"].is_string()) throw bad("'model' is not a string", "model");
  r.model = body.contains("model") ? &service.model(body["model"].get<std::string>()) : &service.only_model("'model'");
  const Modality modality = read_modality(body, *r.model);
  read_options(body, &r);
  std::vector<std::string> inputs;
  if (!body.contains("input")) throw bad("'input' is missing: the images (data URIs or base64) or texts", "input");
  const json& input = body["input"];
  if (input.is_string()) {
    inputs.push_back(std::move(body["input"].get_ref<std::string&>()));
  } else if (input.is_array() && bulk.key == "input") {
    if (!bulk.numbers.empty())
      throw bad("'input' holds token arrays (numbers): this server takes strings, images as data URIs or base64 "
                "and texts as they are written", "input");
    inputs = std::move(bulk.strings);
  } else {
    throw bad("'input' is " + std::string(input.type_name()) + ": give a string or a list of strings", "input");
  }
  if (inputs.empty()) throw bad("'input' holds no inputs", "input");
  sort_inputs(std::move(inputs), modality, &r);
  return r;
}

json embedding_json(const std::vector<float>& e, bool base64) {
  if (base64) return base64_encode(reinterpret_cast<const char*>(e.data()), e.size() * sizeof(float));
  return e;
}

// The answers of one request as they come: its images' from their passes, its texts' from theirs, answered
// once both are in (or at the first error).
struct Answers {
  Answers(Service& service, ServedModel& m, const Reply& reply, const EmbeddingsRequest& r)
      : service(service), m(m), reply(reply), base64(r.base64), image_at(r.image_at), text_at(r.text_at),
        data(r.size()), parts(int(!r.images.empty()) + int(!r.texts.empty())) {}
  Service& service;
  ServedModel& m;
  Reply reply;
  bool base64;
  std::vector<size_t> image_at, text_at;
  std::mutex mutex;
  std::vector<json> data;  // by input index
  int64_t tokens = 0;      // the image tokens the model ran (a NaFlex image: its own grid's), and the texts'
  int parts;               // image and text parts still to come
  bool failed = false;

  void fail(const HttpError& e) {
    std::lock_guard<std::mutex> lock(mutex);
    if (failed) return;
    failed = true;
    reply.fail(e);
  }
  json item(size_t i, const std::vector<float>& e) const {
    return {{"object", "embedding"}, {"index", i}, {"embedding", embedding_json(e, base64)}};
  }
  void images(std::vector<Embedding> es) {
    for (size_t j = 0; j < es.size(); ++j)
      if (!es[j].error.empty()) {
        if (reply.wanted()) service.images_done(m, 0, 1);
        return fail(HttpError(400, "input[" + std::to_string(image_at[j]) + "]: " + es[j].error, "input"));
      }
    if (reply.wanted()) service.images_done(m, int64_t(es.size()), 0);
    std::lock_guard<std::mutex> lock(mutex);
    for (size_t j = 0; j < es.size(); ++j) {
      data[image_at[j]] = item(image_at[j], es[j].embedding);
      tokens += es[j].sequence;
    }
    done();
  }
  void texts(const std::vector<TextEmbedding>& es) {
    const int64_t bad = std::count_if(es.begin(), es.end(), [](const TextEmbedding& e) { return !e.error.empty(); });
    if (reply.wanted()) service.texts_done(m, int64_t(es.size()) - bad, bad);
    for (size_t j = 0; j < es.size(); ++j)
      if (!es[j].error.empty())
        return fail(HttpError(400, "input[" + std::to_string(text_at[j]) + "] (text): " + es[j].error, "input"));
    std::lock_guard<std::mutex> lock(mutex);
    for (size_t j = 0; j < es.size(); ++j) {
      data[text_at[j]] = item(text_at[j], es[j].embedding);
      // A text longer than the tower's context is cut as the reference tokenizer cuts it, and said.
      if (es[j].truncated) data[text_at[j]]["truncated"] = true;
      tokens += es[j].tokens;
    }
    done();
  }
  void done() {  // under the lock
    if (failed || --parts > 0) return;
    reply(json_answer({{"object", "list"}, {"data", json(std::move(data))}, {"model", m.name},
                       {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}}));
  }
};

void embeddings(Service& service, HttpRequest& req, const Reply& reply) {
  EmbeddingsRequest r = parse_request(service, req);
  ServedModel& m = *r.model;
  reply.model(m.name);
  service.check_queue_room(int64_t(r.size()));
  reply.hold(service.take_pixels(r.images));
  auto answers = std::make_shared<Answers>(service, m, reply, r);
  if (!r.texts.empty()) {
    const bool ok = m.queue_texts(
        std::move(r.texts), r.normalize, [answers] { return answers->reply.wanted(); },
        [answers](std::vector<TextEmbedding> es) { answers->texts(es); },
        [answers](const HttpError& e) { answers->fail(e); });
    if (!ok) throw service.queue_full();
  }
  if (!r.images.empty()) {
    const bool ok = m.batcher->submit(Request::of_images(std::move(r.images), Output::Embedding).with_embed(m.embed(r.normalize)),
                                      [answers](Answer a) { answers->images(std::move(a.embeddings)); }, req.wanted);
    if (!ok) answers->fail(service.queue_full());
  }
}

// A model's text tower as /v1/models names it: its kind, tokenizer and context; null for a model without one.
json text_tower(const ServedModel& m) {
  if (!m.text) return nullptr;
  const TextInfo& t = m.text->info();
  return {{"tower", t.tower}, {"tokenizer", t.tokenizer}, {"context", t.context}};
}

// A model in OpenAI's form, with what it answers under "vit" (for the web page's picker and other tools); a
// NaFlex model's max_patches (its budget of patches, each image at its own aspect ratio), else 0 and input_size;
// its text tower (the page's search box), else null.
json model_entry(const Service& service, const ServedModel& m) {
  return {{"id", m.name}, {"object", "model"}, {"created", int64_t(service.started())}, {"owned_by", "vit"},
          {"vit", {{"classes", m.classes}, {"embedding_size", m.embedding_size}, {"precision", m.info.precision},
                   {"family", m.info.family}, {"input_size", {m.info.input_height, m.info.input_width}},
                   {"max_patches", m.info.max_patches}, {"patch", m.info.patch},
                   {"ready", bool(m.ready)}, {"text_tower", text_tower(m)}}}};
}

}  // namespace

bool base64_decode(const std::string& text, size_t from, std::string* out) {
  static const auto table = [] {
    std::array<int8_t, 256> t;
    t.fill(-1);
    for (int i = 0; i < 64; ++i) t[uint8_t(kAlphabet[i])] = int8_t(i);
    return t;
  }();
  out->clear();
  out->reserve((text.size() - std::min(from, text.size())) / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0, padding = 0;
  int64_t digits = 0;
  for (size_t i = from; i < text.size(); ++i) {
    const char c = text[i];
    if (space(c)) continue;
    if (c == '=' && ++padding <= 2) continue;  // at most two '=', only at the end
    const int8_t v = table[uint8_t(c)];
    if (v < 0 || padding > 0) return false;
    ++digits;
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(char((acc >> bits) & 0xff));
    }
  }
  return digits % 4 != 1;
}

std::string base64_encode(const char* data, size_t size) {
  std::string out;
  out.reserve((size + 2) / 3 * 4);
  for (size_t i = 0; i < size; i += 3) {
    uint32_t v = uint32_t(uint8_t(data[i])) << 16;
    if (i + 1 < size) v |= uint32_t(uint8_t(data[i + 1])) << 8;
    if (i + 2 < size) v |= uint8_t(data[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < size ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < size ? kAlphabet[v & 63] : '=';
  }
  return out;
}

void add_openai_routes(Service& service, std::vector<Route>* routes) {
  Service* s = &service;
  routes->push_back({"POST", "/v1/embeddings", ErrorForm::OpenAI,
                     [s](HttpRequest& req, const PathParams&, const Reply& reply) { embeddings(*s, req, reply); }});
  routes->push_back({"GET", "/v1/models", ErrorForm::OpenAI, [s](HttpRequest&, const PathParams&, const Reply& reply) {
                       json data = json::array();
                       for (const auto& m : s->models()) data.push_back(model_entry(*s, *m));
                       reply(json_answer({{"object", "list"}, {"data", std::move(data)}}));
                     }});
  routes->push_back({"GET", "/v1/models/{name}", ErrorForm::OpenAI, [s](HttpRequest&, const PathParams& p, const Reply& reply) {
                       reply(json_answer(model_entry(*s, s->model(p.at("name")))));
                     }});
}

}  // namespace vit::app

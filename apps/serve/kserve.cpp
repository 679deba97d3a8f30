// The KServe v2 routes of kserve.h: health, server and model metadata, the model repository extension
// (the models are fixed at start), and infer: its images queued on the model's Batcher for the classes
// and for the embedding the request asks for, the answer written once both are back; its texts embedded by the
// model's text tower in the same queue.
#include "kserve.h"

#include <algorithm>
#include <mutex>

#include "kserve_tensors.h"

namespace vit::app {

using nlohmann::json;

namespace {

// An infer request whose parts (classes, embedding) come back from the Batcher one by one: the last
// answers, with an error if any part failed.
class Pending {
 public:
  Pending(Service& service, ServedModel& m, InferRequest spec, Reply reply, int parts)
      : service_(service), m_(m), spec_(std::move(spec)), reply_(std::move(reply)), left_(parts) {
    x_.classes = m.classes;
    x_.embedding_size = m.embedding_size;
  }

  void classes(std::vector<Result> rs) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < rs.size() && error_.empty(); ++i)
      if (!rs[i].error.empty()) fail_locked(HttpError(400, "input 'image' element " + std::to_string(i) + ": " + rs[i].error));
    if (error_.empty()) {
      for (const Result& r : rs) x_.logits.insert(x_.logits.end(), r.logits.begin(), r.logits.end());
      x_.batch = int64_t(rs.size());
      x_.results = std::move(rs);
    }
    part_done();
  }
  void logits(std::vector<float> rows, int64_t n, const std::string& error) {
    rows_done(&InferResults::logits, std::move(rows), n, error);
  }
  void embedded(std::vector<Embedding> es) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < es.size() && error_.empty(); ++i)
      if (!es[i].error.empty()) fail_locked(HttpError(400, "input 'image' element " + std::to_string(i) + ": " + es[i].error));
    for (const Embedding& e : es) x_.embeddings.insert(x_.embeddings.end(), e.embedding.begin(), e.embedding.end());
    x_.batch = int64_t(es.size());
    part_done();
  }
  // The `text` input's embeddings (texts are not counted as images).
  void texts(const std::vector<TextEmbedding>& es) {
    const int64_t bad = std::count_if(es.begin(), es.end(), [](const TextEmbedding& e) { return !e.error.empty(); });
    if (reply_.wanted()) service_.texts_done(m_, int64_t(es.size()) - bad, bad);
    std::lock_guard<std::mutex> lock(mu_);
    text_ = true;
    for (size_t i = 0; i < es.size() && error_.empty(); ++i)
      if (!es[i].error.empty()) fail_locked(HttpError(400, "input 'text' element " + std::to_string(i) + ": " + es[i].error));
    for (const TextEmbedding& e : es) x_.embeddings.insert(x_.embeddings.end(), e.embedding.begin(), e.embedding.end());
    x_.batch = int64_t(es.size());
    part_done();
  }
  void embedded(std::vector<float> rows, int64_t n, const std::string& error) {
    rows_done(&InferResults::embeddings, std::move(rows), n, error);
  }
  // A part that could not be queued: the request is answered with e once the others are back.
  void refused(const HttpError& e) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_locked(e);
    part_done();
  }

 private:
  // A part answered as rows of tensors (into x_'s member `into`), or the error that stopped it.
  void rows_done(std::vector<float> InferResults::*into, std::vector<float> rows, int64_t n, const std::string& error) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error.empty()) fail_locked(HttpError(500, error));
    x_.*into = std::move(rows);
    x_.batch = n;
    part_done();
  }
  void fail_locked(const HttpError& e) {
    if (error_.empty()) {
      error_ = e.what();
      status_ = e.status();
      headers_ = e.headers;
    }
  }
  void part_done() {
    if (--left_ > 0) return;
    const bool wanted = reply_.wanted() && !text_;
    if (!error_.empty()) {
      if (wanted) service_.images_done(m_, 0, 1);
      HttpError e(status_, error_);
      e.headers = headers_;
      return reply_.fail(e);
    }
    if (wanted) service_.images_done(m_, x_.batch, 0);
    if (spec_.wants_classes()) x_.probabilities = m_.classifier->probabilities(x_.logits.data(), x_.batch);
    reply_(infer_answer(spec_, m_.name, x_));
  }

  Service& service_;
  ServedModel& m_;
  const InferRequest spec_;  // its outputs, id and topk (its data moved out)
  const Reply reply_;
  std::mutex mu_;
  int left_;
  bool text_ = false;
  InferResults x_;
  std::string error_;
  int status_ = 0;
  Headers headers_;
};

// The request's spec for the answer: what it asks for, without its data.
InferRequest answer_spec(const InferRequest& r) {
  InferRequest spec;
  spec.topk = r.topk;
  spec.outputs = r.outputs;
  spec.id = r.id;
  return spec;
}

// The model a /v2/models/{name}[/versions/{version}] path names; a version other than the one each model has
// ("1") is a 404 naming it.
ServedModel& versioned_model(const Service& service, const PathParams& p) {
  ServedModel& m = service.model(p.at("name"));
  const auto v = p.find("version");
  if (v != p.end() && v->second != "1")
    throw HttpError(404, "model '" + m.name + "' has no version '" + v->second + "'; its one version is 1", "version");
  return m;
}

// The `text` input's embeddings from the model's text tower, in its queue (docs/SERVING.md).
void infer_texts(Service& service, ServedModel& m, InferRequest& r, const Reply& reply) {
  if (!m.text) throw HttpError(400, "input 'text': " + m.text_error);
  EncodedImages elements = infer_bytes(r);
  service.check_queue_room(int64_t(elements.size()));
  std::vector<std::string> texts;
  for (auto& e : elements) texts.push_back(std::move(e.second));
  auto p = std::make_shared<Pending>(service, m, answer_spec(r), reply, 1);
  const bool ok = m.queue_texts(
      std::move(texts), r.normalize, [reply] { return reply.wanted(); },
      [p](std::vector<TextEmbedding> es) { p->texts(es); }, [p](const HttpError& e) { p->refused(e); });
  if (!ok) throw service.queue_full();
}

}  // namespace

void kserve_infer(Service& service, const std::string& model, HttpRequest& req, const Reply& reply) {
  ServedModel& m = service.model(model);
  reply.model(m.name);
  InferRequest r = parse_infer(req, m, service.options().max_queue);
  const bool classes = r.wants_classes(), embedding = r.wants(InferOutput::Embedding);
  const EmbedOptions embed = m.embed(r.normalize);
  // Each part queued in turn: if the first does not fit, nothing is queued and the answer is 503 now; if
  // a second does not, the request is answered 503 once the first is back.
  const auto queue = [&](const std::shared_ptr<Pending>& p, bool first, bool queued) {
    if (queued) return;
    if (!first) return p->refused(service.queue_full());
    throw service.queue_full();
  };
  const int parts = int(classes) + int(embedding);
  if (r.input == InferInput::Text) return infer_texts(service, m, r, reply);
  if (r.input == InferInput::Image) {
    EncodedImages images = infer_bytes(r);
    service.check_queue_room(int64_t(images.size()));
    reply.hold(service.take_pixels(images));
    auto p = std::make_shared<Pending>(service, m, answer_spec(r), reply, parts);
    if (classes)
      queue(p, true, m.batcher->submit(Request::of_images(embedding ? images : std::move(images), Output::Top)
                                           .with_topk(int(std::max<int64_t>(r.topk, 1))),
                                       [p](Answer a) { p->classes(std::move(a.results)); }, req.wanted));
    if (embedding)
      queue(p, !classes, m.batcher->submit(Request::of_images(std::move(images), Output::Embedding).with_embed(embed),
                                           [p](Answer a) { p->embedded(std::move(a.embeddings)); }, req.wanted));
    return;
  }
  if (m.info.max_patches > 0)
    throw HttpError(400, "input 'pixel_values': model " + m.name + " is a NaFlex model: it takes each image at its own "
                         "aspect ratio within " + std::to_string(m.info.max_patches) + " patches, not a fixed "
                         "[B, 3, H, W] tensor; send the encoded images as input 'image' (BYTES)");
  const int64_t B = pixels_batch(r, m.info.input_height, m.info.input_width);
  service.check_queue_room(B);
  std::vector<float> values = infer_pixels(r, B * 3 * m.info.input_height * m.info.input_width);
  auto p = std::make_shared<Pending>(service, m, answer_spec(r), reply, parts);
  if (classes)
    queue(p, true, m.batcher->submit(Request::of_tensors(embedding ? values : std::move(values), B, Output::Logits),
                                     [p, B](Answer a) { p->logits(std::move(a.rows), B, a.error); }, req.wanted));
  if (embedding)
    queue(p, !classes, m.batcher->submit(Request::of_tensors(std::move(values), B, Output::Embedding).with_embed(embed),
                                         [p, B](Answer a) { p->embedded(std::move(a.rows), B, a.error); }, req.wanted));
}

json model_metadata(const ServedModel& m) {
  // A NaFlex model takes images at their own shape: no fixed pixel_values tensor.
  json io = json::array({json{{"name", "image"}, {"datatype", "BYTES"}, {"shape", {-1}}}});
  if (m.text) io.push_back(json{{"name", "text"}, {"datatype", "BYTES"}, {"shape", {-1}}});
  if (m.info.max_patches == 0)
    io.push_back(json{{"name", "pixel_values"}, {"datatype", "FP32"}, {"shape", {-1, 3, m.info.input_height, m.info.input_width}}});
  json out = json::array();
  for (InferOutput o : model_outputs(m)) {
    const bool top = o == InferOutput::TopIndices || o == InferOutput::TopProbabilities;
    const int64_t width = o == InferOutput::Embedding ? m.embedding_size : top ? -1 : m.classes;
    out.push_back({{"name", output_name(o)}, {"datatype", o == InferOutput::TopIndices ? "INT64" : "FP32"},
                   {"shape", {-1, width}}});
  }
  return {{"name", m.name}, {"versions", json::array({"1"})}, {"platform", "vit"}, {"inputs", io}, {"outputs", out}};
}

namespace {

// {"ready": ...}, 503 until ready.
HttpResponse readiness(json body, bool ready) {
  body["ready"] = ready;
  return json_answer(body, ready ? 200 : 503);
}

// POST /v2/repository/index, as Triton's clients call it: an empty body or {"ready": true} (then only
// the ready models).
HttpResponse repository_index(const Service& service, const HttpRequest& req) {
  bool only_ready = false;
  if (!req.body.empty()) {
    JsonBulk none;
    const json head = read_json(req.body, {}, &none);
    if (!head.is_object()) throw HttpError(400, "the request is not a JSON object");
    if (head.contains("ready")) {
      if (!head["ready"].is_boolean()) throw HttpError(400, "'ready': " + head["ready"].dump() + " is not true or false");
      only_ready = head["ready"].get<bool>();
    }
  }
  json index = json::array();
  for (const auto& m : service.models()) {
    if (only_ready && !m->ready) continue;
    index.push_back({{"name", m->name}, {"version", "1"}, {"state", m->ready ? "READY" : "UNAVAILABLE"},
                     {"reason", m->ready ? "" : "warming up"}});
  }
  return json_answer(index);
}

}  // namespace

void add_kserve_routes(Service& service, std::vector<Route>* routes) {
  Service* s = &service;
  // headroom: health checks are answered past --max-connections too.
  const auto route = [&](const char* method, const char* pattern, auto handle, bool headroom = false) {
    routes->push_back({method, pattern, ErrorForm::Plain, handle, headroom});
  };
  route("GET", "/v2", [](HttpRequest&, const PathParams&, const Reply& reply) {
    reply(json_answer({{"name", "vit"}, {"version", VIT_VERSION},
                       {"extensions", json::array({"binary_tensor_data", "model_repository"})}}));
  });
  route("GET", "/v2/health/live", [](HttpRequest&, const PathParams&, const Reply& reply) {
    reply(json_answer({{"live", true}}));
  }, true);
  route("GET", "/v2/health/ready", [s](HttpRequest&, const PathParams&, const Reply& reply) {
    reply(readiness(json::object(), s->ready()));
  }, true);
  // Each model has one version, "1" (its metadata says so): a model's paths and its version's are the same.
  for (const std::string model : {"/v2/models/{name}", "/v2/models/{name}/versions/{version}"}) {
    route("GET", model.c_str(), [s](HttpRequest&, const PathParams& p, const Reply& reply) {
      const ServedModel& m = versioned_model(*s, p);
      reply.model(m.name);
      reply(json_answer(model_metadata(m)));
    });
    route("GET", (model + "/ready").c_str(), [s](HttpRequest&, const PathParams& p, const Reply& reply) {
      const ServedModel& m = versioned_model(*s, p);
      reply.model(m.name);
      reply(readiness({{"name", m.name}}, m.ready));
    }, true);
    route("POST", (model + "/infer").c_str(), [s](HttpRequest& req, const PathParams& p, const Reply& reply) {
      kserve_infer(*s, versioned_model(*s, p).name, req, reply);
    });
  }
  route("POST", "/v2/repository/index", [s](HttpRequest& req, const PathParams&, const Reply& reply) {
    reply(repository_index(*s, req));
  });
  for (const char* action : {"/v2/repository/models/{name}/load", "/v2/repository/models/{name}/unload"})
    route("POST", action, [s](HttpRequest&, const PathParams& p, const Reply& reply) {
      reply.model(s->model(p.at("name")).name);
      throw HttpError(400, "models are fixed at start (-m): the server neither loads nor unloads them");
    });
}

}  // namespace vit::app

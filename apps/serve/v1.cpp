// The /v1 routes and /metrics of v1.h: reading a request's images from its body, queueing them on the
// model's Batcher, and answering each image's top classes (the model's, or zero-shot labels the request gives)
// or its error, or one image's attention picture; the web page at GET /.
#include "v1.h"

#include <algorithm>
#include <optional>

#include "page.h"

namespace vit::app {

using nlohmann::json;

namespace {

// A request's top classes as `vit classify --json` writes them.
json top_json(const Result& r) {
  json t = json::array();
  for (const Prediction& p : r.top) t.push_back({{"index", p.index}, {"label", p.label}, {"prob", p.prob}});
  return t;
}

// Each image's top classes, or its error: one image's alone, a form's as a list.
void answer_results(Service& service, const ServedModel& m, const Reply& reply, bool multipart,
                    const std::vector<Result>& rs) {
  int64_t failed = 0;
  for (const Result& r : rs) failed += !r.error.empty();
  if (reply.wanted()) service.images_done(m, int64_t(rs.size()) - failed, failed);
  if (!multipart) {
    const Result& r = rs[0];
    return r.error.empty() ? reply(json_answer({{"top", top_json(r)}})) : reply.fail(HttpError(400, r.error));
  }
  json a = json::array();
  for (const Result& r : rs)
    a.push_back(r.error.empty() ? json{{"file", r.file}, {"top", top_json(r)}} : json{{"file", r.file}, {"error", r.error}});
  reply(json_answer(a));
}

// The model a /v1 request names with ?model=NAME; with one model served, naming it is optional.
ServedModel& model_of(const Service& service, const HttpRequest& req, const Reply& reply) {
  const auto name = query_value(req.query, "model");
  ServedModel& m = name ? service.model(percent_decode(*name)) : service.only_model("?model=NAME");
  reply.model(m.name);
  return m;
}

// The images of a /v1 request: its body, one encoded image, or the files of a multipart form.
EncodedImages request_images(HttpRequest& req, bool* multipart) {
  const std::string type = media_type(req.content_type);
  EncodedImages images;
  *multipart = type == "multipart/form-data";
  if (*multipart) {
    for (FormPart& p : parse_multipart(req.body, content_type_parameter(req.content_type, "boundary")))
      images.emplace_back(std::move(p.name), std::move(p.bytes));
  } else if (type.empty() || type == "application/octet-stream" || type.rfind("image/", 0) == 0 ||
             type == "application/x-www-form-urlencoded") {  // what `curl --data-binary @photo.jpg` says
    if (req.body.empty()) throw HttpError(400, "an empty body: send one encoded image, or multipart/form-data");
    images.emplace_back("image", std::move(req.body));
  } else {
    throw HttpError(415, "Content-Type " + type +
                             " is not an image: send the encoded image's bytes (image/jpeg, "
                             "application/octet-stream, ...) or multipart/form-data");
  }
  return images;
}

// Zero-shot labels a request gives itself: ?labels=tench,goldfish[&templates=imagenet|simple], on a model with a
// text tower; the class embeddings made as `vit classify --labels-text` makes them.
struct RequestLabels {
  std::vector<std::string> names;
  PromptTemplates templates = PromptTemplates::ImageNet;
};

// A query value as a form encodes it: '+' a space, %XX a byte.
std::string form_decode(std::string s) {
  std::replace(s.begin(), s.end(), '+', ' ');
  return percent_decode(s);
}

std::optional<RequestLabels> request_labels(const Service& service, const ServedModel& m, const HttpRequest& req) {
  const auto labels = query_value(req.query, "labels"), templates = query_value(req.query, "templates");
  if (!labels) {
    if (templates) throw HttpError(400, "templates: the prompt templates of ?labels=..., given none");
    return std::nullopt;
  }
  if (!m.text) throw HttpError(400, "labels: zero-shot labels need a text tower, and " + m.text_error);
  RequestLabels r;
  if (templates) {
    const std::string t = form_decode(*templates);
    if (t == "simple") r.templates = PromptTemplates::Simple;
    else if (t != "imagenet") throw HttpError(400, "templates: '" + t + "' is neither imagenet nor simple");
  }
  const std::string all = form_decode(*labels);
  for (size_t pos = 0; pos <= all.size();) {
    const size_t comma = std::min(all.find(',', pos), all.size());
    const std::string name = all.substr(pos, comma - pos);
    const size_t a = name.find_first_not_of(" \t"), b = name.find_last_not_of(" \t");
    if (a == std::string::npos) throw HttpError(400, "labels: class " + std::to_string(r.names.size() + 1) + " is empty");
    r.names.push_back(name.substr(a, b - a + 1));
    if (std::count(r.names.begin(), r.names.end(), r.names.back()) > 1)
      throw HttpError(400, "labels: the class '" + r.names.back() + "' is there twice: each class once");
    pos = comma + 1;
  }
  if (int64_t(r.names.size()) > service.options().max_inputs)
    throw HttpError(400, "labels: " + std::to_string(r.names.size()) + " classes; at most " +
                             std::to_string(service.options().max_inputs) + " (--max-inputs)");
  return r;
}

// /v1/classify with the request's own labels: each image's embedding scored against the classes' (made where the
// passes run, after the images'), answered as the model's own classes are.
void classify_zero_shot(Service& service, ServedModel& m, EncodedImages images, bool multipart, int64_t topk,
                        RequestLabels labels, const Reply& reply, const std::function<bool()>& wanted) {
  auto l = std::make_shared<RequestLabels>(std::move(labels));
  const bool ok = m.batcher->submit(Request::of_images(std::move(images), Output::Embedding).with_embed(m.embed(false)),
                                    [&service, &m, reply, multipart, topk, l](Answer answer) {
    const std::vector<Embedding>& es = answer.embeddings;
    std::vector<Result> rs(es.size());
    try {
      std::vector<const float*> images(es.size(), nullptr);
      for (size_t i = 0; i < es.size(); ++i)
        if (es[i].error.empty()) images[i] = es[i].embedding.data();
      const auto tops = zero_shot_top(m.text->zero_shot_classes(l->names, l->templates), images, int(topk));
      for (size_t i = 0; i < es.size(); ++i) {
        rs[i].file = es[i].file;
        rs[i].error = es[i].error;
        for (const auto& [index, prob] : tops[i]) rs[i].top.push_back({index, l->names[size_t(index)], prob});
      }
    } catch (const std::exception& e) {
      return reply.fail(HttpError(400, std::string("labels: ") + e.what()));
    }
    answer_results(service, m, reply, multipart, rs);
  }, wanted);
  if (!ok) throw service.queue_full();
}

void classify(Service& service, HttpRequest& req, const Reply& reply) {
  ServedModel& m = model_of(service, req, reply);
  std::optional<RequestLabels> labels = request_labels(service, m, req);
  if (!labels) Service::require_classes(m);
  const int64_t classes = labels ? int64_t(labels->names.size()) : m.classes;
  int64_t topk = 5;
  if (const auto k = query_value(req.query, "topk")) {
    const auto n = parse_count(*k, 1, classes);
    if (!n) throw HttpError(400, "topk: '" + *k + "' is not a number from 1 to " + std::to_string(classes));
    topk = *n;
  }
  topk = std::min(topk, classes);
  bool multipart = false;
  EncodedImages images = request_images(req, &multipart);
  service.check_queue_room(int64_t(images.size()));
  reply.hold(service.take_pixels(images));
  if (labels) return classify_zero_shot(service, m, std::move(images), multipart, topk, std::move(*labels), reply, req.wanted);
  const bool ok = m.batcher->submit(Request::of_images(std::move(images), Output::Top).with_topk(int(topk)),
                                    [&service, &m, reply, multipart](Answer answer) {
    answer_results(service, m, reply, multipart, answer.results);
  }, req.wanted);
  if (!ok) throw service.queue_full();
}

// POST /v1/explain: one image's attention picture, as `vit explain` draws it, in the model's queue.
void explain(Service& service, HttpRequest& req, const Reply& reply) {
  ServedModel& m = model_of(service, req, reply);
  Service::require_classes(m);
  ExplainMethod method = ExplainMethod::Rollout;
  if (const auto v = query_value(req.query, "method")) {
    if (*v == "last") method = ExplainMethod::Last;
    else if (*v != "rollout") throw HttpError(400, "method: '" + *v + "' is neither rollout nor last");
  }
  int size = 1024;
  if (const auto v = query_value(req.query, "size")) {
    const auto n = parse_count(*v, kMinPictureSize, kMaxPictureSize);
    if (!n)
      throw HttpError(400, "size: '" + *v + "' is not a number from " + std::to_string(kMinPictureSize) + " to " +
                               std::to_string(kMaxPictureSize));
    size = int(*n);
  }
  bool multipart = false;
  EncodedImages images = request_images(req, &multipart);
  if (images.size() != 1)
    throw HttpError(400, "explain draws one image; the form has " + std::to_string(images.size()) + " files");
  service.check_queue_room(1);
  reply.hold(service.take_pixels(images));
  auto shared = std::make_shared<EncodedImages>(std::move(images));
  const bool ok = m.batcher->take_turn([&service, &m, reply, method, size, shared] {
    if (!reply.wanted()) return reply.fail(HttpError(400, Batcher::kDropped));  // its client has gone: not drawn
    try {
      std::vector<Explanation> e = m.explainer().explain_encoded(*shared, method, size);
      service.images_done(m, e[0].error.empty(), !e[0].error.empty());
      if (!e[0].error.empty()) return reply.fail(HttpError(400, e[0].error));
      HttpResponse r;
      r.content_type = "image/png";
      r.headers.push_back({"X-Attention-Precision", precision_name(m.explainer().precision())});
      r.body = std::move(e[0].picture);
      reply(std::move(r));
    } catch (const HttpError& e) {
      reply.fail(e);
    } catch (const std::exception& e) {
      service.images_done(m, 0, 1);
      reply.fail(HttpError(400, e.what()));
    }
  }, 1);
  if (!ok) throw service.queue_full();
}

}  // namespace

void add_v1_routes(Service& service, std::vector<Route>* routes) {
  Service* s = &service;
  routes->push_back({"POST", "/v1/classify", ErrorForm::Plain,
                     [s](HttpRequest& req, const PathParams&, const Reply& reply) { classify(*s, req, reply); }});
  routes->push_back({"POST", "/v1/explain", ErrorForm::Plain,
                     [s](HttpRequest& req, const PathParams&, const Reply& reply) { explain(*s, req, reply); }});
  routes->push_back({"GET", "/", ErrorForm::Plain, [](HttpRequest&, const PathParams&, const Reply& reply) {
                       HttpResponse r;
                       r.content_type = "text/html; charset=utf-8";
                       // The page's own script and styles, images it makes from the photos, nothing from elsewhere.
                       r.headers.emplace_back("Content-Security-Policy",
                                              "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                                              "img-src 'self' blob: data:; connect-src 'self'");
                       r.body = page_html();
                       reply(std::move(r));
                     }});
  routes->push_back({"GET", "/metrics", ErrorForm::Plain, [s](HttpRequest&, const PathParams&, const Reply& reply) {
                       HttpResponse r;
                       r.content_type = "text/plain; version=0.0.4; charset=utf-8";
                       r.body = s->metrics().text();
                       reply(std::move(r));
                     }, true});
}

}  // namespace vit::app

// The /v1 routes and /metrics of v1.h: reading a request's images from its body, queueing them on the
// model's Batcher, and answering each image's top classes or its error, or one image's attention picture;
// the web page at GET /.
#include "v1.h"

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

void classify(Service& service, HttpRequest& req, const Reply& reply) {
  ServedModel& m = model_of(service, req, reply);
  Service::require_classes(m);
  int64_t topk = 5;
  if (const auto k = query_value(req.query, "topk")) {
    const auto n = parse_count(*k, 1, m.classes);
    if (!n) throw HttpError(400, "topk: '" + *k + "' is not a number from 1 to " + std::to_string(m.classes));
    topk = *n;
  }
  bool multipart = false;
  EncodedImages images = request_images(req, &multipart);
  service.check_queue_room(int64_t(images.size()));
  reply.hold(service.take_pixels(images));
  const bool ok = m.batcher->submit(Request::of_images(std::move(images), Output::Top).with_topk(int(topk)),
                                    [&service, &m, reply, multipart](Answer answer) {
    const std::vector<Result>& rs = answer.results;
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

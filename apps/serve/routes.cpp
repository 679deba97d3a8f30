// The route table of routes.h: matching a path segment by segment (HEAD as GET), answering 404/405 and
// CORS preflights, catching what a handler throws, and counting every answer by endpoint and status.
#include "routes.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "vit/error.h"

namespace vit::app {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

HttpResponse error_answer(ErrorForm form, const HttpError& e) {
  json body;
  if (form == ErrorForm::Plain) {
    body = {{"error", e.what()}};
  } else {
    body = {{"error", {{"message", e.what()},
                       {"type", e.status() >= 500 ? "server_error" : "invalid_request_error"},
                       {"param", e.param().empty() ? json() : json(e.param())},
                       {"code", e.status() == 404 ? json("model_not_found") : json()}}}};
  }
  HttpResponse r = json_answer(body, e.status());
  r.headers = e.headers;
  return r;
}

namespace {

std::vector<std::string> segments(const std::string& path) {
  std::vector<std::string> out;
  size_t pos = 1;  // after the leading '/'
  while (pos <= path.size()) {
    const size_t slash = std::min(path.find('/', pos), path.size());
    out.push_back(path.substr(pos, slash - pos));
    pos = slash + 1;
  }
  return out;
}

// "GET /, POST /v1/classify, GET|POST /x, ...": the routes' endpoints in the order they were added, a path that
// takes several methods once.
std::string endpoint_list(const std::vector<Route>& routes) {
  std::vector<std::pair<std::string, std::string>> paths;  // (pattern, methods)
  for (const Route& r : routes) {
    const auto same = std::find_if(paths.begin(), paths.end(), [&](const auto& p) { return p.first == r.pattern; });
    if (same == paths.end()) paths.emplace_back(r.pattern, r.method);
    else same->second += "|" + r.method;
  }
  std::string s;
  for (const auto& [pattern, methods] : paths) s += (s.empty() ? "" : ", ") + methods + " " + pattern;
  return s;
}

}  // namespace

Router::Router(std::vector<Route> routes, Metrics& metrics, std::vector<std::string> cors_origins)
    : routes_(std::move(routes)), metrics_(metrics), endpoints_(endpoint_list(routes_)),
      cors_origins_(std::move(cors_origins)) {
  metrics_.counter("vit_requests_total", "HTTP requests answered, by endpoint and status.");
  metrics_.histogram("vit_request_duration_seconds", "Time from a request's last byte read to its answer, by endpoint.",
                     {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30});
}

Router::Match Router::match(const std::string& method, const std::string& path) const {
  Match m;
  if (path.empty() || path[0] != '/') return m;
  const std::vector<std::string> got = segments(path);
  for (const Route& r : routes_) {
    const std::vector<std::string> want = segments(r.pattern);
    if (want.size() != got.size()) continue;
    PathParams params;
    bool same = true;
    for (size_t i = 0; i < want.size() && same; ++i) {
      if (want[i].size() > 2 && want[i].front() == '{' && want[i].back() == '}')
        params[want[i].substr(1, want[i].size() - 2)] = percent_decode(got[i]);
      else
        same = want[i] == got[i];
    }
    if (!same) continue;
    m.endpoint = r.pattern;
    m.form = r.form;
    if (r.method == method || (method == "HEAD" && r.method == "GET")) {
      m.route = &r;
      m.params = std::move(params);
      return m;
    }
    m.allow.push_back(r.method);
  }
  return m;
}

void Router::answered(const HttpRequest& req, const std::string& endpoint, const std::string& model, int status,
                      double seconds) {
  Labels labels{{"endpoint", endpoint}};
  if (!model.empty()) labels.push_back({"model", model});
  metrics_.observe("vit_request_duration_seconds", labels, seconds);
  labels.push_back({"status", std::to_string(status)});
  metrics_.add("vit_requests_total", labels);
  spdlog::debug("{} {} {}{}{} {} {:.1f} ms{}{}", req.peer, req.method, req.path, req.query.empty() ? "" : "?", req.query,
                status, seconds * 1e3, model.empty() ? "" : " model ", model);
}

std::string Router::allow(const Match& m) const {
  std::string allow;
  for (const std::string& a : m.allow) allow += (allow.empty() ? "" : ", ") + a;
  if (std::count(m.allow.begin(), m.allow.end(), "GET")) allow += ", HEAD";
  if (!cors_origins_.empty()) allow += ", OPTIONS";
  return allow;
}

bool Router::allowed(const std::string& origin) const {
  return std::count(cors_origins_.begin(), cors_origins_.end(), "*") ||
         std::count(cors_origins_.begin(), cors_origins_.end(), origin);
}

void Router::allow_origin(const std::string& origin, HttpResponse* r) const {
  if (origin.empty() || !allowed(origin)) return;
  const bool any = std::count(cors_origins_.begin(), cors_origins_.end(), "*") > 0;
  r->headers.push_back({"Access-Control-Allow-Origin", any ? "*" : origin});
  if (!any) r->headers.push_back({"Vary", "Origin"});
  r->headers.push_back(
      {"Access-Control-Expose-Headers", "Retry-After, Inference-Header-Content-Length, X-Attention-Precision"});
}

HttpResponse Router::preflight(const HttpRequest& req, const Match& m) const {
  if (m.allow.empty()) return error_answer(m.form, HttpError(404, "no endpoint " + req.path + " (the endpoints: " + endpoints_ + ")"));
  if (!req.origin.empty() && !allowed(req.origin)) {
    std::string origins;
    for (const std::string& o : cors_origins_) origins += (origins.empty() ? "" : ", ") + o;
    return error_answer(m.form, HttpError(403, "origin " + req.origin + " may not call this server; it answers pages "
                                               "of " + origins + " (--cors-origin)"));
  }
  HttpResponse r;
  r.status = 204;
  r.headers.push_back({"Allow", allow(m)});
  r.headers.push_back({"Access-Control-Allow-Methods", allow(m)});
  if (!req.cors_headers.empty()) r.headers.push_back({"Access-Control-Allow-Headers", req.cors_headers});
  r.headers.push_back({"Access-Control-Max-Age", "600"});
  return r;
}

void Router::handle(HttpRequest request, std::function<void(HttpResponse)> done) {
  const Clock::time_point started = Clock::now();
  Match m = match(request.method, request.path);
  HttpRequest head;  // for the log and the answer's CORS headers
  head.peer = request.peer;
  head.method = request.method;
  head.path = request.path;
  head.query = request.query;
  head.origin = request.origin;
  Reply reply([this, done = std::move(done), endpoint = m.endpoint, started, head, wanted = request.wanted](
                  HttpResponse r, const std::string& model) {
    const int status = wanted && !wanted() ? kClientGone : r.status;
    answered(head, endpoint, model, status, std::chrono::duration<double>(Clock::now() - started).count());
    allow_origin(head.origin, &r);
    done(std::move(r));
  }, m.form, request.wanted);
  if (request.method == "OPTIONS" && !cors_origins_.empty()) return reply(preflight(request, m));
  if (!m.route) {
    if (m.allow.empty()) return reply.fail(HttpError(404, "no endpoint " + request.path + " (the endpoints: " + endpoints_ + ")"));
    const std::string methods = allow(m);
    HttpError e(405, request.method + " is not allowed on " + request.path + "; use " + methods);
    e.headers.push_back({"Allow", methods});
    return reply.fail(e);
  }
  try {
    m.route->handle(request, m.params, reply);
  } catch (const HttpError& e) {
    reply.fail(e);
  } catch (const json::exception& e) {
    reply.fail(HttpError(400, std::string("bad request JSON: ") + e.what()));
  } catch (const Error& e) {
    reply.fail(HttpError(400, e.problem()));
  }
}

HttpResponse Router::error(const HttpRequest& head, const HttpError& e) {
  const Match m = match(head.method, head.path);
  answered(head, m.endpoint, "", e.status(), 0);
  HttpResponse r = error_answer(m.form, e);
  allow_origin(head.origin, &r);
  return r;
}

bool Router::headroom(const std::string& method, const std::string& path) const {
  const Match m = match(method, path);
  return m.route && m.route->headroom;
}

}  // namespace vit::app

// `vit serve`'s endpoints as one table: each route a method, a path pattern (`{name}` takes one segment),
// the form its errors take, its handler and whether it is answered past --max-connections. A request is
// matched once: to its route (HEAD to GET's), else 405 (the path known, not the method) or 404. The pattern
// is what the request is counted under in the metrics. With --cors-origin, pages of those origins may call
// the server: the router answers their preflights and marks the answers.
#pragma once
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "http.h"
#include "http_server.h"
#include "metrics.h"

namespace vit::app {

// {"error": "message"}, or OpenAI's {"error": {"message", "type", "param", "code"}}.
enum class ErrorForm { Plain, OpenAI };

HttpResponse error_answer(ErrorForm form, const HttpError& e);

// How a handler answers, now or later from another thread: once, with an answer or an error, the
// error written in its route's form.
class Reply {
 public:
  Reply(std::function<void(HttpResponse, const std::string& model)> done, ErrorForm form,
        std::function<bool()> wanted = {})
      : done_(std::move(done)), form_(form), model_(std::make_shared<std::string>()), wanted_(std::move(wanted)) {}
  void operator()(HttpResponse r) const { done_(std::move(r), *model_); }
  void fail(const HttpError& e) const { done_(error_answer(form_, e), *model_); }
  // The model the request is for, once known: its metrics label and log line name it.
  void model(const std::string& name) const { *model_ = name; }
  // Whether the client still waits for the answer (HttpRequest::wanted).
  bool wanted() const { return !wanted_ || wanted_(); }

 private:
  std::function<void(HttpResponse, const std::string&)> done_;
  ErrorForm form_;
  std::shared_ptr<std::string> model_;
  std::function<bool()> wanted_;
};

using PathParams = std::map<std::string, std::string>;  // the {name} segments, %-decoded

struct Route {
  std::string method, pattern;
  ErrorForm form = ErrorForm::Plain;
  // May throw HttpError (and nlohmann::json errors) before it replies: the router answers them.
  std::function<void(HttpRequest& request, const PathParams& params, const Reply& reply)> handle;
  bool headroom = false;  // answered past --max-connections too (health, metrics: cheap, and probes need them)
};

// The answer's status counted for a request whose client no longer waits for it (gone, or answered by the
// deadline first): nginx's 499, "client closed request".
constexpr int kClientGone = 499;

class Router : public Handler {
 public:
  // not_found: what a 404 for an unknown path adds, the endpoints there are. cors_origins: the origins
  // whose pages may call the server (--cors-origin; "*" for any), none by default.
  Router(std::vector<Route> routes, Metrics& metrics, std::string not_found, std::vector<std::string> cors_origins = {});
  void handle(HttpRequest request, std::function<void(HttpResponse)> done) override;
  HttpResponse error(const HttpRequest& head, const HttpError& e) override;
  bool headroom(const std::string& method, const std::string& path) const override;

 private:
  struct Match {
    const Route* route = nullptr;   // the route for the method and path, or
    std::vector<std::string> allow;  // the methods the path takes (405), none for an unknown path (404)
    std::string endpoint = "other";  // the pattern matched, for the metrics
    ErrorForm form = ErrorForm::Plain;  // the form of the path's routes
    PathParams params;
  };
  Match match(const std::string& method, const std::string& path) const;
  // The methods a path takes, for Allow: its routes', HEAD beside GET, OPTIONS with CORS.
  std::string allow(const Match& m) const;
  // A CORS preflight (OPTIONS, with --cors-origin): 204 naming the path's methods for an allowed origin.
  HttpResponse preflight(const HttpRequest& req, const Match& m) const;
  bool allowed(const std::string& origin) const;  // one of cors_origins, or any with "*"
  // An answer to a page of an allowed origin says so (Access-Control-Allow-Origin); others are left alone.
  void allow_origin(const std::string& origin, HttpResponse* r) const;
  // Counts an answer under its endpoint and model, and logs it with -v.
  void answered(const HttpRequest& req, const std::string& endpoint, const std::string& model, int status,
                double seconds);

  std::vector<Route> routes_;
  Metrics& metrics_;
  std::string not_found_;
  std::vector<std::string> cors_origins_;
};

}  // namespace vit::app

// `vit serve`'s endpoints as one table: each route a method, a path pattern (`{name}` takes one segment),
// the form its errors take and its handler. A request is matched once: to its route, else 405 (the path
// known, not the method) or 404. The pattern is what the request is counted under in the metrics.
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
  Reply(std::function<void(HttpResponse, const std::string& model)> done, ErrorForm form)
      : done_(std::move(done)), form_(form), model_(std::make_shared<std::string>()) {}
  void operator()(HttpResponse r) const { done_(std::move(r), *model_); }
  void fail(const HttpError& e) const { done_(error_answer(form_, e), *model_); }
  // The model the request is for, once known: its metrics label and log line name it.
  void model(const std::string& name) const { *model_ = name; }

 private:
  std::function<void(HttpResponse, const std::string&)> done_;
  ErrorForm form_;
  std::shared_ptr<std::string> model_;
};

using PathParams = std::map<std::string, std::string>;  // the {name} segments, %-decoded

struct Route {
  std::string method, pattern;
  ErrorForm form = ErrorForm::Plain;
  // May throw HttpError (and nlohmann::json errors) before it replies: the router answers them.
  std::function<void(HttpRequest& request, const PathParams& params, const Reply& reply)> handle;
};

class Router : public Handler {
 public:
  // not_found: what a 404 for an unknown path adds, the endpoints there are.
  Router(std::vector<Route> routes, Metrics& metrics, std::string not_found);
  void handle(HttpRequest request, std::function<void(HttpResponse)> done) override;
  HttpResponse error(const std::string& peer, const std::string& method, const std::string& path,
                     const HttpError& e) override;

 private:
  struct Match {
    const Route* route = nullptr;   // the route for the method and path, or
    std::vector<std::string> allow;  // the methods the path takes (405), none for an unknown path (404)
    std::string endpoint = "other";  // the pattern matched, for the metrics
    ErrorForm form = ErrorForm::Plain;  // the form of the path's routes
    PathParams params;
  };
  Match match(const std::string& method, const std::string& path) const;
  // Counts an answer under its endpoint and model, and logs it with -v.
  void answered(const HttpRequest& req, const std::string& endpoint, const std::string& model, int status,
                double seconds);

  std::vector<Route> routes_;
  Metrics& metrics_;
  std::string not_found_;
};

}  // namespace vit::app

// `vit serve`'s connections: Boost.Beast on Asio, asynchronous on a few threads, so a slow or silent
// client costs a socket and a timer, never a thread. The HTTP limits live here: one total deadline per
// request (its header, body and answer: 408 or 503 when it passes unanswered), a body limit checked from
// Content-Length before the body is read and counted when chunked, a budget for the bodies held at once, a
// cap on open connections with headroom past it for health checks and metrics, and whether a request's
// client still waits. Each whole request goes to a Handler; this layer knows no endpoint.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "budget.h"
#include "http.h"

namespace vit::app {

struct HttpLimits {
  std::string host = "127.0.0.1";
  int port = 8080;
  int max_body_mb = 32;       // one body, in MiB (413 past it)
  int max_bodies_mb = 128;    // the bodies held at once (503 past it)
  int timeout_s = 30;         // one request, all of it
  int max_connections = 256;  // open at once; past it, only headroom requests are answered, others get 503
  int threads = 2;            // running the connections
};

class Handler {
 public:
  virtual ~Handler() = default;
  // Answers now or later, exactly once, maybe from another thread.
  virtual void handle(HttpRequest request, std::function<void(HttpResponse)> done) = 0;
  // How an error met outside handle() (a body too large, a full budget, a bad header, the deadline) is
  // written for a request (its peer, method, path and origin; "-" when the header was not read): the
  // protocols' error forms differ.
  virtual HttpResponse error(const HttpRequest& head, const HttpError& e) = 0;
  // Whether a request is answered past max_connections too (health checks, metrics).
  virtual bool headroom(const std::string& method, const std::string& path) const = 0;
};

class HttpServer {
 public:
  HttpServer(const HttpLimits& limits, Handler& handler);
  ~HttpServer();
  // Binds and listens; throws vit::Error naming the address when it cannot. Returns "address:port".
  std::string listen();
  uint16_t port() const;
  // Runs the connections on the calling thread and limits.threads - 1 more; returns once stop() has
  // closed the listener and every request read has been answered.
  void run();
  // Stops accepting and closes the connections waiting for a request; those being answered finish.
  void stop();

  int64_t open_connections() const;
  int64_t refused_connections() const;  // past max_connections
  const Budget& bodies() const;
  Budget& bodies();  // shared with KServe over gRPC, whose messages count against it too

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace vit::app

// `vit serve`: the classifier over HTTP (Boost.Beast on Asio). Connections are asynchronous on a few
// threads, so a slow or silent client costs a socket and a timer, never a thread; each request has one
// total deadline; bodies are limited from Content-Length before they are read and counted when chunked.
// What requests hold at once is bounded: bodies by --max-bodies-mb (reserved from Content-Length before the
// body is read), the pixels of queued images by --max-queue-mp (from their headers); past either, 503.
// SIGINT, SIGTERM and SIGHUP are taken by one sigwait thread (every other thread keeps them blocked): the
// server stops accepting, answers what it has read, and exits 0; a second SIGINT exits at once.
#include <malloc.h>
#include <pthread.h>
#include <spdlog/spdlog.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <csignal>
#include <fstream>
#include <future>
#include <list>
#include <mutex>
#include <optional>
#include <thread>

#include "command.h"
#include "options.h"
#include "vit/limits.h"
#include "serve_api.h"
#include "vit/batcher.h"

namespace vit::app {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr int kExitInterrupted = 130;  // a second SIGINT: 128 + SIGINT, as a shell reports it

struct ServeOptions {
  ModelOptions model;
  std::string host = "127.0.0.1", name;
  int port = 8080, max_batch = 16, max_delay_ms = 0, max_queue = 256, max_body_mb = 32, timeout_s = 30;
  int max_connections = 256, http_threads = 2;
  int max_bodies_mb = 128, max_queue_mp = 64;
  int64_t max_pixels = 40'000'000;
};

// The bound on the server's memory (docs/SERVING.md), in MiB: what it holds when ready (the model and its
// Plans), the bodies it may hold three times over (read, then parsed into their images), and 16 bytes for
// each pixel of the queued images (the costliest decode, a 16-bit RGBA PNG's).
constexpr int64_t kBodyCopies = 3, kBytesPerPixel = 16;
int64_t memory_bound_mb(int64_t ready_mb, const ServeOptions& o) {
  return ready_mb + kBodyCopies * o.max_bodies_mb + (kBytesPerPixel * int64_t(o.max_queue_mp) * 1'000'000 >> 20);
}

// The most memory this process has held so far in MiB (VmHWM, its peak resident set), 0 where /proc does
// not say.
int64_t peak_resident_mb() {
  std::ifstream status("/proc/self/status");
  std::string key;
  int64_t kb = 0;
  while (status >> key)
    if (key == "VmHWM:" && status >> kb) return (kb + 1023) >> 10;
  return 0;
}

class Server;

// One client connection: read a request (header, then body), answer it, repeat while kept alive.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Server& server) : stream_(std::move(socket)), server_(server) {}
  void start();
  void refuse();  // past --max-connections: a 503 and close
  void stop_if_idle();  // on shutdown: close unless a request is being answered

 private:
  enum class State { reading, answering, closed };
  void read_request();
  void on_header(beast::error_code ec);
  void read_body();
  void on_body(beast::error_code ec);
  void answer(HttpResponse r);
  void close();
  bool hold(uint64_t bytes);  // takes bytes of --max-bodies-mb for this request; false when they do not fit
  void give_back();           // once its answer is written (or the connection ends)
  HttpResponse bodies_full() const;

  beast::tcp_stream stream_;
  Server& server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> res_;
  std::string peer_, method_, target_;
  Clock::time_point started_;
  State state_ = State::reading;
  bool refused_ = false;     // past --max-connections, so not counted
  int64_t held_ = 0;         // bytes of --max-bodies-mb this request holds
  // Stored here: Beast keeps a reference to the chunk callback. Holds each chunk before it is read.
  std::function<void(uint64_t, beast::string_view, beast::error_code&)> on_chunk_;
};

class Server {
 public:
  Server(const ServeOptions& o, const Classifier& c, Batcher& b, Metrics& m, Api& api)
      : opt(o), classifier(c), batcher(b), metrics(m), api(api), bodies(int64_t(o.max_bodies_mb) << 20),
        ioc(o.http_threads), acceptor(ioc) {
    metrics.bodies = &bodies;
  }

  const ServeOptions& opt;
  const Classifier& classifier;
  Batcher& batcher;
  Metrics& metrics;
  Api& api;
  Budget bodies;  // bytes of request bodies held (--max-bodies-mb)
  net::io_context ioc;
  tcp::acceptor acceptor;
  std::atomic<bool> stopping{false};
  std::mutex mu;
  std::list<std::weak_ptr<Session>> sessions;  // open ones, to close the idle ones on shutdown

  tcp::endpoint listen() {
    beast::error_code ec;
    const auto addr = net::ip::make_address(opt.host, ec);
    if (ec) throw Error("--host: '" + opt.host + "' is not an IP address");
    const tcp::endpoint ep(addr, uint16_t(opt.port));
    acceptor.open(ep.protocol());
    acceptor.set_option(net::socket_base::reuse_address(true));
    acceptor.bind(ep, ec);
    if (ec) throw Error("cannot listen on " + opt.host + ":" + std::to_string(opt.port) + ": " + ec.message());
    acceptor.listen(net::socket_base::max_listen_connections);
    accept();
    return acceptor.local_endpoint();
  }

  void accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || stopping) return;
      if (!ec) {
        auto s = std::make_shared<Session>(std::move(socket), *this);
        if (metrics.connections >= opt.max_connections) {
          metrics.connection_refused();
          s->refuse();
        } else {
          ++metrics.connections;
          {
            std::lock_guard<std::mutex> lock(mu);
            sessions.remove_if([](const std::weak_ptr<Session>& w) { return w.expired(); });
            sessions.push_back(s);
          }
          s->start();
        }
      }
      accept();
    });
  }

  // Stops accepting and closes connections waiting for a request; those being answered finish.
  void stop() {
    stopping = true;
    net::post(ioc, [this] {
      beast::error_code ec;
      acceptor.close(ec);
      std::lock_guard<std::mutex> lock(mu);
      for (auto& w : sessions)
        if (auto s = w.lock()) s->stop_if_idle();
    });
  }
};

void Session::start() {
  beast::error_code ec;
  const auto ep = stream_.socket().remote_endpoint(ec);
  if (!ec) peer_ = ep.address().to_string() + ":" + std::to_string(ep.port());
  net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_request(); });
}

void Session::refuse() {
  auto self = shared_from_this();
  refused_ = true;
  net::dispatch(stream_.get_executor(), [self] {
    self->started_ = Clock::now();
    self->method_ = "-";
    self->target_ = "-";
    HttpResponse r = json_error(503, "too many connections (" + std::to_string(self->server_.opt.max_connections) +
                                         ", --max-connections); try again shortly");
    r.headers.push_back({"Retry-After", "1"});
    r.close = true;
    self->stream_.expires_after(std::chrono::seconds(1));
    self->state_ = State::answering;
    self->answer(std::move(r));
  });
}

void Session::stop_if_idle() {
  net::post(stream_.get_executor(), [self = shared_from_this()] {
    if (self->state_ == State::reading) self->close();
  });
}

void Session::read_request() {
  if (server_.stopping) return close();
  state_ = State::reading;
  parser_.emplace();
  parser_->header_limit(16 * 1024);
  parser_->body_limit(uint64_t(server_.opt.max_body_mb) << 20);
  // One deadline for the whole request: its header, its body, its answer.
  stream_.expires_after(std::chrono::seconds(server_.opt.timeout_s));
  http::async_read_header(stream_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
}

void Session::on_header(beast::error_code ec) {
  started_ = Clock::now();
  if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::operation_aborted ||
      ec == net::error::connection_reset || ec == net::error::eof)
    return close();
  method_ = "-";
  target_ = "-";
  if (ec == http::error::body_limit) {  // Beast compares Content-Length with body_limit() in the header
    const auto& req = parser_->get();
    method_ = std::string(req.method_string());
    target_ = std::string(req.target());
    HttpResponse r = json_error(413, "the body is " + std::string(req[http::field::content_length]) +
                                         " bytes; at most " + std::to_string(uint64_t(server_.opt.max_body_mb) << 20) +
                                         " (--max-body-mb " + std::to_string(server_.opt.max_body_mb) + ")");
    r.close = true;
    state_ = State::answering;
    return answer(std::move(r));
  }
  if (ec) {
    HttpResponse r = json_error(ec == http::error::header_limit ? 431 : 400, "bad HTTP request: " + ec.message());
    r.close = true;
    state_ = State::answering;
    return answer(std::move(r));
  }
  const auto& req = parser_->get();
  method_ = std::string(req.method_string());
  target_ = std::string(req.target());
  HttpResponse refused;
  if (req.count(http::field::content_encoding) && !beast::iequals(req[http::field::content_encoding], "identity")) {
    refused = json_error(415, "Content-Encoding " + std::string(req[http::field::content_encoding]) +
                                  " is not accepted: send the body as it is");
  }
  if (const auto length = parser_->content_length()) {
    if (!hold(*length)) refused = bodies_full();
  } else if (parser_->chunked()) {
    on_chunk_ = [this](uint64_t size, beast::string_view, beast::error_code& ec) {
      if (!hold(size)) ec = net::error::no_buffer_space;
    };
    parser_->on_chunk_header(on_chunk_);
  }
  if (refused.status != 200) {  // answered without reading the body, which leaves the connection unusable
    refused.close = true;
    state_ = State::answering;
    return answer(std::move(refused));
  }
  if (beast::iequals(req[http::field::expect], "100-continue")) {
    auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_, req.version());
    return http::async_write(stream_, *cont, [self = shared_from_this(), cont](beast::error_code ec, size_t) {
      if (ec) return self->close();
      self->read_body();
    });
  }
  read_body();
}

void Session::read_body() {
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) { self->on_body(ec); });
}

void Session::on_body(beast::error_code ec) {
  if (ec == net::error::no_buffer_space) {  // a chunk did not fit in --max-bodies-mb
    HttpResponse r = bodies_full();
    r.close = true;
    state_ = State::answering;
    return answer(std::move(r));
  }
  if (ec == http::error::body_limit) {
    HttpResponse r = json_error(413, "the body passed " + std::to_string(server_.opt.max_body_mb) +
                                         " MB (--max-body-mb) and was cut off there");
    r.close = true;
    state_ = State::answering;
    return answer(std::move(r));
  }
  if (ec == beast::error::timeout || ec == http::error::end_of_stream || ec == http::error::partial_message ||
      ec == net::error::operation_aborted || ec == net::error::connection_reset || ec == net::error::eof) {
    spdlog::debug("{} {} {}: {} before the request's end; closed", peer_, method_, target_, ec.message());
    return close();
  }
  state_ = State::answering;
  if (ec) {
    HttpResponse r = json_error(400, "bad HTTP request: " + ec.message());
    r.close = true;
    return answer(std::move(r));
  }
  started_ = Clock::now();
  auto& req = parser_->get();
  HttpRequest hr;
  hr.method = method_;
  hr.target = target_;
  hr.content_type = std::string(req[http::field::content_type]);
  hr.inference_header_length = std::string(req["Inference-Header-Content-Length"]);
  hr.body = std::move(req.body());
  const bool keep_alive = req.keep_alive();
  // Until its answer is posted, a request keeps the io_context running, so a drain waits for it.
  auto work = std::make_shared<net::executor_work_guard<net::io_context::executor_type>>(server_.ioc.get_executor());
  server_.api.handle(hr, [self = shared_from_this(), keep_alive, work](HttpResponse r) {
    if (!keep_alive) r.close = true;
    net::post(self->stream_.get_executor(), [self, r = std::move(r)]() mutable { self->answer(std::move(r)); });
    work->reset();
  });
}

void Session::answer(HttpResponse r) {
  if (state_ == State::closed) return;
  res_ = {};
  res_.version(11);
  res_.result(unsigned(r.status));
  res_.set(http::field::server, "vit/" VIT_VERSION);
  res_.set(http::field::content_type, r.content_type);
  for (const auto& [k, v] : r.headers) res_.set(k, v);
  res_.body() = std::move(r.body);
  res_.keep_alive(!r.close && !server_.stopping);
  res_.prepare_payload();
  const double secs = std::chrono::duration<double>(Clock::now() - started_).count();
  const std::string path = target_.substr(0, target_.find('?'));
  server_.metrics.request(Api::endpoint(method_, path), r.status, secs);
  spdlog::debug("{} {} {} {} {:.1f} ms", peer_, method_, target_, r.status, secs * 1e3);
  http::async_write(stream_, res_, [self = shared_from_this()](beast::error_code ec, size_t) {
    self->give_back();
    if (ec || !self->res_.keep_alive()) return self->close();
    self->read_request();
  });
}

bool Session::hold(uint64_t bytes) {
  if (bytes == 0) return true;
  if (bytes > uint64_t(server_.bodies.limit()) || !server_.bodies.take(int64_t(bytes))) return false;
  held_ += int64_t(bytes);
  return true;
}

void Session::give_back() {
  server_.bodies.give(held_);
  held_ = 0;
}

HttpResponse Session::bodies_full() const {
  HttpResponse r = json_error(503, "the server holds " + std::to_string(server_.bodies.used() >> 20) + " of at most " +
                                       std::to_string(server_.opt.max_bodies_mb) +
                                       " MiB of request bodies (--max-bodies-mb); try again shortly");
  r.headers.push_back({"Retry-After", "1"});
  return r;
}

void Session::close() {
  give_back();
  if (state_ == State::closed) return;
  if (!refused_) --server_.metrics.connections;
  state_ = State::closed;
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream_.socket().close(ec);
}

// The signals the server takes through sigwait; blocked in every thread.
sigset_t shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);  // a closed terminal, or `systemctl reload`: a drain too (models are fixed at start)
  return set;
}

std::function<int()> prepare_serve(ServeOptions o) {
  // Before any thread exists (OpenMP's, oneDNN's, Asio's), so all of them inherit the mask.
  const sigset_t signals = shutdown_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // Blocks of 1 MiB and more (decoded images, bodies) come from the system and go back to it when freed:
  // glibc's default would raise that threshold to 32 MiB after the first large free and keep up to twice
  // that, freed, in each thread's arena, where a decoded bomb's memory outlives its request.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  mallopt(M_TRIM_THRESHOLD, 4 << 20);
  if (o.max_queue < o.max_batch)
    throw Error("--max-queue (" + std::to_string(o.max_queue) + ") must hold at least --max-batch (" +
                std::to_string(o.max_batch) + ") images");
  if (o.max_bodies_mb < o.max_body_mb)
    throw Error("--max-bodies-mb (" + std::to_string(o.max_bodies_mb) + ") must hold at least one body of --max-body-mb (" +
                std::to_string(o.max_body_mb) + ")");
  if (o.max_pixels > int64_t(o.max_queue_mp) * 1'000'000)
    throw Error("--max-queue-mp (" + std::to_string(o.max_queue_mp) + ") must hold at least one image of --max-pixels (" +
                std::to_string(o.max_pixels) + ")");
  ClassifierOptions co = classifier_options(o.model);
  co.batch = o.max_batch;
  co.keep_logits = true;
  co.max_pixels = o.max_pixels;
  auto classifier = std::make_shared<Classifier>(load_classifier(o.model, co));
  if (o.name.empty()) o.name = classifier->info().name;
  // Everything the server runs on, made and bound here so that a busy port is a usage error too.
  struct Service {
    Metrics metrics;
    std::atomic<bool> counting{false};
    std::unique_ptr<Budget> pixels;
    std::unique_ptr<Batcher> batcher;
    std::unique_ptr<Api> api;
    std::unique_ptr<Server> server;
    tcp::endpoint endpoint;
  };
  auto svc = std::make_shared<Service>();
  BatcherOptions bo;
  bo.max_batch = o.max_batch;
  bo.max_delay_ms = o.max_delay_ms;
  bo.max_queue = o.max_queue;
  Metrics* metrics = &svc->metrics;
  std::atomic<bool>* counting = &svc->counting;  // the warm-up passes are not counted
  svc->batcher = std::make_unique<Batcher>(*classifier, bo, [metrics, counting](const BatchStats& s) {
    if (*counting) metrics->batch(s);
  });
  svc->pixels = std::make_unique<Budget>(int64_t(o.max_queue_mp) * 1'000'000);
  svc->metrics.pixels = svc->pixels.get();
  svc->api = std::make_unique<Api>(*classifier, *svc->batcher, svc->metrics, *svc->pixels,
                                   ApiOptions{o.name, o.max_batch, o.max_queue, o.max_pixels});
  auto opt = std::make_shared<ServeOptions>(o);
  svc->server = std::make_unique<Server>(*opt, *classifier, *svc->batcher, svc->metrics, *svc->api);
  svc->endpoint = svc->server->listen();
  return [opt, classifier, svc] {
    const ServeOptions& o = *opt;
    std::signal(SIGPIPE, SIG_IGN);  // a client gone mid-answer is an error code, not the end of the server
    Server& server = *svc->server;
    const tcp::endpoint& ep = svc->endpoint;
    const ModelInfo info = classifier->info();
    std::fprintf(stderr,
                 "vit serve: model %s (%s, %s, %lld classes, %lldx%lld) at http://%s:%u, max batch %d, max delay "
                 "%d ms, queue %d images and %d MP, body %d MB, bodies %d MB, image %lld pixels, timeout %d s, "
                 "%d connections, %d threads\n",
                 o.name.c_str(), info.file.c_str(), info.precision.c_str(), (long long)info.classes,
                 (long long)info.input_height, (long long)info.input_width, ep.address().to_string().c_str(),
                 unsigned(ep.port()), o.max_batch, o.max_delay_ms, o.max_queue, o.max_queue_mp, o.max_body_mb,
                 o.max_bodies_mb, (long long)o.max_pixels, o.timeout_s, o.max_connections, set_threads(0));
    std::fflush(stderr);
    std::vector<std::thread> io;
    for (int i = 0; i < o.http_threads; ++i) io.emplace_back([&server] { server.ioc.run(); });
    // The first signal drains; a second SIGINT ends the process at once.
    std::thread waiter([&server] {
      const sigset_t signals = shutdown_signals();
      int sig = 0;
      sigwait(&signals, &sig);
      std::fprintf(stderr, "vit serve: %s: answering the requests already read, then exiting (SIGINT again: now)\n",
                   sig == SIGINT ? "SIGINT" : sig == SIGHUP ? "SIGHUP" : "SIGTERM");
      server.stop();
      for (;;) {
        sigwait(&signals, &sig);
        if (sig == SIGINT) std::_Exit(kExitInterrupted);
      }
    });
    waiter.detach();
    // Ready once the batching thread has run a forward pass of every batch size it runs (--max-batch and
    // the powers of two below it): no request pays for the engine's set-up, and what the process holds
    // from here on is the model's, its Plans' and its threads' (the bound's first term).
    std::vector<int64_t> sizes{o.max_batch};
    for (int64_t n = 1; n < o.max_batch; n *= 2) sizes.push_back(n);
    for (const int64_t n : sizes) {
      std::promise<std::string> ran;
      const std::vector<float> zeros(size_t(n * 3 * info.input_height * info.input_width), 0.f);
      if (!svc->batcher->submit(zeros, n, [&ran](std::vector<float>, std::string error) { ran.set_value(error); }))
        throw Error("the batcher refused the warm-up pass");
      const std::string error = ran.get_future().get();
      if (!error.empty()) throw Error("the warm-up pass failed: " + error);
    }
    const int64_t ready_mb = peak_resident_mb();
    std::fprintf(stderr, "vit serve: ready; memory: %lld MiB so far, at most %lld MiB under any load (%lld + %lld x "
                 "--max-bodies-mb + %lld B x --max-queue-mp: docs/SERVING.md)\n", (long long)ready_mb,
                 (long long)memory_bound_mb(ready_mb, o), (long long)ready_mb, (long long)kBodyCopies,
                 (long long)kBytesPerPixel);
    std::fflush(stderr);
    svc->counting = true;
    svc->api->set_ready();
    for (std::thread& t : io) t.join();
    svc->batcher->close();
    std::fprintf(stderr, "vit serve: stopped\n");
    return kExitOk;
  };
}

}  // namespace

void add_serve_command(CLI::App& app, Prepare* prepare) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "classify images over HTTP: /v1/classify, KServe v2, /metrics");
  add_model_options(cmd, &o->model);
  cmd->add_option("--host", o->host, "address to listen on (0.0.0.0: every interface)")->capture_default_str();
  add_number_option(cmd, "--port", &o->port, 0, 65535, "port to listen on (0: any free one, printed at start-up)");
  cmd->add_option("--name", o->name, "the model's name in /v2/models/NAME (default: the model folder's name)");
  add_number_option(cmd, "--max-batch", &o->max_batch, 1, int(kMaxBatch), "images per forward pass at most");
  add_number_option(cmd, "--max-delay-ms", &o->max_delay_ms, 0, 10000,
                    "after a request arrives, wait this long for others to fill its batch");
  add_number_option(cmd, "--max-queue", &o->max_queue, 1, 1 << 20,
                    "images waiting at most; past it, requests get 503 and Retry-After");
  add_number_option(cmd, "--max-body-mb", &o->max_body_mb, 1, 4096, "largest request body, in MiB (413 past it)");
  add_number_option(cmd, "--max-bodies-mb", &o->max_bodies_mb, 1, 1 << 20,
                    "request bodies held at once (being read, queued, answered), in MiB; past it, 503 and Retry-After");
  add_number_option(cmd, "--max-pixels", &o->max_pixels, int64_t(1), int64_t(1) << 40,
                    "largest image, in pixels, refused from its header before decoding (400)");
  add_number_option(cmd, "--max-queue-mp", &o->max_queue_mp, 1, 1 << 20,
                    "megapixels the queued images hold at most (from their headers, until answered); past it, 503 "
                    "and Retry-After");
  add_number_option(cmd, "--timeout-s", &o->timeout_s, 1, 86400,
                    "total time for one request: reading it, answering it and writing the answer");
  add_number_option(cmd, "--max-connections", &o->max_connections, 1, 1 << 20,
                    "open connections at most; past it, a new one gets 503 and is closed");
  add_number_option(cmd, "--http-threads", &o->http_threads, 1, 64, "threads reading and writing HTTP");
  cmd->callback([o, prepare] { *prepare = [o] { return prepare_serve(*o); }; });
}

}  // namespace vit::app

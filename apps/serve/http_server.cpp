// The connections of http_server.h: one Session per client connection reads a request (header, then
// body), hands it to the Handler, writes the answer and reads the next while kept alive.
#include "http_server.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <array>
#include <chrono>
#include <list>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "vit/error.h"

namespace vit::app {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

class Session;

struct HttpServer::Impl {
  Impl(const HttpLimits& l, Handler& h)
      : limits(l), handler(h), bodies(int64_t(l.max_bodies_mb) << 20), ioc(l.threads), acceptor(ioc) {}
  void accept();

  const HttpLimits limits;
  Handler& handler;
  Budget bodies;  // bytes of request bodies held
  net::io_context ioc;
  tcp::acceptor acceptor;
  std::atomic<bool> stopping{false};
  std::atomic<int64_t> connections{0}, refused{0};
  std::mutex mu;
  std::list<std::weak_ptr<Session>> sessions;  // open ones, to close the idle ones on shutdown
};

namespace {

// The errors that mean the client went away or stopped sending: the connection is closed, unanswered.
bool gone(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == http::error::partial_message || ec == beast::error::timeout ||
         ec == net::error::operation_aborted || ec == net::error::connection_reset || ec == net::error::eof;
}

}  // namespace

// One client connection: read a request (header, then body), answer it, repeat while kept alive.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpServer::Impl& server) : stream_(std::move(socket)), server_(server) {}

  void start() {
    beast::error_code ec;
    const auto ep = stream_.socket().remote_endpoint(ec);
    if (!ec) peer_ = ep.address().to_string() + ":" + std::to_string(ep.port());
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_request(); });
  }

  // Past max_connections: a 503 and close.
  void refuse() {
    refused_ = true;
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      self->stream_.expires_after(std::chrono::seconds(1));
      self->fail(busy("too many connections (" + std::to_string(self->server_.limits.max_connections) +
                      ", --max-connections)"));
    });
  }

  // On shutdown: close unless a request is being answered.
  void stop_if_idle() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      if (self->state_ == State::reading) self->close();
    });
  }

 private:
  enum class State { reading, answering, closed };

  void read_request() {
    if (server_.stopping) return close();
    state_ = State::reading;
    method_ = path_ = "-";
    parser_.emplace();
    parser_->header_limit(16 * 1024);
    parser_->body_limit(uint64_t(server_.limits.max_body_mb) << 20);
    // One deadline for the whole request: its header, its body, its answer.
    stream_.expires_after(std::chrono::seconds(server_.limits.timeout_s));
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    if (gone(ec)) return close();
    if (ec && ec != http::error::body_limit)
      return fail(HttpError(ec == http::error::header_limit ? 431 : 400, "bad HTTP request: " + ec.message()));
    const auto& req = parser_->get();
    method_ = std::string(req.method_string());
    const std::string target(req.target());
    path_ = target.substr(0, target.find('?'));
    query_ = target.size() > path_.size() ? target.substr(path_.size() + 1) : "";
    // Beast compares Content-Length with body_limit() in the header: answered without reading the body.
    if (ec == http::error::body_limit)
      return fail(HttpError(413, "the body is " + std::string(req[http::field::content_length]) + " bytes; at most " +
                                     std::to_string(uint64_t(server_.limits.max_body_mb) << 20) + " (--max-body-mb " +
                                     std::to_string(server_.limits.max_body_mb) + ")"));
    if (req.count(http::field::content_encoding) && !beast::iequals(req[http::field::content_encoding], "identity"))
      return fail(HttpError(415, "Content-Encoding " + std::string(req[http::field::content_encoding]) +
                                     " is not accepted: send the body as it is"));
    if (const auto length = parser_->content_length()) {
      if (!hold(*length)) return fail(bodies_full());
    } else if (parser_->chunked()) {
      on_chunk_ = [this](uint64_t size, beast::string_view, beast::error_code& ec) {
        if (!hold(size)) ec = net::error::no_buffer_space;
      };
      parser_->on_chunk_header(on_chunk_);
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

  void read_body() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_body(ec); });
  }

  void on_body(beast::error_code ec) {
    if (ec == net::error::no_buffer_space) return fail(bodies_full());  // a chunk did not fit
    if (ec == http::error::body_limit)
      return fail(HttpError(413, "the body passed " + std::to_string(server_.limits.max_body_mb) +
                                     " MB (--max-body-mb) and was cut off there"));
    if (gone(ec)) {
      spdlog::debug("{} {} {}: {} before the request's end; closed", peer_, method_, path_, ec.message());
      return close();
    }
    if (ec) return fail(HttpError(400, "bad HTTP request: " + ec.message()));
    state_ = State::answering;
    auto& req = parser_->get();
    HttpRequest hr;
    hr.peer = peer_;
    hr.method = method_;
    hr.path = path_;
    hr.query = query_;
    hr.content_type = std::string(req[http::field::content_type]);
    hr.inference_header_length = std::string(req["Inference-Header-Content-Length"]);
    hr.body = std::move(req.body());
    const bool keep_alive = req.keep_alive();
    // Until its answer is posted, a request keeps the io_context running, so a drain waits for it.
    auto work = std::make_shared<net::executor_work_guard<net::io_context::executor_type>>(server_.ioc.get_executor());
    server_.handler.handle(std::move(hr), [self = shared_from_this(), keep_alive, work](HttpResponse r) {
      if (!keep_alive) r.close = true;
      net::post(self->stream_.get_executor(), [self, r = std::move(r)]() mutable { self->answer(std::move(r)); });
      work->reset();
    });
  }

  // An error met before the request reached the handler: answered in the path's form, and the connection
  // closed (its body, if any, is unread).
  void fail(const HttpError& e) {
    HttpResponse r = server_.handler.error(peer_, method_, path_, e);
    r.close = true;
    unread_ = !refused_;
    state_ = State::answering;
    answer(std::move(r));
  }

  void answer(HttpResponse r) {
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
    http::async_write(stream_, res_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->give_back();
      if (!ec && self->unread_) return self->linger();
      if (ec || !self->res_.keep_alive()) return self->close();
      self->read_request();
    });
  }

  // After an answer that left the request's body unread: stop sending and read (and drop) what the client
  // still sends, for at most a second, before closing. Closing with unread bytes would reset the connection,
  // and a reset can reach the client before it has read the answer (a 503 or 413 it never sees).
  void linger() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(std::chrono::seconds(1));
    drain();
  }
  void drain() {
    stream_.async_read_some(net::buffer(dropped_), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->close();
      self->drain();
    });
  }

  void close() {
    give_back();
    if (state_ == State::closed) return;
    if (!refused_) --server_.connections;
    state_ = State::closed;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }

  // Takes bytes of --max-bodies-mb for this request; false when they do not fit.
  bool hold(uint64_t bytes) {
    if (bytes == 0) return true;
    if (bytes > uint64_t(server_.bodies.limit()) || !server_.bodies.take(int64_t(bytes))) return false;
    held_ += int64_t(bytes);
    return true;
  }
  void give_back() {
    server_.bodies.give(held_);
    held_ = 0;
  }
  HttpError bodies_full() const {
    return busy("the server holds " + std::to_string(server_.bodies.used() >> 20) + " of at most " +
                std::to_string(server_.limits.max_bodies_mb) + " MiB of request bodies (--max-bodies-mb)");
  }

  beast::tcp_stream stream_;
  HttpServer::Impl& server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> res_;
  std::string peer_ = "-", method_ = "-", path_ = "-", query_;
  State state_ = State::reading;
  bool refused_ = false;  // past max_connections, so not counted
  bool unread_ = false;   // answered before its body was read: linger() before closing
  std::array<char, 16384> dropped_;  // what linger() reads
  int64_t held_ = 0;      // bytes of --max-bodies-mb this request holds, given back once its answer is written
  // Stored here: Beast keeps a reference to the chunk callback. Holds each chunk before it is read.
  std::function<void(uint64_t, beast::string_view, beast::error_code&)> on_chunk_;
};

void HttpServer::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || stopping) return;
    if (!ec) {
      auto s = std::make_shared<Session>(std::move(socket), *this);
      if (connections >= limits.max_connections) {
        ++refused;
        s->refuse();
      } else {
        ++connections;
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

HttpServer::HttpServer(const HttpLimits& limits, Handler& handler) : impl_(std::make_unique<Impl>(limits, handler)) {}
HttpServer::~HttpServer() = default;

std::string HttpServer::listen() {
  Impl& s = *impl_;
  beast::error_code ec;
  const auto addr = net::ip::make_address(s.limits.host, ec);
  if (ec) throw Error("--host: '" + s.limits.host + "' is not an IP address");
  const tcp::endpoint ep(addr, uint16_t(s.limits.port));
  s.acceptor.open(ep.protocol());
  s.acceptor.set_option(net::socket_base::reuse_address(true));
  s.acceptor.bind(ep, ec);
  if (ec) throw Error("cannot listen on " + s.limits.host + ":" + std::to_string(s.limits.port) + ": " + ec.message());
  s.acceptor.listen(net::socket_base::max_listen_connections);
  s.accept();
  const tcp::endpoint bound = s.acceptor.local_endpoint();
  return bound.address().to_string() + ":" + std::to_string(bound.port());
}

uint16_t HttpServer::port() const { return impl_->acceptor.local_endpoint().port(); }

void HttpServer::run() {
  std::vector<std::thread> more;
  for (int i = 1; i < impl_->limits.threads; ++i) more.emplace_back([this] { impl_->ioc.run(); });
  impl_->ioc.run();
  for (std::thread& t : more) t.join();
}

void HttpServer::stop() {
  Impl& s = *impl_;
  s.stopping = true;
  net::post(s.ioc, [&s] {
    beast::error_code ec;
    s.acceptor.close(ec);
    std::lock_guard<std::mutex> lock(s.mu);
    for (auto& w : s.sessions)
      if (auto session = w.lock()) session->stop_if_idle();
  });
}

int64_t HttpServer::open_connections() const { return impl_->connections; }
int64_t HttpServer::refused_connections() const { return impl_->refused; }
const Budget& HttpServer::bodies() const { return impl_->bodies; }
Budget& HttpServer::bodies() { return impl_->bodies; }

}  // namespace vit::app

// The connections of http_server.h: one Session per client connection reads a request (header, then
// body), hands it to the Handler, writes the answer and reads the next while kept alive. Its own timer holds
// each request to its deadline, so that a request cut off by it can still be answered (408, 503).
#include "http_server.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <array>
#include <cerrno>
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

namespace {

// Past max_connections, this many connections more at once have their request read (within
// kHeadroomSeconds), so that health checks and metrics are answered and every other request gets its 503 in
// its route's form; past those too, a connection gets a plain 503 at once, nothing read.
constexpr int64_t kHeadroom = 64;
constexpr int kHeadroomSeconds = 2;
// An error answer written when its request cannot go on (408, 413, 503, ...) gets this long.
constexpr int kErrorAnswerSeconds = 2;

// How a connection was taken: within max_connections, in the headroom past it, or past both.
enum class Admission { Counted, Headroom, Refused };

}  // namespace

struct HttpServer::Impl {
  Impl(const HttpLimits& l, Handler& h)
      : limits(l), handler(h), bodies(int64_t(l.max_bodies_mb) << 20), ioc(l.threads), acceptor(ioc) {}
  void accept();
  Admission admit();

  const HttpLimits limits;
  Handler& handler;
  Budget bodies;  // bytes of request bodies held
  net::io_context ioc;
  tcp::acceptor acceptor;
  std::atomic<bool> stopping{false};
  std::atomic<int64_t> connections{0}, headroom{0}, refused{0};
  std::mutex mu;
  std::list<std::weak_ptr<Session>> sessions;  // open ones, to close the idle ones on shutdown
};

namespace {

// The errors that mean the client went away or stopped sending: the connection is closed, unanswered.
bool gone(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == http::error::partial_message || ec == beast::error::timeout ||
         ec == net::error::operation_aborted || ec == net::error::connection_reset || ec == net::error::eof;
}

// The transfer codings of a Transfer-Encoding value besides chunked ("gzip" of "gzip, chunked"), "" for none.
std::string other_codings(beast::string_view value) {
  std::string others;
  size_t pos = 0;
  while (pos <= value.size()) {
    const size_t comma = std::min(value.find(',', pos), value.size());
    beast::string_view coding = value.substr(pos, comma - pos);
    coding = coding.substr(0, coding.find(';'));
    while (!coding.empty() && (coding.front() == ' ' || coding.front() == '\t')) coding.remove_prefix(1);
    while (!coding.empty() && (coding.back() == ' ' || coding.back() == '\t')) coding.remove_suffix(1);
    if (!coding.empty() && !beast::iequals(coding, "chunked")) others += (others.empty() ? "" : ", ") + std::string(coding);
    pos = comma + 1;
  }
  return others;
}

}  // namespace

// One client connection: read a request (header, then body), answer it, repeat while kept alive.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpServer::Impl& server, Admission admission)
      : stream_(std::move(socket)), deadline_(stream_.get_executor()), server_(server), admission_(admission) {}

  void start() {
    beast::error_code ec;
    const auto ep = stream_.socket().remote_endpoint(ec);
    if (!ec) peer_ = ep.address().to_string() + ":" + std::to_string(ep.port());
    fd_ = stream_.socket().native_handle();
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      if (self->admission_ != Admission::Refused) return self->read_request();
      self->unread_ = false;  // closed at once after its 503, to free the connection soonest
      self->fail(self->too_many());
    });
  }

  // On shutdown: close unless a request is being answered.
  void stop_if_idle() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      if (self->state_ == State::reading) self->close();
    });
  }

 private:
  enum class State { reading, answering, writing, closed };

  void read_request() {
    if (server_.stopping) return close();
    state_ = State::reading;
    timed_out_ = false;
    unread_ = true;  // until the body is read
    method_ = path_ = "-";
    origin_.clear();
    parser_.emplace();
    parser_->header_limit(16 * 1024);
    parser_->body_limit(uint64_t(server_.limits.max_body_mb) << 20);
    stream_.expires_never();  // deadline_ times the request, not the stream
    arm(admission_ == Admission::Counted ? server_.limits.timeout_s : kHeadroomSeconds);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  // One deadline for the whole request: its header, its body, its answer.
  void arm(int seconds) {
    const uint64_t request = ++request_;
    deadline_.expires_after(std::chrono::seconds(seconds));
    deadline_.async_wait([self = shared_from_this(), request](beast::error_code ec) {
      if (!ec && request == self->request_) self->on_deadline();
    });
  }

  // The request's deadline passed. Nothing of a request read (an idle kept-alive connection): closed. Being
  // read: the read is cancelled, and its handler answers 408. Being answered: 503 now, and its work, if not
  // begun, is dropped (wanted() says no from here on). Its answer being written: closed.
  void on_deadline() {
    switch (state_) {
      case State::reading:
        if (!parser_->got_some() && buffer_.size() == 0) return close();
        timed_out_ = true;
        return stream_.cancel();
      case State::answering:
        answering_ = 0;
        unread_ = false;
        return fail(busy("no answer within " + std::to_string(server_.limits.timeout_s) + " s (--timeout-s)"));
      case State::writing:
        return close();
      case State::closed:
        return;
    }
  }

  HttpError request_timeout() const {
    return HttpError(408, "the request did not arrive whole within " + std::to_string(server_.limits.timeout_s) +
                              " s (--timeout-s)");
  }
  HttpError too_many() const {
    return busy("too many connections (" + std::to_string(server_.limits.max_connections) + ", --max-connections)");
  }

  void on_header(beast::error_code ec) {
    if (timed_out_) return fail(request_timeout());
    if (gone(ec)) return close();
    if (ec && ec != http::error::body_limit)
      return fail(HttpError(ec == http::error::header_limit ? 431 : 400, "bad HTTP request: " + ec.message()));
    const auto& req = parser_->get();
    method_ = std::string(req.method_string());
    const std::string target(req.target());
    path_ = target.substr(0, target.find('?'));
    query_ = target.size() > path_.size() ? target.substr(path_.size() + 1) : "";
    origin_ = std::string(req[http::field::origin]);
    if (admission_ == Admission::Headroom && !server_.handler.headroom(method_, path_)) {
      ++server_.refused;
      return fail(too_many());
    }
    // Beast compares Content-Length with body_limit() in the header: answered without reading the body.
    if (ec == http::error::body_limit)
      return fail(HttpError(413, "the body is " + std::string(req[http::field::content_length]) + " bytes; at most " +
                                     std::to_string(uint64_t(server_.limits.max_body_mb) << 20) + " (--max-body-mb " +
                                     std::to_string(server_.limits.max_body_mb) + ")"));
    if (req.count(http::field::content_encoding) && !beast::iequals(req[http::field::content_encoding], "identity"))
      return fail(HttpError(415, "Content-Encoding " + std::string(req[http::field::content_encoding]) +
                                     " is not accepted: send the body as it is"));
    if (const std::string others = other_codings(req[http::field::transfer_encoding]); !others.empty())
      return fail(HttpError(501, "Transfer-Encoding " + others + " is not implemented: send the body as it is, "
                                 "with Content-Length or chunked"));
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
    if (timed_out_) return fail(request_timeout());
    if (ec == net::error::no_buffer_space) return fail(bodies_full());  // a chunk did not fit
    if (ec == http::error::body_limit)
      return fail(HttpError(413, "the body passed " + std::to_string(server_.limits.max_body_mb) +
                                     " MB (--max-body-mb) and was cut off there"));
    if (gone(ec)) {
      spdlog::debug("{} {} {}: {} before the request's end; closed", peer_, method_, path_, ec.message());
      return close();
    }
    if (ec) return fail(HttpError(400, "bad HTTP request: " + ec.message()));
    hand_over();
  }

  // The request read whole goes to the handler; its answer comes back to this connection's strand, unless
  // the deadline has answered it meanwhile.
  void hand_over() {
    state_ = State::answering;
    unread_ = false;
    auto& req = parser_->get();
    HttpRequest hr = head();
    hr.query = query_;
    hr.content_type = std::string(req[http::field::content_type]);
    hr.inference_header_length = std::string(req["Inference-Header-Content-Length"]);
    hr.cors_method = std::string(req[http::field::access_control_request_method]);
    hr.cors_headers = std::string(req[http::field::access_control_request_headers]);
    hr.body = std::move(req.body());
    const uint64_t request = request_;
    answering_ = request;
    hr.wanted = [weak = weak_from_this(), request] {
      const std::shared_ptr<Session> self = weak.lock();
      return self && self->wanted(request);
    };
    const bool keep_alive = req.keep_alive() && admission_ == Admission::Counted;
    // Until its answer is posted, a request keeps the io_context running, so a drain waits for it.
    auto work = std::make_shared<net::executor_work_guard<net::io_context::executor_type>>(server_.ioc.get_executor());
    server_.handler.handle(std::move(hr), [self = shared_from_this(), keep_alive, work, request](HttpResponse r) {
      if (!keep_alive) r.close = true;
      net::post(self->stream_.get_executor(), [self, request, r = std::move(r)]() mutable {
        if (self->answering_ == request) self->answer(std::move(r));
      });
      work->reset();
    });
  }

  // Whether the client of this request still waits for its answer: the request is being answered and its
  // connection has not ended (a peek finds data or nothing yet, not the end of the stream or an error). A
  // client that closed its sending side after its request counts as gone, as nginx counts it. Any thread.
  bool wanted(uint64_t request) {
    std::lock_guard<std::mutex> lock(fd_mu_);
    if (fd_ < 0 || answering_ != request) return false;
    char c;
    const ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
  }

  // What the handler's error() is told of the request: its peer, method, path and origin.
  HttpRequest head() const {
    HttpRequest h;
    h.peer = peer_;
    h.method = method_;
    h.path = path_;
    h.origin = origin_;
    return h;
  }

  // An answer without the handler (an error, the deadline): in the path's form, and the connection closed
  // (lingering first while the request's body may still be coming).
  void fail(const HttpError& e) {
    HttpResponse r = server_.handler.error(head(), e);
    r.close = true;
    stream_.expires_after(std::chrono::seconds(kErrorAnswerSeconds));
    answer(std::move(r));
  }

  void answer(HttpResponse r) {
    if (state_ == State::closed) return;
    answering_ = 0;
    state_ = State::writing;
    head_serializer_.reset();
    res_ = {};
    res_.version(11);
    res_.result(unsigned(r.status));
    res_.set(http::field::server, "vit/" VIT_VERSION);
    res_.set(http::field::content_type, r.content_type);
    for (const auto& [k, v] : r.headers) res_.set(k, v);
    res_.body() = std::move(r.body);
    res_.keep_alive(!r.close && !server_.stopping);
    res_.prepare_payload();
    const auto written = [self = shared_from_this()](beast::error_code ec, size_t) {
      self->give_back();
      if (!ec && self->unread_) return self->linger();
      if (ec || !self->res_.keep_alive()) return self->close();
      self->read_request();
    };
    if (method_ == "HEAD") {  // the headers GET's answer would have, Content-Length included, and no body
      head_serializer_.emplace(res_);
      return http::async_write_header(stream_, *head_serializer_, written);
    }
    http::async_write(stream_, res_, written);
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
    if (admission_ == Admission::Counted) --server_.connections;
    if (admission_ == Admission::Headroom) --server_.headroom;
    state_ = State::closed;
    answering_ = 0;
    deadline_.cancel();
    std::lock_guard<std::mutex> lock(fd_mu_);  // wanted() peeks at fd_ from other threads
    fd_ = -1;
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
  net::steady_timer deadline_;  // the request's deadline
  HttpServer::Impl& server_;
  const Admission admission_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> res_;
  std::optional<http::response_serializer<http::string_body>> head_serializer_;  // an answer to HEAD
  std::string peer_ = "-", method_ = "-", path_ = "-", query_, origin_;
  State state_ = State::reading;
  uint64_t request_ = 0;                  // the requests read on this connection, the current one's number
  std::atomic<uint64_t> answering_{0};    // the request the handler is answering, 0 when none
  bool timed_out_ = false;  // the deadline cut the request's read off: answered 408
  bool unread_ = true;      // its body not read whole: linger() after answering, before closing
  std::mutex fd_mu_;
  int fd_ = -1;             // the socket, for wanted(); -1 once closed
  std::array<char, 16384> dropped_;  // what linger() reads
  int64_t held_ = 0;      // bytes of --max-bodies-mb this request holds, given back once its answer is written
  // Stored here: Beast keeps a reference to the chunk callback. Holds each chunk before it is read.
  std::function<void(uint64_t, beast::string_view, beast::error_code&)> on_chunk_;
};

// Within max_connections, or in the headroom past it, or refused; counted as such.
Admission HttpServer::Impl::admit() {
  if (connections < limits.max_connections) {
    ++connections;
    return Admission::Counted;
  }
  if (headroom < kHeadroom) {
    ++headroom;
    return Admission::Headroom;
  }
  ++refused;
  return Admission::Refused;
}

void HttpServer::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || stopping) return;
    if (!ec) {
      const Admission admission = admit();
      auto s = std::make_shared<Session>(std::move(socket), *this, admission);
      if (admission != Admission::Refused) {
        std::lock_guard<std::mutex> lock(mu);
        sessions.remove_if([](const std::weak_ptr<Session>& w) { return w.expired(); });
        sessions.push_back(s);
      }
      s->start();
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

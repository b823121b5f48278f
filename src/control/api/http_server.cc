#include "control/api/http_server.h"

#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/units.h"
#include "common/utf8.h"
#include "control/api/middleware.h"

namespace edt::control {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

Reply error_reply(int status, const Status& error) { return json_reply(status, error_json(status, error)); }

Status refusal(std::string field, std::string message, std::string fix) {
  return malformed(std::move(field), std::move(message), std::move(fix));
}

// Why a request's headers could not be read; `in_request_line`: the
// parser had not read the request line yet.
Status too_large(size_t limit) {
  return {StatusCode::kResourceExhausted, "", "the request body is over " + format_size(limit), "send a smaller body"};
}

std::pair<int, Status> unreadable(beast::error_code ec, bool in_request_line, const HttpServerOptions& o) {
  if (ec == http::error::body_limit) return {413, too_large(o.max_body_bytes)};
  if (ec == http::error::header_limit && in_request_line)
    return {414, refusal("", "the request line (method, path and query) is over " + std::to_string(o.max_uri_bytes) +
                                 " bytes",
                         "send a shorter path and query; names are at most 63 characters")};
  if (ec == http::error::header_limit)
    return {431, refusal("", "the request's headers are over " + std::to_string(o.max_header_bytes) + " bytes in all",
                         "send fewer or shorter headers")};
  if (ec == http::error::bad_content_length)
    return {400, refusal("Content-Length", "Content-Length is not one number", "send the body's size in bytes")};
  return {400, refusal("", "the request is not HTTP/1.1 that edtd can read (" + ec.message() + ")",
                       "send 'METHOD /path HTTP/1.1', header lines and an empty line")};
}

bool served_method(std::string_view method) {
  return method == "GET" || method == "HEAD" || method == "POST" || method == "PATCH" || method == "PUT" ||
         method == "DELETE";
}

using Message = http::request<http::string_body>;

// What is wrong with a request whose headers were read, before its body is.
std::optional<std::pair<int, Status>> check_header(const Message& m, const HttpServerOptions& o) {
  const std::string method(m.method_string().data(), m.method_string().size());
  if (!served_method(method))
    return std::pair{400, refusal("", "the method " + utf8::sanitized(method) + " is not served",
                                  "use GET, POST, PATCH or DELETE (see GET /api/v1/openapi.json)")};
  if (m.target().size() > o.max_uri_bytes)
    return std::pair{414, unreadable(http::error::header_limit, true, o).second};
  for (const auto& field : m) {
    if (field.name_string().size() + 2 + field.value().size() > o.max_header_line_bytes)
      return std::pair{431, refusal(utf8::sanitized(std::string(field.name_string().data(), field.name_string().size())),
                                    "the header " + utf8::sanitized(std::string(field.name_string().data(), field.name_string().size())) + " is over " +
                                        std::to_string(o.max_header_line_bytes) + " bytes",
                                    "keep each header line under " + std::to_string(o.max_header_line_bytes) +
                                        " bytes (a token is 68)")};
  }
  const bool has_body_method = method == "POST" || method == "PATCH" || method == "PUT";
  const bool chunked = m.find(http::field::transfer_encoding) != m.end();
  if (chunked || (has_body_method && m.find(http::field::content_length) == m.end())) {
    const std::string what = chunked ? "a body sent with Transfer-Encoding (edtd reads Content-Length bodies only)"
                                     : "a " + method + " without Content-Length";
    return std::pair{411, refusal("Content-Length", what + " is refused",
                                  "send Content-Length with the body's size in bytes (Content-Length: 0 for no body)")};
  }
  return std::nullopt;
}

// The message's head (all but the body) as the API's Request.
Request head_of(const Message& m, const std::string& address) {
  Request r;
  r.method = std::string(m.method_string());
  if (r.method == "HEAD") r.method = "GET";
  r.target = std::string(m.target());
  const size_t mark = r.target.find('?');
  r.path = percent_decoded(std::string_view(r.target).substr(0, mark));
  if (mark != std::string::npos) r.params = parse_query(std::string_view(r.target).substr(mark + 1));
  for (const auto& field : m) r.headers.emplace(std::string(field.name_string().data(), field.name_string().size()), std::string(field.value()));
  r.remote_addr = address;
  return r;
}

// The message as the API's Request.
Request to_request(Message&& m, const std::string& address) {
  Request r = head_of(m, address);
  r.body = std::move(m.body());
  return r;
}

// Sends all of `bytes` on the blocking-or-not socket `fd`, waiting at most
// `timeout` for it to take each part; false if it did not.
bool send_all(int fd, std::string_view bytes, std::chrono::milliseconds timeout) {
  while (!bytes.empty()) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

ClientLimits::ClientLimits(const HttpServerOptions& options) : options_(options) {}

ClientLimits::Bound ClientLimits::bound(Kind kind) const {
  const HttpServerOptions& o = options_;
  switch (kind) {
    case Kind::kConnection: return {o.max_connections, o.max_connections_per_user, o.max_connections_per_address};
    case Kind::kStream: return {o.max_streams, o.max_streams_per_user, o.max_streams_per_address};
    case Kind::kRequest:
      // Requests wait for a worker in turn; the bound in all is the connections'.
      return {std::numeric_limits<size_t>::max(), o.max_requests_per_user, o.max_requests_per_address};
    case Kind::kLargeBody: return {o.max_large_bodies, o.max_large_bodies_per_user, o.max_large_bodies_per_user};
  }
  return {0, 0, 0};
}

std::string ClientLimits::key(const Client& client) {
  return client.user.empty() ? "address " + client.address : "user " + client.user;
}

Status ClientLimits::take(Kind kind, const Client& client) {
  std::lock_guard<std::mutex> lock(mu_);
  const Bound b = bound(kind);
  if (total_[kind] >= b.in_all) return refusal(kind, client, true);
  size_t& mine = held_[{kind, key(client)}];
  if (mine >= b.of(client)) {
    if (mine == 0) held_.erase({kind, key(client)});
    return refusal(kind, client, false);
  }
  ++mine;
  ++total_[kind];
  return Status::ok();
}

void ClientLimits::give_back(Kind kind, const Client& client) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find({kind, key(client)});
  EDT_CHECK_MSG(it != held_.end() && it->second > 0, "gave back what " + key(client) + " did not hold");
  if (--it->second == 0) held_.erase(it);
  --total_[kind];
}

Status ClientLimits::move_connection(const Client& from, const Client& to) {
  if (key(from) == key(to)) return Status::ok();
  std::lock_guard<std::mutex> lock(mu_);
  const Bound b = bound(Kind::kConnection);
  size_t& theirs = held_[{Kind::kConnection, key(to)}];
  Status refused;
  if (theirs >= b.of(to)) refused = refusal(Kind::kConnection, to, false);
  ++theirs;
  auto it = held_.find({Kind::kConnection, key(from)});
  EDT_CHECK_MSG(it != held_.end() && it->second > 0, "moved a connection " + key(from) + " did not hold");
  if (--it->second == 0) held_.erase(it);
  return refused;
}

size_t ClientLimits::held(Kind kind, const Client& client) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find({kind, key(client)});
  return it == held_.end() ? 0 : it->second;
}

size_t ClientLimits::held(Kind kind) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = total_.find(kind);
  return it == total_.end() ? 0 : it->second;
}

// The 503's body: which bound is full, whose, and what to do.
Status ClientLimits::refusal(Kind kind, const Client& client, bool in_all) const {
  const Bound b = bound(kind);
  const size_t n = in_all ? b.in_all : b.of(client);
  const std::string count = std::to_string(n);
  const std::string who = client.user.empty() ? "from " + client.address + " without a valid token"
                                              : "of the user " + client.user;
  const std::string whose = in_all             ? "as many as edtd serves at once"
                            : client.user.empty() ? "as many as one address may have before a token is shown"
                                                  : "as many as one user may have";
  const std::string show_token =
      client.user.empty() ? "send 'Authorization: Bearer <token>' with each request (a connection then counts "
                            "against your user, not your address), "
                          : "";
  std::string message, fix;
  switch (kind) {
    case Kind::kConnection:
      message = in_all ? "edtd has " + count + " connections open" : "there are " + count + " connections " + who;
      fix = in_all ? "retry shortly; close connections you keep idle"
                   : show_token + "reuse one connection for several requests (keep-alive), or close ones you keep idle";
      break;
    case Kind::kStream:
      message = (in_all ? "edtd is serving " + count + " streams" : "there are " + count + " streams open " + who) +
                " (followed logs and events, Jupyter connections)";
      fix = in_all ? "retry later" : show_token + "close a log or event stream or a Jupyter tab you keep open";
      break;
    case Kind::kRequest:
      message = "there are " + count + " requests " + who + " being read or handled at once";
      fix = show_token + "wait for answers before sending more requests";
      break;
    case Kind::kLargeBody:
      message = (in_all ? "edtd is reading " + count + " large bodies" : "there are " + count + " large bodies " + who) +
                " (uploads over " + format_size(options_.max_body_bytes) + ") at once";
      fix = "retry when one of the uploads under way has ended";
      break;
  }
  return Status{StatusCode::kUnavailable, "", message + ", " + whose, fix};
}

class HttpServer::Impl {
 public:
  Impl(HttpServerOptions options, HttpHandler handler)
      : options_(std::move(options)), handler_(std::move(handler)), workers_(options_.workers) {}

  using Kind = ClientLimits::Kind;

  // What each client holds (set up by start(), before any connection).
  ClientLimits& limits() { return *limits_; }

  void count_refusal() {
    if (options_.counters) options_.counters->refusals++;
  }

  // The handler's reply; an exception that escapes it is a 500.
  Reply run(Request& request) {
    try {
      return handler_(request);
    } catch (const std::exception& e) {
      count_refusal();
      return error_reply(500, {StatusCode::kInternal, "", "internal error: " + utf8::sanitized(e.what()),
                               "retry; if it persists, see edtd's log"});
    }
  }

  bool stopping() {
    std::lock_guard<std::mutex> lock(mu_);
    return stopping_;
  }

  // Reserves a stream for `client`; run_stream() or give_back_stream_slot()
  // returns it. The refusal when edtd is stopping or a bound is full.
  Status take_stream_slot(const Client& client) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Status{StatusCode::kUnavailable, "", "edtd is stopping", "retry once it has restarted"};
    EDT_RETURN_IF_ERROR(limits_->take(Kind::kStream, client));
    ++stream_slots_;
    return Status::ok();
  }

  void give_back_stream_slot(const Client& client) {
    std::lock_guard<std::mutex> lock(mu_);
    limits_->give_back(Kind::kStream, client);
    --stream_slots_;
    streams_done_.notify_all();
  }

  // Runs `body` on a thread of its own, writing to `fd` (this takes it).
  void run_stream(int fd, const Client& client, std::string head, bool chunked,
                  std::function<void(StreamWriter&)> body);
  // Runs `work` on a thread of its own with the connection `fd` (this
  // takes it, and closes it and gives back `client`'s stream slot after `work`).
  void run_connection(int fd, const Client& client, std::function<void(int fd)> work);

  Status start(const std::string& host, int port);
  void stop();
  int port() const { return port_; }

  const HttpServerOptions& options() const { return options_; }
  net::thread_pool& workers() { return workers_; }

 private:
  class FdWriter;
  void accept();

  HttpServerOptions options_;
  HttpHandler handler_;
  std::mutex mu_;
  std::condition_variable streams_done_;
  std::unique_ptr<ClientLimits> limits_;
  std::set<int> streams_;                        // guarded by mu_: their sockets
  size_t stream_slots_ = 0;                      // guarded by mu_: streams reserved or running
  bool stopping_ = false;                        // guarded by mu_
  int port_ = 0;
  // Declared after what sessions use, so that sessions still queued in it
  // are destroyed first.
  net::io_context ioc_;
  std::optional<tcp::acceptor> acceptor_;
  std::vector<std::thread> io_threads_;
  net::thread_pool workers_;
};

namespace {

// One connection: reads requests, hands each to the worker pool, writes
// the reply, and waits for the next (keep-alive) until the client closes,
// a deadline passes or a reply ends the connection.
class Session : public std::enable_shared_from_this<Session> {
 public:
  // `admitted`: a connection of `address`'s is held for it (ClientLimits).
  Session(tcp::socket socket, HttpServer::Impl& server, std::string address, bool admitted)
      : stream_(std::move(socket)), server_(server), options_(server.options()), address_(address),
        client_{"", std::move(address)}, admitted_(admitted) {}
  ~Session() {
    give_back_large_body();
    give_back_request();
    if (admitted_) server_.limits().give_back(ClientLimits::Kind::kConnection, client_);
  }

  void start() { wait_for_request(); }

  // Answers `reply` and closes: for connections over a bound.
  void refuse(int status, const Status& error) {
    server_.count_refusal();
    give_back_large_body();  // no request of this connection's is read or handled after this
    give_back_request();
    keep_alive_ = false;
    respond(error_reply(status, error));
  }

 private:
  // An idle connection waits up to idle_timeout for a request's first byte.
  void wait_for_request() {
    if (buffer_.size() > 0) return read_header();
    stream_.expires_after(options_.idle_timeout);
    stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
      if (ec) return self->close();
      self->buffer_.commit(n);
      self->read_header();
    });
  }

  void read_header() {
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(options_.max_header_bytes));
    // With a per-request limit, Content-Length is checked against it in
    // on_header (the parser would refuse it while reading the headers).
    parser_->body_limit(options_.body_limit ? std::numeric_limits<uint64_t>::max() : options_.max_body_bytes);
    stream_.expires_after(options_.header_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::operation_aborted ||
        ec == net::error::connection_reset)
      return close();
    if (ec) {
      auto [status, error] = unreadable(ec, parser_->get().target().empty(), options_);
      return refuse(status, error);
    }
    const Message& m = parser_->get();
    if (auto refused = check_header(m, options_)) return refuse(refused->first, refused->second);
    const Request head = head_of(m, address_);
    if (Status refused = charge(head); !refused.is_ok()) return refuse(503, refused);
    if (options_.body_limit) {
      const size_t limit = options_.body_limit(head);
      if (parser_->content_length().value_or(0) > limit) return refuse(413, too_large(limit));
      // A chunked body's length is unknown: it may take all of `limit`.
      if (parser_->content_length().value_or(limit) > options_.max_body_bytes) {
        if (Status refused = server_.limits().take(ClientLimits::Kind::kLargeBody, client_); !refused.is_ok())
          return refuse(503, refused);
        holds_large_body_ = true;
      }
      parser_->body_limit(limit);
    }
    keep_alive_ = m.keep_alive();
    version_ = m.version();
    head_ = m.method() == http::verb::head;
    if (parser_->is_done()) return dispatch();
    auto expect = m.find(http::field::expect);
    if (expect != m.end() && beast::iequals(expect->value(), "100-continue")) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      stream_.expires_after(options_.write_timeout);
      return net::async_write(stream_, net::buffer(kContinue), [self = shared_from_this()](beast::error_code e, size_t) {
        if (e) return self->close();
        self->read_body();
      });
    }
    read_body();
  }

  // Charges the connection to the user whose token the request shows (if
  // another than before), and the request to the connection's client; the
  // refusal when a bound of theirs is full.
  Status charge(const Request& head) {
    if (options_.identify) {
      if (std::optional<std::string> user = options_.identify(head); user && *user != client_.user) {
        const Client to{*user, address_};
        Status refused = server_.limits().move_connection(client_, to);
        client_ = to;  // refused or not: until it is closed, it is theirs
        EDT_RETURN_IF_ERROR(refused);
      }
    }
    EDT_RETURN_IF_ERROR(server_.limits().take(ClientLimits::Kind::kRequest, client_));
    holds_request_ = true;
    return Status::ok();
  }

  void read_body() {
    stream_.expires_after(options_.body_timeout);
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec == http::error::body_limit) return self->refuse(413, unreadable(ec, false, self->options_).second);
      if (ec) return self->close();
      self->dispatch();
    });
  }

  void dispatch() {
    stream_.expires_never();
    auto request = std::make_shared<Request>(to_request(parser_->release(), address_));
    net::post(server_.workers(), [self = shared_from_this(), request]() mutable {
      Reply reply = self->server_.run(*request);
      request.reset();  // the body's memory goes before the large-body slot does
      self->give_back_large_body();
      self->give_back_request();
      net::post(self->stream_.get_executor(),
                [self, reply = std::move(reply)]() mutable { self->respond(std::move(reply)); });
    });
  }

  void respond(Reply reply) {
    if (reply.stream) return start_stream(std::move(reply));
    if (reply.tunnel) return start_tunnel(std::move(reply));
    auto res = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(reply.status), version_);
    res->set(http::field::server, "edtd");
    res->set(http::field::content_type, reply.content_type);
    for (const auto& [name, value] : reply.headers) res->insert(name, value);
    res->keep_alive(keep_alive_);
    res->body() = std::move(reply.body);
    res->prepare_payload();
    if (head_) res->body().clear();
    stream_.expires_after(options_.write_timeout);
    http::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, size_t) {
      if (ec) return self->close();
      if (!res->keep_alive()) return self->linger_close();
      self->wait_for_request();
    });
  }

  void start_stream(Reply reply) {
    if (Status refused = server_.take_stream_slot(client_); !refused.is_ok()) return refuse(503, refused);
    std::string head = "HTTP/1." + std::to_string(version_ % 10) + " " + std::to_string(reply.status) + " " +
                       std::string(http::obsolete_reason(static_cast<http::status>(reply.status))) +
                       "\r\nServer: edtd\r\nContent-Type: " + reply.content_type + "\r\nConnection: close\r\n";
    for (const auto& [name, value] : reply.headers) head += name + ": " + value + "\r\n";  // a download's name
    const bool chunked = version_ >= 11;
    head += chunked ? "Transfer-Encoding: chunked\r\n\r\n" : "\r\n";
    const int fd = hand_off_socket();
    if (fd < 0) return;
    server_.run_stream(fd, client_, std::move(head), chunked && !head_, head_ ? nullptr : std::move(reply.stream));
  }

  // The connection's socket, taken from Beast for a thread of its own (a
  // stream or a tunnel, whose slot is held); -1 after giving the slot back
  // and closing when it cannot be taken.
  int hand_off_socket() {
    stream_.expires_never();
    beast::error_code ec;
    const int fd = stream_.socket().release(ec);
    if (!ec) return fd;
    server_.give_back_stream_slot(client_);
    close();
    return -1;
  }

  // Hands the connection to the reply's tunnel, on a thread of its own.
  void start_tunnel(Reply reply) {
    if (Status refused = server_.take_stream_slot(client_); !refused.is_ok()) return refuse(503, refused);
    std::string early = beast::buffers_to_string(buffer_.data());
    const int fd = hand_off_socket();
    if (fd < 0) return;
    server_.run_connection(fd, client_, [tunnel = std::move(reply.tunnel), early = std::move(early)](int socket) {
      tunnel(socket, early);
    });
  }

  // Ends the connection after the last reply: stops sending, then reads
  // what the client still sends (for a short while) so that closing does
  // not reset the connection before the client has read the reply.
  void linger_close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(std::chrono::seconds(2));
    drain();
  }

  void drain() {
    buffer_.clear();
    stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->close();
      self->drain();
    });
  }

  void close() {
    beast::error_code ec;
    stream_.socket().close(ec);
  }

  beast::tcp_stream stream_;
  HttpServer::Impl& server_;
  const HttpServerOptions& options_;
  std::string address_;
  // Whom the connection is charged to. Changed on the I/O strand only,
  // between requests; read by the worker of the request under way.
  Client client_;
  bool admitted_;
  std::atomic<bool> holds_large_body_{false};
  std::atomic<bool> holds_request_{false};

  void give_back_large_body() {
    if (holds_large_body_.exchange(false)) server_.limits().give_back(ClientLimits::Kind::kLargeBody, client_);
  }
  void give_back_request() {
    if (holds_request_.exchange(false)) server_.limits().give_back(ClientLimits::Kind::kRequest, client_);
  }
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  bool keep_alive_ = true;
  unsigned version_ = 11;
  bool head_ = false;
};

}  // namespace

// A streamed body's writer: chunks on the socket, with the write timeout.
class HttpServer::Impl::FdWriter : public StreamWriter {
 public:
  FdWriter(Impl& server, int fd, bool chunked) : server_(server), fd_(fd), chunked_(chunked) {}

  bool write(std::string_view bytes) override {
    if (bytes.empty()) return open();
    if (!chunked_) return send(bytes);
    char size[24];
    const int n = std::snprintf(size, sizeof(size), "%zx\r\n", bytes.size());
    return send(std::string_view(size, static_cast<size_t>(n))) && send(bytes) && send("\r\n");
  }

  bool open() override {
    if (failed_ || server_.stopping()) return false;
    pollfd p{fd_, POLLRDHUP, 0};
    return ::poll(&p, 1, 0) == 0 || (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) == 0;
  }

  void finish() {
    if (chunked_ && open()) send("0\r\n\r\n");
  }

  bool send(std::string_view bytes) {
    if (failed_ || !send_all(fd_, bytes, server_.options().write_timeout)) failed_ = true;
    return !failed_;
  }

 private:
  Impl& server_;
  int fd_;
  bool chunked_;
  bool failed_ = false;
};

void HttpServer::Impl::run_stream(int fd, const Client& client, std::string head, bool chunked,
                                  std::function<void(StreamWriter&)> body) {
  run_connection(fd, client, [this, head = std::move(head), chunked, body = std::move(body)](int socket) {
    FdWriter writer(*this, socket, chunked);
    if (writer.send(head) && body) body(writer);
    writer.finish();
  });
}

void HttpServer::Impl::run_connection(int fd, const Client& client, std::function<void(int fd)> work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    streams_.insert(fd);
  }
  std::thread([this, fd, client, work = std::move(work)] {
    try {
      work(fd);
    } catch (const std::exception& e) {
      log::warn("a streamed reply failed: {}", e.what());
    }
    {
      // Out of the set before the number can be reused by another socket.
      std::lock_guard<std::mutex> lock(mu_);
      streams_.erase(fd);
    }
    ::shutdown(fd, SHUT_WR);
    ::close(fd);
    give_back_stream_slot(client);
  }).detach();
}

void HttpServer::Impl::accept() {
  acceptor_->async_accept(net::make_strand(ioc_), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted) return;
    if (ec) {
      // Out of descriptors, most likely: try again shortly, not in a loop.
      log::warn("edtd's API could not accept a connection: {}", ec.message());
      auto timer = std::make_shared<net::steady_timer>(ioc_, std::chrono::milliseconds(100));
      return timer->async_wait([this, timer](beast::error_code) { accept(); });
    }
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    const std::string address = socket.remote_endpoint(ignored).address().to_string();
    Status refused = limits_->take(Kind::kConnection, Client{"", address});
    auto session = std::make_shared<Session>(std::move(socket), *this, address, refused.is_ok());
    if (!refused.is_ok()) {
      session->refuse(503, refused);
    } else {
      session->start();
    }
    accept();
  });
}

Status HttpServer::Impl::start(const std::string& host, int port) {
  // Half the descriptors edtd may open, at most, go to connections.
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY)
    options_.max_connections = std::min<size_t>(options_.max_connections, files.rlim_cur / 2);
  limits_ = std::make_unique<ClientLimits>(options_);
  beast::error_code ec;
  const auto address = net::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec) return invalid_argument("cannot listen on '" + host + "': not an IP address");
  acceptor_.emplace(ioc_);
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  acceptor_->open(endpoint.protocol(), ec);
  if (!ec) acceptor_->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_->bind(endpoint, ec);
  if (!ec) acceptor_->listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    return unavailable("cannot listen on " + host + ":" + std::to_string(port) + " (" + ec.message() +
                       "); is another edtd running there?");
  port_ = acceptor_->local_endpoint().port();
  accept();
  for (size_t i = 0; i < options_.io_threads; ++i) io_threads_.emplace_back([this] { ioc_.run(); });
  return Status::ok();
}

void HttpServer::Impl::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  // Streams start on the I/O threads: once those are joined, none starts.
  ioc_.stop();
  for (auto& thread : io_threads_) thread.join();
  std::unique_lock<std::mutex> lock(mu_);
  for (int fd : streams_) ::shutdown(fd, SHUT_RDWR);
  streams_done_.wait(lock, [this] { return stream_slots_ == 0; });
  lock.unlock();
  workers_.join();
}

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler))) {}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::start(const std::string& host, int port) { return impl_->start(host, port); }

void HttpServer::stop() { impl_->stop(); }

int HttpServer::port() const { return impl_->port(); }

}  // namespace edt::control

// HttpServer: HTTP/1.1 for edtd's API and console (Boost.Beast on Asio).
//
// No client can hold what another needs:
//   - connections are read and written asynchronously by a few I/O threads,
//     so a slow or idle client costs a socket and a buffer, never a thread;
//   - each phase has a deadline, past which the connection is closed: a
//     request's first byte within `idle_timeout` (of the connection or of
//     the previous reply), all its headers within `header_timeout` of that
//     byte, its body within `body_timeout`, and a reply must be taken by
//     the client within `write_timeout`;
//   - connections, streams, requests being handled and large bodies are
//     bounded per client (ClientLimits below) and in all: a client is the
//     user whose valid token the connection's latest request showed
//     (`identify`), or, until one did, the client's address, whose bounds
//     are small. So one user never takes what another needs (their bounds
//     are their own), users behind one address (a NAT, loopback) do not
//     share bounds, and clients without a token share only their address's
//     small allowance. The bounds in all (connections: also half of
//     RLIMIT_NOFILE) are several users' worth. One over a bound is answered
//     503 naming the bound and what to do, and closed;
//   - handlers run on a pool of `workers` threads; a streamed reply (a
//     job's log followed) runs on a thread of its own, so streams never
//     take a handler's thread;
//   - a body over max_body_bytes (a route's larger `body_limit`) is a large
//     body, bounded at once as above, so the memory they take stays bounded;
//   - responses go out with TCP_NODELAY, so keep-alive needs no delayed ACK.
//
// Before a handler runs, a request is checked: a request line over
// max_uri_bytes (414), a header line over max_header_line_bytes or all
// headers over max_header_bytes (431), an unknown method or unreadable
// request (400), a POST/PATCH/PUT without Content-Length or chunked (411),
// a body over max_body_bytes, or over what `body_limit` allows that request
// (413, before it is read). Each refusal is the
// API's error body (http.h) and counts in `counters->refusals`.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "control/api/http.h"
#include "control/model/error.h"
#include "edt/status.h"

namespace edt::control {

struct RequestCounters;

struct HttpServerOptions {
  size_t max_uri_bytes = 8192;
  size_t max_header_line_bytes = 8192;
  size_t max_header_bytes = 65536;
  size_t max_body_bytes = 1 << 20;
  std::chrono::milliseconds idle_timeout{30000};
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds body_timeout{30000};
  std::chrono::milliseconds write_timeout{30000};
  // Bounds in all, per user (a valid token shown) and per address (no
  // valid token shown yet on the connection); docs/security.md's table.
  size_t max_connections = 1000;  // and at most half of RLIMIT_NOFILE
  size_t max_connections_per_user = 64;
  size_t max_connections_per_address = 32;
  size_t max_streams = 256;  // streamed replies and tunnels, each a thread
  size_t max_streams_per_user = 32;
  size_t max_streams_per_address = 8;
  size_t max_requests_per_user = 8;  // being read or handled at once
  size_t max_requests_per_address = 16;
  size_t workers = 16;
  size_t io_threads = 2;
  RequestCounters* counters = nullptr;  // refusals are counted here (optional)
  // The body limit of one request, from its head (method, target, headers;
  // no body yet), for routes that take more than max_body_bytes; unset:
  // max_body_bytes for all. Runs on an I/O thread: it must be quick.
  std::function<size_t(const Request& head)> body_limit;
  // Requests with a body over max_body_bytes read or handled at once; more
  // are answered 503, so large bodies held in memory stay bounded.
  size_t max_large_bodies = 4;
  size_t max_large_bodies_per_user = 2;  // and per address
  // The user a request's head (no body yet) shows a valid token of, or
  // nullopt; unset: no one (every connection is its address's). Only for
  // the bounds above: the handler authenticates for itself. Runs on an I/O
  // thread: it must be quick.
  std::function<std::optional<std::string>(const Request& head)> identify;
};

// Who a connection, and what it asks for, is charged to: the user whose
// valid token its latest request showed, else ("" user) its address.
struct Client {
  std::string user;
  std::string address;
  bool operator==(const Client&) const = default;
};

// HttpServer's bounds per client and in all (HttpServerOptions'
// max_*): what each client holds, taken and given back. Thread-safe.
class ClientLimits {
 public:
  enum class Kind { kConnection, kStream, kRequest, kLargeBody };

  explicit ClientLimits(const HttpServerOptions& options);

  // Takes one `kind` for `client`; OK, or (nothing taken) the refusal
  // that names the bound that is full and what to do.
  Status take(Kind kind, const Client& client);
  void give_back(Kind kind, const Client& client);
  // Charges one connection of `from` to `to` instead (its request showed
  // `to`'s token), even past `to`'s bound: the connection is theirs until
  // it is closed, and must not stay on its address's small allowance.
  // OK, or the refusal when `to` already held all it may (the caller
  // then refuses the request and closes the connection).
  Status move_connection(const Client& from, const Client& to);

  size_t held(Kind kind, const Client& client) const;
  size_t held(Kind kind) const;  // by all clients

 private:
  struct Bound {
    size_t in_all, per_user, per_address;
    // What one client may hold: its user's bound, or its address's before a token.
    size_t of(const Client& client) const { return client.user.empty() ? per_address : per_user; }
  };
  Bound bound(Kind kind) const;
  Status refusal(Kind kind, const Client& client, bool in_all) const;
  static std::string key(const Client& client);

  HttpServerOptions options_;
  mutable std::mutex mu_;
  std::map<std::pair<Kind, std::string>, size_t> held_;  // guarded by mu_; none held: erased
  std::map<Kind, size_t> total_;                        // guarded by mu_
};

// Answers a checked request; runs on a worker thread; may throw (500).
using HttpHandler = std::function<Reply(Request&)>;

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHandler handler);
  ~HttpServer();

  // Binds host:port (0: a free port) and serves on threads of its own.
  Status start(const std::string& host, int port);
  // Stops accepting, closes every connection and stream, joins the threads.
  void stop();
  int port() const;

  class Impl;  // http_server.cc's

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace edt::control

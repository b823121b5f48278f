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
//   - connections are bounded in total (and to half of RLIMIT_NOFILE) and
//     per client address; one over either bound is answered 503 (saying
//     which) and closed;
//   - handlers run on a pool of `workers` threads; a streamed reply (a
//     job's log followed) runs on a thread of its own, at most `max_streams`
//     at once (503 beyond), so streams never take a handler's thread;
//   - a body over max_body_bytes (a route's larger `body_limit`) is read
//     for at most `max_large_bodies` requests at once (503 beyond), so the
//     memory large bodies take stays bounded;
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
#include <memory>
#include <string>

#include "control/api/http.h"
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
  size_t max_connections = 1000;
  size_t max_connections_per_address = 100;
  size_t max_streams = 64;
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

// A small HTTP(S) client over libcurl, for the registry puller (registry.h).
//
// One GET at a time per HttpClient (a curl handle, reused so that its
// connection and TLS session are too). TLS is verified always: against the
// system's CAs, or a CA file (HttpOptions::ca_file). Redirects are followed
// (a registry sends blobs to a CDN), over http and https only, and a header
// the caller set (Authorization) is not sent on to another host: curl's own
// rule. A successful answer's body streams to the request's sink, which may
// stop it by returning an error (a blob longer than promised); any other
// answer's body is kept, up to 64 KiB, for the error message. Used by one
// thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "edt/status.h"

namespace edt::image {

struct HttpOptions {
  std::string ca_file;            // empty: the system's CAs
  long connect_timeout_s = 30;
  long stall_timeout_s = 60;      // an answer that sends nothing for this long fails
};

struct HttpRequest {
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  // Takes a 2xx answer's body as it streams; empty: the body is kept in
  // HttpResponse::body, up to max_kept bytes (more is an error).
  std::function<Status(const char* data, size_t size)> sink;
  uint64_t max_kept = 4 << 20;
};

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // of the last answer, names lowercase
  std::string body;                            // see HttpRequest::sink
  std::string header(const std::string& lower_name) const;
};

class HttpClient {
 public:
  explicit HttpClient(HttpOptions options);
  ~HttpClient();
  HttpClient(HttpClient&&) noexcept;
  HttpClient& operator=(HttpClient&&) noexcept;

  // kUnavailable when the server cannot be reached or the transfer breaks
  // (TLS refusals included); the sink's own error when it stopped the body.
  Result<HttpResponse> get(const HttpRequest& request);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Base64 (RFC 4648, with padding), for Basic credentials.
std::string base64(const std::string& bytes);
// "%XX" for each byte but unreserved ones, for a query's values.
std::string url_escape(const std::string& text);

}  // namespace edt::image

// The HTTP edge's vocabulary: what a handler answers (a Reply, or a
// refusal, a Status the edge maps to a status code), the route table's
// entries, and the middleware every route is served through (middleware.h).
//
// Status codes map to HTTP statuses in one place, http_status():
// kMalformed 400, kUnauthenticated 401, kPermissionDenied 403, kNotFound
// 404, kAlreadyExists and kFailedPrecondition (conflict) 409,
// kResourceExhausted (too large) 413, kInvalidArgument 422, any other 500.
// Error bodies are {"error": {"status", "field", "message", "fix"}}.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "control/api/request.h"
#include "control/model/catalog.h"
#include "control/model/error.h"

namespace edt::control {

// Where a streamed body goes, chunk by chunk, on a thread of its own.
class StreamWriter {
 public:
  virtual ~StreamWriter() = default;
  // Sends `bytes` as one chunk; false once the client is gone, stopped
  // reading for the server's write timeout, or edtd is stopping.
  virtual bool write(std::string_view bytes) = 0;
  // Whether the client is still there (has not closed its end).
  virtual bool open() = 0;
};

struct Reply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  // Set for a streamed body: called instead of sending `body`; the body ends
  // when it returns. A streamed reply ends its connection.
  std::function<void(StreamWriter&)> stream;
  // Header lines sent besides Content-Type (Set-Cookie, Location...).
  std::vector<std::pair<std::string, std::string>> headers;
  // Set for a reply that takes the connection (a reverse proxy): called on
  // a thread of its own with the client's socket, once the request has been
  // read, and `early`, the bytes the client sent after it; it writes the
  // whole response itself and owns neither the socket nor its closing. The
  // connection ends when it returns. It counts as a stream (max_streams).
  std::function<void(int fd, std::string_view early)> tunnel;
};

// What a handler answers.
using Answer = Result<Reply>;

// JSON text of `body`, for a response: a string that is not UTF-8 (input
// is checked, so none should get here) becomes U+FFFD, never an exception.
std::string json_text(const nlohmann::json& body);
Reply json_reply(int status, const nlohmann::json& body);
Reply text_reply(std::string body, std::string content_type);

int http_status(StatusCode code);
nlohmann::json error_json(int status, const Status& error);

// The request's body as a JSON object, or a malformed-request refusal: not
// JSON, nested deeper or with a key twice (request_json.h), or not an object.
Result<nlohmann::json> json_body(const Request& request);
// The same, with an empty body read as {} (for operations whose body is optional).
Result<nlohmann::json> optional_json_body(const Request& request);

// The request's body read into a T by `parse` (one of model/'s parse_*),
// or the refusal that stopped it.
template <typename T>
Result<T> read_body(const Request& request, Status (*parse)(const nlohmann::json&, T*)) {
  auto body = json_body(request);
  if (!body.is_ok()) return body.status();
  T value{};
  EDT_RETURN_IF_ERROR(parse(*body, &value));
  return value;
}

// `status` with the JSON `to_json` makes of the result's value, or its refusal.
template <typename T, typename ToJson>
Answer json_answer(int status, Result<T> outcome, ToJson to_json) {
  if (!outcome.is_ok()) return outcome.status();
  return json_reply(status, to_json(*outcome));
}

// 200 with {key: the JSON `to_json` makes of each item `filter` matches}.
template <typename Items, typename Filter, typename ToJson>
Reply filtered_list(const std::string& key, const Items& items, const Filter& filter, ToJson to_json) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& item : items)
    if (filter.matches(item)) out.push_back(to_json(item));
  return json_reply(200, {{key, out}});
}

// Who may call a route: anyone (no token), any user, or the admin only.
enum class Access { kPublic, kUser, kAdmin };

// A handler sees the request and the user its token names (an empty User
// on public routes); it never writes the response itself.
using Handler = std::function<Answer(const Request&, const User&)>;

struct Route {
  std::string method;   // GET, POST, PATCH, DELETE
  // The OpenAPI path, "/api/v1/clusters/{name}/events"; each {parameter}
  // matches one path segment, req.matches[1...] in order.
  std::string pattern;
  Access access = Access::kUser;
  std::string admin_action;  // kAdmin: "register images" -> "only the admin may register images"
  Handler handler;
};

}  // namespace edt::control

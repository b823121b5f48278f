// Middleware: what every API route is served through, so no handler
// repeats it:
//   input     path and query parameters must be UTF-8 (else 400 naming the
//             parameter);
//   auth      the bearer token names a user, or 401 (the scheme in any
//             case); kAdmin routes refuse other users with 403 before the
//             handler runs;
//   metrics   requests and refusals (4xx, 5xx) are counted for
//             /api/v1/metrics (public routes are not counted);
//   errors    a refusal a handler answers becomes its status and JSON body;
//             what the server refuses before routing (http_server.h) has
//             the same body; a path no route matches is 404. No body holds
//             bytes that are not UTF-8.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "control/api/http.h"
#include "control/service/service.h"

namespace edt::control {

struct RequestCounters {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> refusals{0};
};

// `pattern` ("/api/v1/clusters/{name}") as a regex, one group a
// parameter; their names are appended to `names`.
std::string route_regex(const std::string& pattern, std::vector<std::string>* names);

// The user behind the request's "Authorization: Bearer <token>", or the
// 401 refusal saying why there is none.
Result<User> authenticate(const Request& req, Service* service);

// The token of an "Authorization: Bearer <token>" header: the scheme in any
// case (RFC 7235), one or more spaces; nullopt when it is not one.
std::optional<std::string> bearer_token(const std::string& header);

// The routes, each wrapped as above, matched by method and path in order.
class Router {
 public:
  Router(const std::vector<Route>& routes, Service* service, RequestCounters* counters);

  // The answer of the first route whose method and pattern match (a HEAD
  // is a GET; request.matches is set), or nullopt when none does.
  std::optional<Reply> dispatch(Request& request) const;

 private:
  struct Entry {
    Route route;
    std::regex regex;
    std::vector<std::string> parameters;
  };
  std::vector<Entry> entries_;
  Service* service_;
  RequestCounters* counters_;
};

}  // namespace edt::control

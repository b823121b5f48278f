// Middleware: what every API route is served through, so no handler
// repeats it:
//   input     path and query parameters must be UTF-8 (else 400 naming the
//             parameter); a POST, PATCH or PUT must have a Content-Length (411);
//   auth      the bearer token names a user, or 401 (the scheme in any
//             case); kAdmin routes refuse other users with 403 before the
//             handler runs;
//   metrics   requests and refusals (4xx, 5xx) are counted for
//             /api/v1/metrics (public routes are not counted);
//   errors    an Error a handler answers becomes its status and JSON body;
//             so do httplib's own refusals (400 unreadable request line,
//             headers or body, 404 route, 413 body, 414 request line), each
//             saying what was wrong and what to send, and any exception that
//             escapes (500). No body holds bytes that are not UTF-8.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "control/api/http.h"
#include "control/service/service.h"

namespace httplib {
class Server;
}

namespace edt::control {

struct RequestCounters {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> refusals{0};
};

// `pattern` ("/api/v1/clusters/{name}") as httplib's regex, one group a
// parameter; their names are appended to `names`.
std::string route_regex(const std::string& pattern, std::vector<std::string>* names);

// Registers `routes` on `server`, in order, each wrapped as above.
void install_routes(httplib::Server& server, const std::vector<Route>& routes, Service* service,
                    RequestCounters* counters);

// httplib's error and exception handlers, answering with error bodies.
void install_error_handlers(httplib::Server& server, size_t max_body_bytes, RequestCounters* counters);

}  // namespace edt::control

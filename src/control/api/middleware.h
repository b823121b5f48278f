// Middleware: what every API route is served through, so no handler
// repeats it:
//   auth      the bearer token names a user, or 401; kAdmin routes refuse
//             other users with 403 before the handler runs;
//   metrics   requests and refusals (4xx, 5xx) are counted for
//             /api/v1/metrics (public routes are not counted);
//   errors    an Error a handler answers becomes its status and JSON body;
//             so do httplib's own refusals (404 route, 413 body) and any
//             exception that escapes (500).
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

// Registers `routes` on `server`, in order, each wrapped as above.
void install_routes(httplib::Server& server, const std::vector<Route>& routes, Service* service,
                    RequestCounters* counters);

// httplib's error and exception handlers, answering with error bodies.
void install_error_handlers(httplib::Server& server, size_t max_body_bytes, RequestCounters* counters);

}  // namespace edt::control

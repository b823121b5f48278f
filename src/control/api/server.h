// ApiServer: edtd's REST API, /api/v1, JSON in and out.
//
// Every route but /healthz and /api/v1/openapi.json needs
// "Authorization: Bearer <token>". A user sees and changes only their own
// clusters, volumes and jobs; the admin sees all and makes users. Refusals
// are {"error": {...}} bodies with the status their code maps to (http.h);
// a refused request changes nothing. The routes are one table (server.cc)
// of handlers (handlers.h) served through one middleware (middleware.h).
// Requests are served by HttpServer (http_server.h: its bounds, timeouts
// and refusals) on a pool of threads; what they call is thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "control/api/handlers.h"
#include "control/api/http.h"
#include "control/api/http_server.h"
#include "control/api/middleware.h"
#include "control/model/cluster.h"
#include "edt_api/contract.h"

namespace edt::control {

struct ApiServerOptions : ControlPlane {
  size_t max_body_bytes = api::limits::RequestLimits::maximum_bytes;  // api/openapi.json's
  // A file uploaded into a volume may be this large; only for a request whose
  // token is valid (checked before the body is read), else max_body_bytes.
  size_t max_upload_bytes = api::limits::VolumeFileUpload::maximum_bytes;
  std::string web_dir;  // the console's static files, served at / (none if empty)
  HttpServerOptions http;  // bounds and timeouts; the body limit is max_body_bytes
  // Routes of other parts of edtd (the web console's), served after the
  // API's through the same middleware.
  std::vector<Route> extra_routes;
  // Handlers of the paths under a prefix outside /api/ ("/c/": the Jupyter
  // proxy), asked before the console's files are. Each authenticates the
  // caller itself.
  std::vector<std::pair<std::string, HttpHandler>> prefix_handlers;
  // The edt token a request carries other than as a bearer token (the
  // Jupyter proxy's session cookie), or nullopt; only so that such requests
  // count against their user's bounds, not their address's (identify).
  std::function<std::optional<std::string>(const Request& head)> session_token;
};

class ApiServer {
 public:
  explicit ApiServer(ApiServerOptions options);
  ~ApiServer();

  // Binds host:port (0: a free port); returns once bound (or failed).
  Status start(const std::string& host, int port);
  void stop();
  int port() const { return server_->port(); }

 private:
  std::vector<Route> routes();
  Reply answer(Request& request);
  // The body limit of a request (HttpServerOptions::body_limit).
  size_t body_limit(const Request& head) const;
  // The user a request's bearer token (or session_token) names
  // (HttpServerOptions::identify),
  // remembered for kIdentityTtl so that the I/O threads seldom wait on the
  // store: the connection bounds may count a revoked token's connection
  // against its user that long; what it may do is decided by the middleware.
  std::optional<std::string> identify(const Request& head);
  static constexpr std::chrono::seconds kIdentityTtl{2};
  static constexpr size_t kIdentitiesKept = 4096;

  ApiServerOptions options_;
  RequestCounters counters_;
  ClusterListCache list_cache_;
  ApiContext context_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<HttpServer> server_;
  struct Identity {
    std::optional<std::string> user;
    std::chrono::steady_clock::time_point until;
  };
  std::mutex identities_mu_;
  std::unordered_map<std::string, Identity> identities_;  // by token; guarded by identities_mu_
};

// The OpenAPI 3 document of /api/v1.
const std::string& openapi_document();

}  // namespace edt::control

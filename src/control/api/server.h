// ApiServer: edtd's REST API, /api/v1, JSON in and out.
//
// Every route but /healthz and /api/v1/openapi.json needs
// "Authorization: Bearer <token>". A user sees and changes only their own
// clusters, volumes and jobs; the admin sees all and makes users. Refusals
// are ApiError bodies with the HTTP status they name (see model/api_error.h);
// a refused request changes nothing. Requests are served on a pool of
// threads; the store and the reconciler are thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "control/backends/backend.h"
#include "control/jobs/job_runner.h"
#include "control/reconcile/reconciler.h"
#include "control/store/store.h"

namespace httplib {
class Server;
}

namespace edt::control {

struct ApiServerOptions {
  ControlStore* store = nullptr;
  Backend* backend = nullptr;
  Reconciler* reconciler = nullptr;
  JobRunner* jobs = nullptr;
  AddressRange addresses;
  std::string data_dir;
  size_t max_body_bytes = 1 << 20;
  std::string web_dir;  // the console's static files, served at / (none if empty)
  // Adds routes of other parts of edtd (the web console's terminals) after the API's.
  std::function<void(httplib::Server&)> extend_routes;
};

class ApiServer {
 public:
  explicit ApiServer(ApiServerOptions options);
  ~ApiServer();

  // Binds host:port; returns once bound (or failed). Serves on a thread.
  Status start(const std::string& host, int port);
  void stop();

 private:
  void install_routes();

  ApiServerOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> refusals_{0};
  // GET /clusters bodies by user, with the store version they were built at.
  std::mutex list_mu_;
  std::map<std::string, std::pair<int64_t, std::string>> list_cache_;  // guarded by list_mu_
};

// SHA-256 of a token, in hex: what the store keeps.
std::string hash_token(const std::string& token);
// A fresh random token (32 bytes, hex).
std::string new_token();

// The OpenAPI 3 document of /api/v1.
const std::string& openapi_document();

}  // namespace edt::control

#include "control/api/server.h"

#include <httplib.h>

namespace edt::control {

ApiServer::ApiServer(ApiServerOptions options)
    : options_(std::move(options)),
      context_{options_.service, options_.backend, options_.reconciler, options_.jobs, &counters_, &list_cache_},
      server_(new httplib::Server) {
  httplib::Server& s = *server_;
  s.set_payload_max_length(options_.max_body_bytes);
  // Log streams hold a thread each while their job runs.
  s.new_task_queue = [] { return new httplib::ThreadPool(32); };
  install_error_handlers(s, options_.max_body_bytes, &counters_);
  // The web console's static files, at /.
  if (!options_.web_dir.empty()) s.set_mount_point("/", options_.web_dir);
  std::vector<Route> all = routes();
  all.insert(all.end(), options_.extra_routes.begin(), options_.extra_routes.end());
  install_routes(s, all, options_.service, &counters_);
}

ApiServer::~ApiServer() { stop(); }

std::vector<Route> ApiServer::routes() {
  using Fn = Answer (*)(ApiContext&, const Request&, const User&);
  auto bind = [this](Fn fn) -> Handler {
    return [this, fn](const Request& req, const User& user) { return fn(context_, req, user); };
  };
  const std::string cluster = "/api/v1/clusters/{name}";
  using A = Access;
  namespace h = handlers;
  return {
      {"GET", "/healthz", A::kPublic, "", bind(h::healthz)},
      {"GET", "/api/v1/openapi.json", A::kPublic, "", bind(h::openapi)},
      {"GET", "/api/v1/whoami", A::kUser, "", bind(h::whoami)},
      {"GET", "/api/v1/clusters", A::kUser, "", bind(h::list_clusters)},
      {"POST", "/api/v1/clusters", A::kUser, "", bind(h::create_cluster)},
      {"GET", cluster, A::kUser, "", bind(h::get_cluster)},
      {"PATCH", cluster, A::kUser, "", bind(h::scale_cluster)},
      {"DELETE", cluster, A::kUser, "", bind(h::delete_cluster)},
      {"GET", cluster + "/hostfile", A::kUser, "", bind(h::cluster_hostfile)},
      {"GET", cluster + "/events", A::kUser, "", bind(h::cluster_events)},
      {"GET", cluster + "/ssh", A::kUser, "", bind(h::cluster_ssh)},
      {"POST", cluster + "/jobs", A::kUser, "", bind(h::start_job)},
      {"GET", "/api/v1/jobs/{id}", A::kUser, "", bind(h::get_job)},
      {"GET", "/api/v1/jobs/{id}/log", A::kUser, "", bind(h::job_log)},
      {"GET", "/api/v1/volumes", A::kUser, "", bind(h::list_volumes)},
      {"POST", "/api/v1/volumes", A::kUser, "", bind(h::create_volume)},
      {"DELETE", "/api/v1/volumes/{name}", A::kUser, "", bind(h::delete_volume)},
      {"GET", "/api/v1/images", A::kUser, "", bind(h::list_images)},
      {"POST", "/api/v1/images", A::kAdmin, "register images", bind(h::register_image)},
      {"GET", "/api/v1/gpus", A::kUser, "", bind(h::list_gpus)},
      {"GET", "/api/v1/users", A::kAdmin, "list users", bind(h::list_users)},
      {"POST", "/api/v1/users", A::kAdmin, "create users", bind(h::create_user)},
      {"DELETE", "/api/v1/users/{name}", A::kAdmin, "delete users", bind(h::delete_user)},
      {"GET", "/api/v1/users/{name}/tokens", A::kUser, "", bind(h::list_tokens)},
      {"POST", "/api/v1/users/{name}/tokens", A::kUser, "", bind(h::create_token)},
      {"DELETE", "/api/v1/users/{name}/tokens/{id}", A::kUser, "", bind(h::revoke_token)},
      {"GET", "/api/v1/metrics", A::kUser, "", bind(h::metrics)},
  };
}

Status ApiServer::start(const std::string& host, int port) {
  if (!server_->bind_to_port(host.c_str(), port))
    return unavailable("cannot listen on " + host + ":" + std::to_string(port) + "; is another edtd running there?");
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return Status::ok();
}

void ApiServer::stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace edt::control

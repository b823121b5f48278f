#include "control/api/server.h"

#include <algorithm>
#include <regex>

#include "control/api/static_files.h"
#include "edt_api/contract.h"

namespace edt::control {

namespace {

const std::string kVolumeFiles = "/api/v1/volumes/{name}/files";

}  // namespace

ApiServer::ApiServer(ApiServerOptions options)
    : options_(std::move(options)),
      context_{{options_.service, options_.reconciler}, &counters_, &list_cache_} {
  std::vector<Route> all = routes();
  all.insert(all.end(), options_.extra_routes.begin(), options_.extra_routes.end());
  router_ = std::make_unique<Router>(all, options_.service, &counters_);
  HttpServerOptions http = options_.http;
  http.max_body_bytes = options_.max_body_bytes;
  http.max_uri_bytes = api::limits::RequestLimits::max_uri_bytes;
  http.max_header_line_bytes = api::limits::RequestLimits::max_header_bytes;
  http.max_header_bytes = api::limits::RequestLimits::max_headers_bytes;
  http.counters = &counters_;
  http.body_limit = [this](const Request& head) { return body_limit(head); };
  http.identify = [this](const Request& head) { return identify(head); };
  server_ = std::make_unique<HttpServer>(http, [this](Request& request) { return answer(request); });
}

// The route's answer; else a prefix handler's; else the console's file; else 404.
Reply ApiServer::answer(Request& request) {
  if (auto reply = router_->dispatch(request)) return std::move(*reply);
  for (const auto& [prefix, handler] : options_.prefix_handlers)
    if (request.path.starts_with(prefix)) return handler(request);
  if (request.method == "GET" && !request.path.starts_with("/api/"))
    if (auto file = static_file(options_.web_dir, request.path)) return std::move(*file);
  counters_.refusals++;
  return json_reply(404, error_json(404, missing("", "no such API route", "see GET /api/v1/openapi.json")));
}

// Uploads may be large, for a caller with a valid token only: no one else
// makes edtd hold more than max_body_bytes of a request.
size_t ApiServer::body_limit(const Request& head) const {
  static const std::regex kUpload = [] {
    std::vector<std::string> names;
    return std::regex(route_regex(kVolumeFiles, &names));
  }();
  if (head.method != "PUT" || !std::regex_match(head.path, kUpload)) return options_.max_body_bytes;
  if (!authenticate(head, options_.service).is_ok()) return options_.max_body_bytes;
  return std::max(options_.max_upload_bytes, options_.max_body_bytes);
}

std::optional<std::string> ApiServer::identify(const Request& head) {
  std::optional<std::string> token = bearer_token(head.get_header_value("Authorization"));
  if (!token && options_.session_token) token = options_.session_token(head);
  if (!token) return std::nullopt;
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(identities_mu_);
    if (auto it = identities_.find(*token); it != identities_.end() && it->second.until > now) return it->second.user;
  }
  std::optional<std::string> user;
  if (std::optional<User> found = options_.service->authenticate(*token)) user = found->name;
  std::lock_guard<std::mutex> lock(identities_mu_);
  if (identities_.size() >= kIdentitiesKept) identities_.clear();  // many tokens, most of them wrong: start over
  identities_[*token] = Identity{user, now + kIdentityTtl};
  return user;
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
      {"GET", cluster + "/jobs", A::kUser, "", bind(h::list_jobs)},
      {"POST", cluster + "/jobs", A::kUser, "", bind(h::start_job)},
      {"GET", "/api/v1/jobs/{id}", A::kUser, "", bind(h::get_job)},
      {"DELETE", "/api/v1/jobs/{id}", A::kUser, "", bind(h::delete_job)},
      {"GET", "/api/v1/jobs/{id}/log", A::kUser, "", bind(h::job_log)},
      {"GET", "/api/v1/volumes", A::kUser, "", bind(h::list_volumes)},
      {"POST", "/api/v1/volumes", A::kUser, "", bind(h::create_volume)},
      {"DELETE", "/api/v1/volumes/{name}", A::kUser, "", bind(h::delete_volume)},
      {"PUT", kVolumeFiles, A::kUser, "", bind(h::upload_volume_file)},
      {"GET", kVolumeFiles, A::kUser, "", bind(h::list_volume_files)},
      {"DELETE", kVolumeFiles, A::kUser, "", bind(h::delete_volume_file)},
      {"GET", kVolumeFiles + "/content", A::kUser, "", bind(h::download_volume_file)},
      {"GET", "/api/v1/images", A::kUser, "", bind(h::list_images)},
      {"POST", "/api/v1/images", A::kAdmin, "register images", bind(h::register_image)},
      {"POST", "/api/v1/images/import", A::kAdmin, "import images", bind(h::import_image)},
      {"POST", "/api/v1/images/pull", A::kAdmin, "pull images", bind(h::pull_image)},
      {"GET", "/api/v1/images/pulls", A::kUser, "", bind(h::list_image_pulls)},
      {"DELETE", "/api/v1/images/{name}", A::kAdmin, "delete images", bind(h::delete_image)},
      {"GET", "/api/v1/gpus", A::kUser, "", bind(h::list_gpus)},
      {"GET", "/api/v1/users", A::kAdmin, "list users", bind(h::list_users)},
      {"POST", "/api/v1/users", A::kAdmin, "create users", bind(h::create_user)},
      {"DELETE", "/api/v1/users/{name}", A::kAdmin, "delete users", bind(h::delete_user)},
      {"GET", "/api/v1/users/{name}/tokens", A::kUser, "", bind(h::list_tokens)},
      {"POST", "/api/v1/users/{name}/tokens", A::kUser, "", bind(h::create_token)},
      {"DELETE", "/api/v1/users/{name}/tokens/{id}", A::kUser, "", bind(h::revoke_token)},
      {"PUT", "/api/v1/users/{name}/team", A::kAdmin, "assign users to teams", bind(h::set_user_team)},
      {"GET", "/api/v1/teams", A::kUser, "", bind(h::list_teams)},
      {"POST", "/api/v1/teams", A::kAdmin, "create teams", bind(h::create_team)},
      {"GET", "/api/v1/teams/{name}", A::kUser, "", bind(h::get_team)},
      {"DELETE", "/api/v1/teams/{name}", A::kAdmin, "delete teams", bind(h::delete_team)},
      {"PUT", "/api/v1/teams/{name}/quotas/{model}", A::kAdmin, "set quotas", bind(h::set_quota)},
      {"DELETE", "/api/v1/teams/{name}/quotas/{model}", A::kAdmin, "delete quotas", bind(h::delete_quota)},
      {"GET", "/api/v1/metrics", A::kUser, "", bind(h::metrics)},
  };
}

Status ApiServer::start(const std::string& host, int port) { return server_->start(host, port); }

void ApiServer::stop() {
  if (server_) server_->stop();
}

}  // namespace edt::control

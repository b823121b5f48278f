// Handlers: /api/v1/clusters and a cluster's hostfile, events and SSH access.
#include "control/api/handlers.h"
#include "control/model/cluster_json.h"
#include "control/model/container_files.h"
#include "control/model/filters.h"

namespace edt::control::handlers {

using nlohmann::json;

namespace {

std::string name_in_path(const Request& req) { return req.matches[1]; }

// The cluster's JSON, each container at the address users reach it by.
auto shown_json(ApiContext& ctx) {
  return [&ctx](const Cluster& cluster) { return cluster_to_json(ctx.service->shown(cluster)); };
}

}  // namespace

Answer list_clusters(ApiContext& ctx, const Request&, const User& user) {
  const int64_t version = ctx.service->version();
  ClusterListCache& cache = *ctx.list_cache;
  {
    std::lock_guard lock(cache.mu);
    auto it = cache.bodies.find(user.name);
    if (it != cache.bodies.end() && it->second.first == version) return text_reply(it->second.second, "application/json");
  }
  json items = json::array();
  for (const auto& c : ctx.service->clusters(user)) items.push_back(shown_json(ctx)(c));
  std::string body = json_text({{"clusters", items}});
  std::lock_guard lock(cache.mu);
  cache.bodies[user.name] = {version, body};
  return text_reply(std::move(body), "application/json");
}

Answer create_cluster(ApiContext& ctx, const Request& req, const User& user) {
  auto spec = read_body(req, parse_cluster_spec);
  if (!spec.is_ok()) return spec.status();
  return json_answer(201, ctx.service->create_cluster(user, *spec), shown_json(ctx));
}

Answer get_cluster(ApiContext& ctx, const Request& req, const User& user) {
  return json_answer(200, ctx.service->cluster(user, name_in_path(req)), shown_json(ctx));
}

Answer scale_cluster(ApiContext& ctx, const Request& req, const User& user) {
  auto body = json_body(req);
  if (!body.is_ok()) return body.status();
  // Who may scale it is checked before what was asked.
  auto cluster = ctx.service->cluster(user, name_in_path(req));
  if (!cluster.is_ok()) return cluster.status();
  ScaleRequest scale;
  EDT_RETURN_IF_ERROR(parse_scale_request(*body, &scale));
  return json_answer(200, ctx.service->scale_cluster(user, cluster->spec.name, scale.containers, scale.drain_timeout),
                     shown_json(ctx));
}

Answer delete_cluster(ApiContext& ctx, const Request& req, const User& user) {
  return json_answer(202, ctx.service->delete_cluster(user, name_in_path(req)), shown_json(ctx));
}

Answer cluster_hostfile(ApiContext& ctx, const Request& req, const User& user) {
  auto cluster = ctx.service->cluster(user, name_in_path(req));
  if (!cluster.is_ok()) return cluster.status();
  return text_reply(render_hostfile(running_containers(cluster->containers)), "text/plain");
}

Answer cluster_events(ApiContext& ctx, const Request& req, const User& user) {
  auto events = ctx.service->events(user, name_in_path(req));
  if (!events.is_ok()) return events.status();
  EventFilter filter;
  EDT_RETURN_IF_ERROR(parse_event_filter(req.params, &filter));
  return filtered_list("events", *events, filter, event_to_json);
}

Answer cluster_ssh(ApiContext& ctx, const Request& req, const User& user) {
  auto access = ctx.service->ssh_access(user, name_in_path(req));
  if (!access.is_ok()) return access.status();
  json containers = json::array();
  std::string login = "root";
  for (const auto& c : access->cluster.containers) {
    const SshEndpoint& at = access->endpoints.at(c.name);
    containers.push_back({{"name", c.name}, {"address", at.address}, {"port", at.port}});
    login = at.user;
  }
  return json_reply(200, {{"private_key", access->private_key},
                          {"known_hosts", access->known_hosts},
                          {"port", access->port},
                          {"user", login},
                          {"containers", containers}});
}

}  // namespace edt::control::handlers

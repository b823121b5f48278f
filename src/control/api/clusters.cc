// Handlers: /api/v1/clusters and a cluster's hostfile, events and SSH access.
#include "control/api/handlers.h"
#include "control/model/filters.h"

namespace edt::control::handlers {

using nlohmann::json;

namespace {

std::string name_in_path(const Request& req) { return req.matches[1]; }

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
  for (const auto& c : ctx.service->clusters(user)) items.push_back(cluster_to_json(c));
  std::string body = json_text({{"clusters", items}});
  std::lock_guard lock(cache.mu);
  cache.bodies[user.name] = {version, body};
  return text_reply(std::move(body), "application/json");
}

Answer create_cluster(ApiContext& ctx, const Request& req, const User& user) {
  auto spec = read_body(req, parse_cluster_spec);
  if (!spec.ok()) return spec.error();
  return json_answer(201, ctx.service->create_cluster(user, *spec), cluster_to_json);
}

Answer get_cluster(ApiContext& ctx, const Request& req, const User& user) {
  return json_answer(200, ctx.service->cluster(user, name_in_path(req)), cluster_to_json);
}

Answer scale_cluster(ApiContext& ctx, const Request& req, const User& user) {
  auto body = json_body(req);
  if (!body.ok()) return body.error();
  // Who may scale it is checked before what was asked.
  auto cluster = ctx.service->cluster(user, name_in_path(req));
  if (!cluster.ok()) return cluster.error();
  ScaleRequest scale;
  if (auto r = parse_scale_request(*body, &scale)) return *r;
  return json_answer(200, ctx.service->scale_cluster(user, cluster->spec.name, scale.containers, scale.drain_timeout),
                     cluster_to_json);
}

Answer delete_cluster(ApiContext& ctx, const Request& req, const User& user) {
  return json_answer(202, ctx.service->delete_cluster(user, name_in_path(req)), cluster_to_json);
}

Answer cluster_hostfile(ApiContext& ctx, const Request& req, const User& user) {
  auto cluster = ctx.service->cluster(user, name_in_path(req));
  if (!cluster.ok()) return cluster.error();
  return text_reply(render_hostfile(running_containers(cluster->containers)), "text/plain");
}

Answer cluster_events(ApiContext& ctx, const Request& req, const User& user) {
  auto events = ctx.service->events(user, name_in_path(req));
  if (!events.ok()) return events.error();
  EventFilter filter;
  if (auto refused = parse_event_filter(req.params, &filter)) return *refused;
  json items = json::array();
  for (const auto& e : *events)
    if (filter.matches(e)) items.push_back(event_to_json(e));
  return json_reply(200, {{"events", items}});
}

Answer cluster_ssh(ApiContext& ctx, const Request& req, const User& user) {
  auto cluster = ctx.service->cluster(user, name_in_path(req));
  if (!cluster.ok()) return cluster.error();
  auto key = ctx.backend->ssh_private_key(cluster->spec.name);
  if (!key.is_ok()) return conflict("name", key.status().message(), "wait until the cluster is Running");
  auto known_hosts = ctx.backend->ssh_known_hosts(cluster->spec.name);
  if (!known_hosts.is_ok())
    return conflict("name", known_hosts.status().message(), "wait until the cluster is Running");
  json containers = json::array();
  for (const auto& c : cluster->containers) containers.push_back({{"name", c.name}, {"address", c.address}});
  return json_reply(200, {{"private_key", *key},
                          {"known_hosts", *known_hosts},
                          {"port", ctx.backend->ssh_port()},
                          {"user", "root"},
                          {"containers", containers}});
}

}  // namespace edt::control::handlers

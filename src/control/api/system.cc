// Handlers: health, the OpenAPI document, and metrics (Prometheus text).
#include "control/api/handlers.h"
#include "control/api/server.h"

namespace edt::control::handlers {

using nlohmann::json;

Answer healthz(ApiContext&, const Request&, const User&) { return json_reply(200, {{"ok", true}}); }

Answer openapi(ApiContext&, const Request&, const User&) { return text_reply(openapi_document(), "application/json"); }

namespace {

void gauge(std::string& out, const char* name, const char* help, const char* label, const std::map<std::string, int>& values) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n";
  for (const auto& [key, n] : values) out += std::string(name) + "{" + label + "=\"" + key + "\"} " + std::to_string(n) + "\n";
}

void counter(std::string& out, const char* name, const std::string& value) {
  out += std::string("# TYPE ") + name + " counter\n" + name + " " + value + "\n";
}

}  // namespace

// A user's metrics count their own clusters and containers, the admin's all;
// GPUs, the reconciler and the API are counted whole (numbers, no names).
Answer metrics(ApiContext& ctx, const Request&, const User& user) {
  std::map<std::string, int> clusters, containers;
  for (const auto& c : ctx.service->clusters(user)) {
    clusters[to_string(c.phase)]++;
    for (const auto& k : c.containers) containers[to_string(k.phase)]++;
  }
  int gpus_total = 0, gpus_held = 0;
  for (const auto& g : ctx.service->gpus(user)) {
    gpus_total++;
    gpus_held += g.held ? 1 : 0;
  }
  ReconcileStats stats = ctx.reconciler->stats();
  std::string out;
  gauge(out, "edt_clusters", "Clusters by phase.", "phase", clusters);
  gauge(out, "edt_containers", "Containers by phase.", "phase", containers);
  out += "# HELP edt_gpus GPUs in the inventory, and held by containers.\n# TYPE edt_gpus gauge\n";
  out += "edt_gpus{state=\"total\"} " + std::to_string(gpus_total) + "\n";
  out += "edt_gpus{state=\"held\"} " + std::to_string(gpus_held) + "\n";
  counter(out, "edt_reconcile_passes_total", std::to_string(stats.passes));
  counter(out, "edt_reconcile_errors_total", std::to_string(stats.errors));
  counter(out, "edt_reconcile_seconds_total", std::to_string(stats.seconds));
  counter(out, "edt_api_requests_total", std::to_string(ctx.counters->requests.load()));
  counter(out, "edt_api_refusals_total", std::to_string(ctx.counters->refusals.load()));
  return text_reply(std::move(out), "text/plain; version=0.0.4");
}

}  // namespace edt::control::handlers

// The OpenAPI 3 document of /api/v1, served at /api/v1/openapi.json.
#include <nlohmann/json.hpp>

#include "control/api/server.h"

namespace edt::control {
namespace {

using nlohmann::json;

json op(const std::string& summary, const std::string& ok, const std::string& schema = "", bool body = false,
        const std::string& body_schema = "") {
  json responses = {{ok, {{"description", "success"}}},
                    {"401", {{"$ref", "#/components/responses/Error"}}},
                    {"default", {{"$ref", "#/components/responses/Error"}}}};
  if (!schema.empty())
    responses[ok]["content"] = {{"application/json", {{"schema", {{"$ref", "#/components/schemas/" + schema}}}}}};
  json o = {{"summary", summary}, {"responses", responses}};
  if (body)
    o["requestBody"] = {{"required", true},
                        {"content", {{"application/json", {{"schema", {{"$ref", "#/components/schemas/" + body_schema}}}}}}}};
  return o;
}

json build() {
  json name_param = {{"name", "name"}, {"in", "path"}, {"required", true}, {"schema", {{"type", "string"}}}};
  json id_param = {{"name", "id"}, {"in", "path"}, {"required", true}, {"schema", {{"type", "integer"}}}};
  json doc;
  doc["openapi"] = "3.0.3";
  doc["info"] = {{"title", "edtd"}, {"version", "1"},
                 {"description", "Distributed-training clusters of sandboxed containers. Every route but /healthz "
                                 "and this document needs 'Authorization: Bearer <token>'. Errors are "
                                 "{\"error\": {status, field, message, fix}}."}};
  doc["servers"] = {{{"url", "/api/v1"}}};
  doc["security"] = {{{"bearer", json::array()}}};
  auto& p = doc["paths"];
  p["/clusters"]["get"] = op("List the clusters you may see", "200", "ClusterList");
  p["/clusters"]["post"] = op("Create a cluster", "201", "Cluster", true, "ClusterSpec");
  p["/clusters/{name}"]["parameters"] = {name_param};
  p["/clusters/{name}"]["get"] = op("Get a cluster with its containers", "200", "Cluster");
  p["/clusters/{name}"]["patch"] = op("Scale a cluster: {\"containers\": N}", "200", "Cluster", true, "Scale");
  p["/clusters/{name}"]["delete"] = op("Delete a cluster and all it holds", "202", "Cluster");
  p["/clusters/{name}/hostfile"]["parameters"] = {name_param};
  p["/clusters/{name}/hostfile"]["get"] = op("The hostfile: Running containers, launcher first, 'name slots=N'", "200");
  p["/clusters/{name}/events"]["parameters"] = {name_param};
  p["/clusters/{name}/events"]["get"] = op(
      "What happened to the cluster, oldest first: {events: [{time (UTC, ISO 8601), type (Created, Scaling, Running, "
      "Failed, Restarted, Deleting), message}]}",
      "200");
  p["/clusters/{name}/ssh"]["parameters"] = {name_param};
  p["/clusters/{name}/ssh"]["get"] = op("The cluster's SSH key, port and container addresses", "200");
  p["/clusters/{name}/jobs"]["parameters"] = {name_param};
  p["/clusters/{name}/jobs"]["post"] = op("Run a command in the launcher (or 'container')", "201", "Job", true, "JobRequest");
  p["/jobs/{id}"]["parameters"] = {id_param};
  p["/jobs/{id}"]["get"] = op("A job's state and exit code", "200", "Job");
  p["/jobs/{id}/log"]["parameters"] = {id_param};
  p["/jobs/{id}/log"]["get"] = op("A job's output, streamed until it ends (?follow=false: what there is now)", "200");
  p["/volumes"]["get"] = op("List volumes", "200");
  p["/volumes"]["post"] = op("Create a volume: {name, host_path (admin only)}", "201", "Volume", true, "Volume");
  p["/volumes/{name}"]["parameters"] = {name_param};
  p["/volumes/{name}"]["delete"] = op("Delete a volume no cluster mounts", "200");
  p["/images"]["get"] = op("List images and the frameworks they carry", "200");
  p["/images"]["post"] = op("Register an image (admin): {name, root, frameworks}", "201");
  p["/gpus"]["get"] = op("The GPU inventory (simulated or from nvidia-smi) and holders", "200");
  p["/users"]["get"] = op("List users (admin)", "200");
  p["/users"]["post"] = op("Create a user and a first token (admin)", "201");
  p["/users/{name}/tokens"]["parameters"] = {name_param};
  p["/users/{name}/tokens"]["post"] = op("Make a token for a user (admin, or the user)", "201");
  p["/whoami"]["get"] = op("The user of the token", "200");
  p["/metrics"]["get"] = op("Prometheus metrics", "200");
  // Served by the web console's part of edtd (control/console/console_routes.h).
  p["/clusters/{name}/jobs"]["get"] = op("The cluster's jobs, newest first", "200");
  p["/clusters/{name}/containers/{container}/terminal"]["parameters"] = {
      name_param, {{"name", "container"}, {"in", "path"}, {"required", true}, {"schema", {{"type", "string"}}}}};
  p["/clusters/{name}/containers/{container}/terminal"]["post"] =
      op("Open a terminal in a Running container: {port, path} of a one-time WebSocket (ws://HOST:port/path), valid 30 s", "201");

  auto& c = doc["components"];
  c["securitySchemes"]["bearer"] = {{"type", "http"}, {"scheme", "bearer"}};
  c["responses"]["Error"] = {{"description", "a refusal"},
                             {"content", {{"application/json", {{"schema", {{"$ref", "#/components/schemas/Error"}}}}}}}};
  auto& s = c["schemas"];
  s["Error"] = {{"type", "object"},
                {"properties", {{"error", {{"type", "object"},
                                           {"properties", {{"status", {{"type", "integer"}}},
                                                           {"field", {{"type", "string"}}},
                                                           {"message", {{"type", "string"}}},
                                                           {"fix", {{"type", "string"}}}}}}}}}};
  s["ClusterSpec"] = {
      {"type", "object"},
      {"required", {"name", "framework", "containers"}},
      {"properties",
       {{"name", {{"type", "string"}, {"pattern", "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}, {"maxLength", 40}}},
        {"framework", {{"type", "string"}, {"enum", known_frameworks()}}},
        {"containers", {{"type", "integer"}, {"minimum", kMinContainers}, {"maximum", kMaxContainers}}},
        {"image", {{"type", "string"}, {"default", "edt"}}},
        {"gpu", {{"type", "object"}, {"properties", {{"model", {{"type", "string"}}}, {"count", {{"type", "integer"}}}}}}},
        {"shm", {{"type", "string"}, {"example", "1Gi"}}},
        {"mounts", {{"type", "array"},
                    {"items", {{"type", "object"},
                               {"properties", {{"volume", {{"type", "string"}}},
                                               {"path", {{"type", "string"}}},
                                               {"read_only", {{"type", "boolean"}}}}}}}}},
        {"env", {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}}}}}};
  s["Scale"] = {{"type", "object"}, {"required", {"containers"}},
                {"properties", {{"containers", {{"type", "integer"}, {"minimum", kMinContainers}}}}}};
  s["Container"] = {{"type", "object"},
                    {"properties", {{"name", {{"type", "string"}}},
                                    {"role", {{"type", "string"}, {"enum", {"launcher", "worker"}}}},
                                    {"phase", {{"type", "string"}}},
                                    {"hostname", {{"type", "string"}}},
                                    {"address", {{"type", "string"}}},
                                    {"gpus", {{"type", "array"}, {"items", {{"type", "integer"}}}}},
                                    {"started_at", {{"type", "integer"}}}}}};
  s["Cluster"] = {{"allOf", {{{"$ref", "#/components/schemas/ClusterSpec"}},
                             {{"type", "object"},
                              {"properties", {{"owner", {{"type", "string"}}},
                                              {"status", {{"type", "object"},
                                                          {"properties", {{"phase", {{"type", "string"},
                                                                                     {"enum", {"Pending", "Creating", "Running", "Scaling", "Failed", "Deleting"}}}},
                                                                          {"message", {{"type", "string"}}},
                                                                          {"containers", {{"type", "array"}, {"items", {{"$ref", "#/components/schemas/Container"}}}}}}}}}}}}}}};
  s["ClusterList"] = {{"type", "object"},
                      {"properties", {{"clusters", {{"type", "array"}, {"items", {{"$ref", "#/components/schemas/Cluster"}}}}}}}};
  s["JobRequest"] = {{"type", "object"}, {"required", {"command"}},
                     {"properties", {{"command", {{"type", "string"}}}, {"container", {{"type", "string"}}}}}};
  s["Job"] = {{"type", "object"},
              {"properties", {{"id", {{"type", "integer"}}}, {"state", {{"type", "string"}, {"enum", {"Running", "Succeeded", "Failed"}}}},
                              {"exit_code", {{"type", "integer"}}}, {"container", {{"type", "string"}}}}}};
  s["Volume"] = {{"type", "object"}, {"required", {"name"}},
                 {"properties", {{"name", {{"type", "string"}}}, {"host_path", {{"type", "string"}}}}}};
  return doc;
}

}  // namespace

const std::string& openapi_document() {
  static const std::string kDocument = build().dump(2);
  return kDocument;
}

}  // namespace edt::control

#include "control/console/console_routes.h"

#include <algorithm>

#include "control/model/fields.h"
#include "edt_api/contract.h"

namespace edt::control {
namespace {

using nlohmann::json;

// The origins a terminal's WebSocket may come from: the console edtd serves
// at the API's own address (its Host), and the page that asks for the
// session (its Origin, which browsers send with a POST; "null" under a
// no-referrer policy, which names no page).
std::vector<std::string> console_origins(const Request& req) {
  std::vector<std::string> origins;
  if (req.has_header("Host")) {
    const std::string host = req.get_header_value("Host");
    origins = {"http://" + host, "https://" + host};
  }
  if (req.has_header("Origin") && req.get_header_value("Origin") != "null")
    origins.push_back(req.get_header_value("Origin"));
  return origins;
}

Answer open_terminal(const ConsoleOptions& options, const Request& req, const User& user) {
  auto body = optional_json_body(req);
  if (!body.is_ok()) return body.status();
  EDT_RETURN_IF_ERROR(Fields(*body, "").only(api::fields::TerminalRequest::kProperties));
  auto found = options.service->cluster(user, req.matches[1]);
  if (!found.is_ok()) return found.status();
  const Cluster& cluster = *found;
  const std::string name = req.matches[2];
  const auto& containers = cluster.containers;
  auto c = std::find_if(containers.begin(), containers.end(), [&](const auto& s) { return s.name == name; });
  if (c == containers.end())
    return missing("container", "cluster " + cluster.spec.name + " has no container '" + name + "'",
                   "choose one of its containers (edt cluster get " + cluster.spec.name + ")");
  if (c->phase != Phase::kRunning)
    return conflict("container", "container " + name + " is " + to_string(c->phase) + ", not Running",
                    "wait until it is Running");
  auto access = options.service->ssh_access(user, cluster.spec.name);
  if (!access.is_ok()) return access.status();
  const SshEndpoint& ssh = access->endpoints.at(name);
  const std::string id = options.terminals->open_session(
      {name, ssh.address, ssh.port, ssh.user, access->private_key, access->known_hosts}, console_origins(req));
  return json_reply(201, {{"port", options.terminals->port()},
                          {"path", "/terminal/" + id},
                          {"expires_in", TerminalServer::kSessionTtl.count()}});
}

Answer open_jupyter(const ConsoleOptions& options, const Request& req, const User& user) {
  auto body = optional_json_body(req);
  if (!body.is_ok()) return body.status();
  EDT_RETURN_IF_ERROR(Fields(*body, "").only(api::fields::JupyterRequest::kProperties));
  return options.jupyter->open(req, user);
}

}  // namespace

std::vector<Route> console_routes(const ConsoleOptions& options) {
  return {
      {"POST", "/api/v1/clusters/{name}/containers/{container}/terminal", Access::kUser, "",
       [options](const Request& req, const User& user) { return open_terminal(options, req, user); }},
      {"POST", "/api/v1/clusters/{name}/jupyter", Access::kUser, "",
       [options](const Request& req, const User& user) { return open_jupyter(options, req, user); }},
  };
}

}  // namespace edt::control

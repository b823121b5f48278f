#include "control/console/console_routes.h"

#include <httplib.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "control/api/server.h"
#include "control/model/api_error.h"

namespace edt::control {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

void reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void refuse(httplib::Response& res, const ApiError& error) { reply(res, error.http_status, error.to_json()); }

json job_json(const Job& job) {
  return json{{"id", job.id},           {"cluster", job.cluster},     {"container", job.container},
              {"owner", job.owner},     {"command", job.command},     {"state", job.state},
              {"exit_code", job.exit_code}, {"message", job.message}, {"created_at", job.created_at},
              {"finished_at", job.finished_at}};
}

}  // namespace

void install_console_routes(httplib::Server& server, const ConsoleOptions& options) {
  ControlStore* store = options.store;

  // The user behind the request's token, or a 401 refusal.
  auto user_of = [store](const httplib::Request& req, httplib::Response& res) -> std::optional<User> {
    const std::string header = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    std::optional<User> user;
    if (header.compare(0, prefix.size(), prefix) == 0) user = store->user_for_token(hash_token(header.substr(prefix.size())));
    if (!user)
      refuse(res, ApiError{401, "Authorization", "no valid bearer token was sent",
                           "send 'Authorization: Bearer <token>' (sign in to the console again)"});
    return user;
  };
  // The cluster named in the path, if the request's user may see it.
  auto owned_cluster = [store, user_of](const httplib::Request& req, httplib::Response& res) -> std::optional<Cluster> {
    auto user = user_of(req, res);
    if (!user) return std::nullopt;
    const std::string name = req.matches[1];
    auto cluster = store->cluster(name);
    if (!cluster) {
      refuse(res, not_found_error("name", "cluster '" + name + "' does not exist", "see edt cluster list"));
      return std::nullopt;
    }
    if (!user->admin && cluster->owner != user->name) {
      refuse(res, ApiError{403, "name", "cluster '" + name + "' belongs to another user",
                           "use one of your own clusters (edt cluster list)"});
      return std::nullopt;
    }
    return cluster;
  };

  server.Get(R"(/api/v1/clusters/([^/]+)/jobs)", [options, owned_cluster](const httplib::Request& req, httplib::Response& res) {
    auto cluster = owned_cluster(req, res);
    if (!cluster) return;
    // Every job has its log under DATA_DIR/jobs, named by its id.
    std::vector<int64_t> ids;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(options.data_dir + "/jobs", ec)) {
      if (entry.path().extension() != ".log") continue;
      try {
        ids.push_back(std::stoll(entry.path().stem().string()));
      } catch (...) {
      }
    }
    std::sort(ids.rbegin(), ids.rend());
    json items = json::array();
    for (int64_t id : ids) {
      auto job = options.store->job(id);
      if (job && job->cluster == cluster->spec.name) items.push_back(job_json(options.jobs->refresh(*job)));
    }
    reply(res, 200, {{"jobs", items}});
  });

  server.Post(R"(/api/v1/clusters/([^/]+)/containers/([^/]+)/terminal)", [options, owned_cluster](const httplib::Request& req, httplib::Response& res) {
    auto cluster = owned_cluster(req, res);
    if (!cluster) return;
    const std::string name = req.matches[2];
    auto c = std::find_if(cluster->containers.begin(), cluster->containers.end(), [&](const auto& s) { return s.name == name; });
    if (c == cluster->containers.end())
      return refuse(res, not_found_error("container", "cluster " + cluster->spec.name + " has no container '" + name + "'",
                                         "choose one of its containers (edt cluster get " + cluster->spec.name + ")"));
    if (c->phase != "Running")
      return refuse(res, conflict("container", "container " + name + " is " + c->phase + ", not Running",
                                  "wait until it is Running"));
    auto key = options.backend->ssh_private_key(cluster->spec.name);
    if (!key.is_ok()) return refuse(res, conflict("name", key.status().message(), "wait until the cluster is Running"));
    const std::string id = options.terminals->open_session({name, c->address, options.backend->ssh_port(), *key});
    reply(res, 201, {{"port", options.terminals->port()}, {"path", "/terminal/" + id},
                     {"expires_in", TerminalServer::kSessionTtl.count()}});
  });
}

}  // namespace edt::control

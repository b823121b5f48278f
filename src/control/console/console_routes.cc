#include "control/console/console_routes.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>

#include "control/api/server.h"
#include "control/model/api_error.h"

namespace edt::control {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void refuse(httplib::Response& res, const ApiError& error) { reply(res, error.http_status, error.to_json()); }

// A cluster's events, one JSON object a line. Appends are whole lines under
// a lock, so a reader never sees half an event.
class EventLog {
 public:
  explicit EventLog(std::string dir) : dir_(std::move(dir)) {}

  // `containers`: the count after the event (Created, Scaled), else 0.
  // `fresh` starts the log over: a new cluster may reuse an old name.
  void append(const std::string& cluster, const std::string& type, const std::string& message, int containers = 0,
              bool fresh = false) {
    json event = {{"time", unix_now()}, {"type", type}, {"message", message}};
    if (containers > 0) event["containers"] = containers;
    std::lock_guard<std::mutex> lock(mu_);
    std::error_code ec;
    fs::create_directories(dir_, ec);
    std::ofstream out(path(cluster), fresh ? std::ios::trunc : std::ios::app);
    out << event.dump() << "\n";
  }

  std::vector<json> read(const std::string& cluster) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<json> events;
    std::ifstream in(path(cluster));
    for (std::string line; std::getline(in, line);) {
      json e = json::parse(line, nullptr, false);
      if (e.is_object()) events.push_back(std::move(e));
    }
    return events;
  }

 private:
  std::string path(const std::string& cluster) const { return dir_ + "/" + cluster + ".jsonl"; }

  std::string dir_;
  std::mutex mu_;
};

// The last container count an event recorded: what a scale started from.
int last_count(const std::vector<json>& events) {
  int count = 0;
  for (const auto& e : events)
    if (e.contains("containers") && e["containers"].is_number_integer()) count = e["containers"];
  return count;
}

json job_json(const Job& job) {
  return json{{"id", job.id},           {"cluster", job.cluster},     {"container", job.container},
              {"owner", job.owner},     {"command", job.command},     {"state", job.state},
              {"exit_code", job.exit_code}, {"message", job.message}, {"created_at", job.created_at},
              {"finished_at", job.finished_at}};
}

}  // namespace

void install_console_routes(httplib::Server& server, const ConsoleOptions& options) {
  if (!options.web_dir.empty()) server.set_mount_point("/", options.web_dir);

  auto events = std::make_shared<EventLog>(options.data_dir + "/events");
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

  // Records what the API did, once it has answered that it did it. The
  // request body says what was asked (the response's may be compressed by
  // now), and the status that it was done as asked.
  server.set_post_routing_handler([events](const httplib::Request& req, httplib::Response& res) {
    static const std::regex kOne(R"(/api/v1/clusters/([^/]+))");
    std::smatch m;
    if (req.method == "POST" && req.path == "/api/v1/clusters" && res.status == 201) {
      json c = json::parse(req.body, nullptr, false);
      if (!c.is_object()) return;
      const std::string name = c.value("name", "");
      const int n = c.value("containers", 0);
      events->append(name, "Created", "created with " + std::to_string(n) + " containers (" + c.value("framework", "") + ")", n, true);
    } else if (req.method == "PATCH" && std::regex_match(req.path, m, kOne) && res.status == 200) {
      json c = json::parse(req.body, nullptr, false);
      if (!c.is_object()) return;
      const std::string name = m[1];
      const int to = c.value("containers", 0);
      const int from = last_count(events->read(name));
      events->append(name, "Scaled", from ? "scaled from " + std::to_string(from) + " to " + std::to_string(to) + " containers"
                                          : "scaled to " + std::to_string(to) + " containers", to);
    } else if (req.method == "DELETE" && std::regex_match(req.path, m, kOne) && res.status == 202) {
      events->append(m[1], "Deleting", "deletion requested");
    }
  });

  server.Get(R"(/api/v1/clusters/([^/]+)/events)", [events, owned_cluster](const httplib::Request& req, httplib::Response& res) {
    auto cluster = owned_cluster(req, res);
    if (!cluster) return;
    std::vector<json> items = events->read(cluster->spec.name);
    // Failures are recorded the first time they are seen, so they keep that time.
    auto seen = [&items](const std::string& message) {
      return std::any_of(items.begin(), items.end(), [&](const json& e) { return e.value("message", "") == message; });
    };
    if (cluster->phase == "Failed" && !seen(cluster->message)) {
      events->append(cluster->spec.name, "Failed", cluster->message);
      items = events->read(cluster->spec.name);
    }
    for (const auto& c : cluster->containers) {
      if (c.started_at > 0)
        items.push_back({{"time", c.started_at}, {"type", "Running"}, {"message", c.name + " is Running at " + c.address}});
      const std::string failure = c.name + ": " + c.message;
      if (c.phase == "Failed" && !seen(failure)) {
        events->append(cluster->spec.name, "Failed", failure);
        items.push_back({{"time", unix_now()}, {"type", "Failed"}, {"message", failure}});
      }
    }
    for (auto& e : items) e.erase("containers");
    std::stable_sort(items.begin(), items.end(), [](const json& a, const json& b) { return a.value("time", 0) < b.value("time", 0); });
    reply(res, 200, {{"events", items}});
  });

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

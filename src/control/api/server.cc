#include "control/api/server.h"

#include <httplib.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/units.h"

namespace edt::control {

using nlohmann::json;

std::string hash_token(const std::string& token) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char b : digest) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

std::string new_token() {
  unsigned char bytes[32];
  EDT_CHECK(RAND_bytes(bytes, sizeof(bytes)) == 1);
  static const char* kHex = "0123456789abcdef";
  std::string out = "edt_";
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void refuse(httplib::Response& res, const ApiError& error) { reply(res, error.http_status, error.to_json()); }

ApiError from_status(const Status& st, const std::string& field) {
  switch (st.code()) {
    case StatusCode::kNotFound: return not_found_error(field, st.message(), "check the name");
    case StatusCode::kAlreadyExists: return conflict(field, st.message(), "choose another name");
    case StatusCode::kFailedPrecondition: return conflict(field, st.message(), "wait, or change what it depends on");
    case StatusCode::kInvalidArgument: return unprocessable(field, st.message(), "correct the value");
    default: return ApiError{500, field, st.message(), "retry; if it persists, see edtd's log"};
  }
}

// Parses a request body as a JSON object.
Refusal parse_body(const httplib::Request& req, json* out) {
  *out = json::parse(req.body, nullptr, false);
  if (out->is_discarded())
    return bad_request("", "the request body is not valid JSON", "send a JSON object, e.g. {\"containers\": 4}");
  if (!out->is_object()) return bad_request("", "the request body must be a JSON object", "send {...}");
  return std::nullopt;
}

std::string human_size(uint64_t bytes) { return format_size(bytes); }

}  // namespace

ApiServer::ApiServer(ApiServerOptions options) : options_(std::move(options)), server_(new httplib::Server) {
  install_routes();
}

ApiServer::~ApiServer() { stop(); }

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

void ApiServer::install_routes() {
  httplib::Server& s = *server_;
  s.set_payload_max_length(options_.max_body_bytes);
  // Log streams hold a thread each while their job runs.
  s.new_task_queue = [] { return new httplib::ThreadPool(32); };
  s.set_error_handler([this](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    refusals_++;
    if (res.status == 413) {
      refuse(res, ApiError{413, "", "the request body is over " + human_size(options_.max_body_bytes),
                           "send a smaller body"});
    } else if (res.status == 404) {
      refuse(res, not_found_error("", "no such API route", "see GET /api/v1/openapi.json"));
    } else {
      refuse(res, ApiError{res.status, "", "the request failed", "see GET /api/v1/openapi.json"});
    }
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    refuse(res, ApiError{500, "", "internal error: " + what, "retry; if it persists, see edtd's log"});
  });

  // The web console's static files, at /.
  if (!options_.web_dir.empty()) s.set_mount_point("/", options_.web_dir);

  ControlStore* store = options_.store;
  // Wraps a handler that needs a user: answers 401 without a valid token.
  using Authed = std::function<void(const httplib::Request&, httplib::Response&, const User&)>;
  auto authed = [this, store](Authed handler) {
    return [this, store, handler](const httplib::Request& req, httplib::Response& res) {
      requests_++;
      std::string header = req.get_header_value("Authorization");
      const std::string prefix = "Bearer ";
      if (header.compare(0, prefix.size(), prefix) != 0) {
        refusals_++;
        return refuse(res, ApiError{401, "Authorization", "no bearer token was sent",
                                    "send 'Authorization: Bearer <token>' (set EDT_TOKEN or run edt login)"});
      }
      auto user = store->user_for_token(hash_token(header.substr(prefix.size())));
      if (!user) {
        refusals_++;
        return refuse(res, ApiError{401, "Authorization", "the token is not valid",
                                    "use a token from the admin (edt user create) or DIR/admin.token"});
      }
      handler(req, res, *user);
      if (res.status >= 400) refusals_++;
    };
  };
  // The cluster `name` if `user` may see it; otherwise refuses.
  auto owned_cluster = [store](const std::string& name, const User& user, httplib::Response& res) -> std::optional<Cluster> {
    auto cluster = store->cluster(name);
    if (!cluster) {
      refuse(res, not_found_error("name", "cluster '" + name + "' does not exist", "see edt cluster list"));
      return std::nullopt;
    }
    if (!user.admin && cluster->owner != user.name) {
      refuse(res, ApiError{403, "name", "cluster '" + name + "' belongs to another user",
                           "use one of your own clusters (edt cluster list)"});
      return std::nullopt;
    }
    return cluster;
  };

  s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) { reply(res, 200, {{"ok", true}}); });
  s.Get("/api/v1/openapi.json", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(openapi_document(), "application/json");
  });
  s.Get("/api/v1/whoami", authed([](const httplib::Request&, httplib::Response& res, const User& user) {
    reply(res, 200, {{"name", user.name}, {"admin", user.admin}});
  }));

  // Clusters.
  s.Get("/api/v1/clusters", authed([this, store](const httplib::Request&, httplib::Response& res, const User& user) {
    // The list is rebuilt only when the store changed since it was last built.
    const int64_t version = store->version();
    {
      std::lock_guard lock(list_mu_);
      auto it = list_cache_.find(user.name);
      if (it != list_cache_.end() && it->second.first == version)
        return res.set_content(it->second.second, "application/json");
    }
    json items = json::array();
    for (const auto& c : store->clusters())
      if (user.admin || c.owner == user.name) items.push_back(cluster_to_json(c));
    std::string body = json{{"clusters", items}}.dump();
    res.set_content(body, "application/json");
    std::lock_guard lock(list_mu_);
    list_cache_[user.name] = {version, std::move(body)};
  }));
  s.Post("/api/v1/clusters", authed([this, store](const httplib::Request& req, httplib::Response& res, const User& user) {
    json body;
    if (auto r = parse_body(req, &body)) return refuse(res, *r);
    ClusterSpec spec;
    if (auto r = parse_cluster_spec(body, &spec)) return refuse(res, *r);
    if (auto r = store->create_cluster(spec, user.name, options_.addresses, unix_now())) return refuse(res, *r);
    (void)store->add_event(spec.name, "Created", "created by " + user.name + " with " +
                                                     std::to_string(spec.containers) + " containers");
    options_.reconciler->enqueue(spec.name);
    reply(res, 201, cluster_to_json(*store->cluster(spec.name)));
  }));
  s.Get(R"(/api/v1/clusters/([^/]+))", authed([owned_cluster](const httplib::Request& req, httplib::Response& res, const User& user) {
    if (auto c = owned_cluster(req.matches[1], user, res)) reply(res, 200, cluster_to_json(*c));
  }));
  s.Patch(R"(/api/v1/clusters/([^/]+))", authed([this, store, owned_cluster](const httplib::Request& req, httplib::Response& res, const User& user) {
    json body;
    if (auto r = parse_body(req, &body)) return refuse(res, *r);
    auto cluster = owned_cluster(req.matches[1], user, res);
    if (!cluster) return;
    for (auto it = body.begin(); it != body.end(); ++it)
      if (it.key() != "containers")
        return refuse(res, unprocessable(it.key(), "field '" + it.key() + "' cannot be changed",
                                         "only containers can be changed; make a new cluster for the rest"));
    if (!body.contains("containers"))
      return refuse(res, unprocessable("containers", "containers is missing", "send {\"containers\": N}"));
    int containers = 0;
    if (auto r = check_container_count(body["containers"], "containers", &containers)) return refuse(res, *r);
    if (auto r = store->scale_cluster(cluster->spec.name, containers, options_.addresses)) return refuse(res, *r);
    (void)store->add_event(cluster->spec.name, "Scaling",
                           "scale from " + std::to_string(cluster->spec.containers) + " to " + std::to_string(containers) +
                               " containers by " + user.name);
    options_.reconciler->enqueue(cluster->spec.name);
    reply(res, 200, cluster_to_json(*store->cluster(cluster->spec.name)));
  }));
  s.Delete(R"(/api/v1/clusters/([^/]+))", authed([this, store, owned_cluster](const httplib::Request& req, httplib::Response& res, const User& user) {
    auto cluster = owned_cluster(req.matches[1], user, res);
    if (!cluster) return;
    (void)store->add_event(cluster->spec.name, "Deleting", "deleted by " + user.name);
    if (Status st = store->mark_deleting(cluster->spec.name); !st.is_ok()) return refuse(res, from_status(st, "name"));
    options_.reconciler->enqueue(cluster->spec.name);
    // The reconciler may have removed it already; answer with what was marked.
    cluster->phase = phase::kDeleting;
    reply(res, 202, cluster_to_json(*cluster));
  }));
  s.Get(R"(/api/v1/clusters/([^/]+)/hostfile)", authed([store, owned_cluster](const httplib::Request& req, httplib::Response& res, const User& user) {
    auto cluster = owned_cluster(req.matches[1], user, res);
    if (!cluster) return;
    std::vector<ContainerStatus> running;
    for (const auto& c : cluster->containers)
      if (!c.leaving && c.phase == phase::kRunning) running.push_back(c);
    res.set_content(render_hostfile(running), "text/plain");
  }));
  s.Get(R"(/api/v1/clusters/([^/]+)/events)", authed([store, owned_cluster](const httplib::Request& req, httplib::Response& res, const User& user) {
    auto cluster = owned_cluster(req.matches[1], user, res);
    if (!cluster) return;
    json items = json::array();
    for (const auto& e : store->events(cluster->spec.name)) {
      char time[32];
      std::time_t seconds = static_cast<std::time_t>(e.time_ms / 1000);
      std::tm utc{};
      gmtime_r(&seconds, &utc);
      std::strftime(time, sizeof(time), "%Y-%m-%dT%H:%M:%S", &utc);
      char full[48];
      std::snprintf(full, sizeof(full), "%s.%03dZ", time, static_cast<int>(e.time_ms % 1000));
      items.push_back({{"time", full}, {"type", e.type}, {"message", e.message}});
    }
    reply(res, 200, {{"events", items}});
  }));
  s.Get(R"(/api/v1/clusters/([^/]+)/ssh)", authed([this, owned_cluster](const httplib::Request& req, httplib::Response& res, const User& user) {
    auto cluster = owned_cluster(req.matches[1], user, res);
    if (!cluster) return;
    auto key = options_.backend->ssh_private_key(cluster->spec.name);
    if (!key.is_ok()) return refuse(res, conflict("name", key.status().message(), "wait until the cluster is Running"));
    json containers = json::array();
    for (const auto& c : cluster->containers) containers.push_back({{"name", c.name}, {"address", c.address}});
    reply(res, 200, {{"private_key", *key}, {"port", options_.backend->ssh_port()}, {"user", "root"},
                     {"containers", containers}});
  }));

  // Jobs.
  s.Post(R"(/api/v1/clusters/([^/]+)/jobs)", authed([this, owned_cluster](const httplib::Request& req, httplib::Response& res, const User& user) {
    json body;
    if (auto r = parse_body(req, &body)) return refuse(res, *r);
    auto cluster = owned_cluster(req.matches[1], user, res);
    if (!cluster) return;
    if (!body.contains("command") || !body["command"].is_string() || body["command"].get<std::string>().empty())
      return refuse(res, unprocessable("command", "command must be a non-empty string",
                                       "send {\"command\": \"hostname\"}"));
    std::string container = container_name(cluster->spec.name, 0);
    if (body.contains("container")) {
      if (!body["container"].is_string())
        return refuse(res, unprocessable("container", "container must be a string", "name a container of the cluster"));
      container = body["container"].get<std::string>();
    }
    auto job = options_.jobs->start(*cluster, container, body["command"].get<std::string>(), user.name);
    if (!job.is_ok()) return refuse(res, from_status(job.status(), "container"));
    reply(res, 201, {{"id", job->id}, {"cluster", job->cluster}, {"container", job->container},
                     {"state", job->state}});
  }));
  auto job_json = [](const Job& job) {
    return json{{"id", job.id},           {"cluster", job.cluster},     {"container", job.container},
                {"owner", job.owner},     {"command", job.command},     {"state", job.state},
                {"exit_code", job.exit_code}, {"message", job.message}, {"created_at", job.created_at},
                {"finished_at", job.finished_at}};
  };
  // The job `id` if `user` may see it, refreshed; otherwise refuses.
  auto owned_job = [this, store](const std::string& id_text, const User& user, httplib::Response& res) -> std::optional<Job> {
    int64_t id = 0;
    try {
      id = std::stoll(id_text);
    } catch (...) {
    }
    auto job = store->job(id);
    if (!job) {
      refuse(res, not_found_error("id", "job " + id_text + " does not exist", "use the id that POST .../jobs returned"));
      return std::nullopt;
    }
    if (!user.admin && job->owner != user.name) {
      refuse(res, ApiError{403, "id", "job " + id_text + " belongs to another user", "use one of your own jobs"});
      return std::nullopt;
    }
    return options_.jobs->refresh(*job);
  };
  s.Get(R"(/api/v1/jobs/(\d+))", authed([owned_job, job_json](const httplib::Request& req, httplib::Response& res, const User& user) {
    if (auto job = owned_job(req.matches[1], user, res)) reply(res, 200, job_json(*job));
  }));
  s.Get(R"(/api/v1/jobs/(\d+)/log)", authed([this, owned_job](const httplib::Request& req, httplib::Response& res, const User& user) {
    auto job = owned_job(req.matches[1], user, res);
    if (!job) return;
    const bool follow = req.get_param_value("follow") != "false";
    const std::string path = options_.jobs->log_path(job->id);
    const int64_t id = job->id;
    ControlStore* store = options_.store;
    JobRunner* jobs = options_.jobs;
    // Streams the log as it grows, until the job has ended and all of it is sent.
    res.set_chunked_content_provider("text/plain", [path, id, follow, store, jobs](size_t offset, httplib::DataSink& sink) {
      for (;;) {
        bool ended = !follow || jobs->refresh(*store->job(id)).state != job_state::kRunning;
        std::ifstream in(path, std::ios::binary);
        in.seekg(static_cast<std::streamoff>(offset));
        char buffer[65536];
        in.read(buffer, sizeof(buffer));
        std::streamsize n = in.gcount();
        if (n > 0) return sink.write(buffer, static_cast<size_t>(n));
        if (ended) {
          sink.done();
          return true;
        }
        if (!sink.is_writable()) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
  }));

  // Volumes, images, GPUs, users.
  auto volume_json = [](const Volume& v) {
    return json{{"name", v.name}, {"owner", v.owner}, {"host_path", v.host_path}, {"managed", v.managed}};
  };
  s.Get("/api/v1/volumes", authed([store, volume_json](const httplib::Request&, httplib::Response& res, const User& user) {
    json items = json::array();
    for (const auto& v : store->volumes())
      if (user.admin || v.owner == user.name) items.push_back(volume_json(v));
    reply(res, 200, {{"volumes", items}});
  }));
  s.Post("/api/v1/volumes", authed([this, store, volume_json](const httplib::Request& req, httplib::Response& res, const User& user) {
    json body;
    if (auto r = parse_body(req, &body)) return refuse(res, *r);
    if (!body.contains("name") || !body["name"].is_string())
      return refuse(res, unprocessable("name", "name is missing", "send {\"name\": \"data\"}"));
    Volume v{body["name"].get<std::string>(), user.name, "", true};
    if (auto r = check_resource_name(v.name, "name", "volume")) return refuse(res, *r);
    if (body.contains("host_path")) {
      if (!user.admin)
        return refuse(res, ApiError{403, "host_path", "only the admin may register a host path",
                                    "leave host_path out to get a directory edtd makes"});
      if (!body["host_path"].is_string() || body["host_path"].get<std::string>().empty() ||
          body["host_path"].get<std::string>()[0] != '/')
        return refuse(res, unprocessable("host_path", "host_path must be an absolute path", "e.g. /srv/datasets"));
      v.host_path = body["host_path"].get<std::string>();
      v.managed = false;
      if (!std::filesystem::is_directory(v.host_path))
        return refuse(res, unprocessable("host_path", "host_path " + v.host_path + " is not a directory on the host",
                                         "create it first, or give an existing directory"));
    } else {
      v.host_path = options_.data_dir + "/volumes/" + v.name;
    }
    if (Status st = store->create_volume(v); !st.is_ok()) return refuse(res, from_status(st, "name"));
    if (v.managed) std::filesystem::create_directories(v.host_path);
    reply(res, 201, volume_json(v));
  }));
  s.Delete(R"(/api/v1/volumes/([^/]+))", authed([store](const httplib::Request& req, httplib::Response& res, const User& user) {
    auto v = store->volume(req.matches[1]);
    if (!v) return refuse(res, not_found_error("name", "volume '" + std::string(req.matches[1]) + "' does not exist", "see edt volume list"));
    if (!user.admin && v->owner != user.name)
      return refuse(res, ApiError{403, "name", "volume '" + v->name + "' belongs to another user", "use your own"});
    if (Status st = store->delete_volume(v->name); !st.is_ok()) return refuse(res, from_status(st, "name"));
    if (v->managed) std::filesystem::remove_all(v->host_path);
    reply(res, 200, {{"deleted", v->name}});
  }));
  s.Get("/api/v1/images", authed([store](const httplib::Request&, httplib::Response& res, const User&) {
    json items = json::array();
    for (const auto& i : store->images())
      items.push_back({{"name", i.name}, {"root", i.root}, {"frameworks", i.frameworks}, {"builtin", i.builtin}});
    reply(res, 200, {{"images", items}});
  }));
  s.Post("/api/v1/images", authed([store](const httplib::Request& req, httplib::Response& res, const User& user) {
    if (!user.admin) return refuse(res, ApiError{403, "", "only the admin may register images", "ask the admin"});
    json body;
    if (auto r = parse_body(req, &body)) return refuse(res, *r);
    Image image;
    if (!body.contains("name") || !body["name"].is_string())
      return refuse(res, unprocessable("name", "name is missing", "send {\"name\": ..., \"root\": ..., \"frameworks\": [...]}"));
    image.name = body["name"];
    if (auto r = check_resource_name(image.name, "name", "image")) return refuse(res, *r);
    image.root = body.value("root", "/");
    if (image.root.empty() || image.root[0] != '/' || !std::filesystem::is_directory(image.root + "/usr"))
      return refuse(res, unprocessable("root", "root '" + image.root + "' is not a directory with a /usr",
                                       "give the absolute path of an unpacked root file system, or / for the host's"));
    if (!body.contains("frameworks") || !body["frameworks"].is_array() || body["frameworks"].empty())
      return refuse(res, unprocessable("frameworks", "frameworks must be a non-empty list", "e.g. [\"deepspeed\"]"));
    const auto& known = known_frameworks();
    for (const auto& f : body["frameworks"]) {
      if (!f.is_string() || std::find(known.begin(), known.end(), f.get<std::string>()) == known.end())
        return refuse(res, unprocessable("frameworks", "unknown framework " + f.dump(),
                                         "use horovod, deepspeed, megatron or slurm"));
      image.frameworks.push_back(f);
    }
    for (const auto& i : store->images())
      if (i.name == image.name && i.builtin)
        return refuse(res, conflict("name", "image " + i.name + " is built in", "choose another name"));
    if (Status st = store->put_image(image); !st.is_ok()) return refuse(res, from_status(st, "name"));
    reply(res, 201, {{"name", image.name}, {"root", image.root}, {"frameworks", image.frameworks}});
  }));
  s.Get("/api/v1/gpus", authed([store](const httplib::Request&, httplib::Response& res, const User&) {
    json items = json::array();
    for (const auto& g : store->gpus())
      items.push_back({{"index", g.index}, {"model", g.model}, {"simulated", g.simulated}, {"holder", g.holder}});
    reply(res, 200, {{"gpus", items}});
  }));
  s.Get("/api/v1/users", authed([store](const httplib::Request&, httplib::Response& res, const User& user) {
    if (!user.admin) return refuse(res, ApiError{403, "", "only the admin may list users", "ask the admin"});
    json items = json::array();
    for (const auto& u : store->users()) items.push_back({{"name", u.name}, {"admin", u.admin}});
    reply(res, 200, {{"users", items}});
  }));
  s.Post("/api/v1/users", authed([store](const httplib::Request& req, httplib::Response& res, const User& user) {
    if (!user.admin) return refuse(res, ApiError{403, "", "only the admin may create users", "ask the admin"});
    json body;
    if (auto r = parse_body(req, &body)) return refuse(res, *r);
    if (!body.contains("name") || !body["name"].is_string())
      return refuse(res, unprocessable("name", "name is missing", "send {\"name\": \"alice\"}"));
    std::string name = body["name"];
    if (auto r = check_resource_name(name, "name", "user")) return refuse(res, *r);
    if (Status st = store->create_user(name, false); !st.is_ok()) return refuse(res, from_status(st, "name"));
    std::string token = new_token();
    if (Status st = store->add_token(name, hash_token(token)); !st.is_ok()) return refuse(res, from_status(st, "name"));
    reply(res, 201, {{"name", name}, {"token", token}});
  }));
  s.Post(R"(/api/v1/users/([^/]+)/tokens)", authed([store](const httplib::Request& req, httplib::Response& res, const User& user) {
    std::string name = req.matches[1];
    if (!user.admin && user.name != name)
      return refuse(res, ApiError{403, "name", "you may make tokens only for yourself", "ask the admin"});
    std::string token = new_token();
    if (Status st = store->add_token(name, hash_token(token)); !st.is_ok()) return refuse(res, from_status(st, "name"));
    reply(res, 201, {{"name", name}, {"token", token}});
  }));

  // Metrics, Prometheus text format.
  s.Get("/api/v1/metrics", authed([this, store](const httplib::Request&, httplib::Response& res, const User&) {
    std::map<std::string, int> clusters, containers;
    for (const auto& c : store->clusters()) {
      clusters[c.phase]++;
      for (const auto& k : c.containers) containers[k.phase]++;
    }
    int gpus_total = 0, gpus_held = 0;
    for (const auto& g : store->gpus()) {
      gpus_total++;
      gpus_held += g.holder.empty() ? 0 : 1;
    }
    ReconcilerStats stats = options_.reconciler->stats();
    std::string out;
    out += "# HELP edt_clusters Clusters by phase.\n# TYPE edt_clusters gauge\n";
    for (const auto& [p, n] : clusters) out += "edt_clusters{phase=\"" + p + "\"} " + std::to_string(n) + "\n";
    out += "# HELP edt_containers Containers by phase.\n# TYPE edt_containers gauge\n";
    for (const auto& [p, n] : containers) out += "edt_containers{phase=\"" + p + "\"} " + std::to_string(n) + "\n";
    out += "# HELP edt_gpus GPUs in the inventory, and held by containers.\n# TYPE edt_gpus gauge\n";
    out += "edt_gpus{state=\"total\"} " + std::to_string(gpus_total) + "\n";
    out += "edt_gpus{state=\"held\"} " + std::to_string(gpus_held) + "\n";
    out += "# TYPE edt_reconcile_passes_total counter\nedt_reconcile_passes_total " + std::to_string(stats.passes) + "\n";
    out += "# TYPE edt_reconcile_errors_total counter\nedt_reconcile_errors_total " + std::to_string(stats.errors) + "\n";
    out += "# TYPE edt_reconcile_seconds_total counter\nedt_reconcile_seconds_total " + std::to_string(stats.seconds) + "\n";
    out += "# TYPE edt_api_requests_total counter\nedt_api_requests_total " + std::to_string(requests_.load()) + "\n";
    out += "# TYPE edt_api_refusals_total counter\nedt_api_refusals_total " + std::to_string(refusals_.load()) + "\n";
    res.set_content(out, "text/plain; version=0.0.4");
  }));
  if (options_.extend_routes) options_.extend_routes(s);
}

}  // namespace edt::control

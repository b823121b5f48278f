// The API's handlers, one file per resource (clusters.cc, jobs.cc,
// volumes.cc, images.cc, users.cc, system.cc). Each reads its request into
// a typed struct, calls the Service (its only way in) and
// answers a Reply or a refusal (a Status); auth, metrics and the mapping of refusals to
// HTTP are the middleware's (middleware.h), the route table is
// ApiServer's (server.cc).
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "control/api/http.h"
#include "control/api/middleware.h"
#include "control/reconcile/reconciler.h"
#include "control/service/service.h"

namespace edt::control {

// GET /clusters bodies by user, with the database version they were built
// at: the list is rebuilt only when something changed.
struct ClusterListCache {
  std::mutex mu;
  std::map<std::string, std::pair<int64_t, std::string>> bodies;  // guarded by mu
};

// What edtd's routes reach, the API's (ApiServerOptions) and the console's
// (ConsoleOptions) alike: every operation through the Service, the front
// door; the reconciler only for its stats (GET /metrics). The pointees are
// edtd's main's.
struct ControlPlane {
  Service* service = nullptr;
  Reconciler* reconciler = nullptr;
};

// What handlers use; owned by ApiServer.
struct ApiContext : ControlPlane {
  RequestCounters* counters = nullptr;
  ClusterListCache* list_cache = nullptr;
};

namespace handlers {

// clusters.cc
Answer list_clusters(ApiContext& ctx, const Request& req, const User& user);
Answer create_cluster(ApiContext& ctx, const Request& req, const User& user);
Answer get_cluster(ApiContext& ctx, const Request& req, const User& user);
Answer scale_cluster(ApiContext& ctx, const Request& req, const User& user);
Answer delete_cluster(ApiContext& ctx, const Request& req, const User& user);
Answer cluster_hostfile(ApiContext& ctx, const Request& req, const User& user);
Answer cluster_events(ApiContext& ctx, const Request& req, const User& user);
Answer cluster_ssh(ApiContext& ctx, const Request& req, const User& user);

// jobs.cc
Answer start_job(ApiContext& ctx, const Request& req, const User& user);
Answer list_jobs(ApiContext& ctx, const Request& req, const User& user);
Answer get_job(ApiContext& ctx, const Request& req, const User& user);
Answer delete_job(ApiContext& ctx, const Request& req, const User& user);
Answer job_log(ApiContext& ctx, const Request& req, const User& user);

// volumes.cc
Answer list_volumes(ApiContext& ctx, const Request& req, const User& user);
Answer create_volume(ApiContext& ctx, const Request& req, const User& user);
Answer delete_volume(ApiContext& ctx, const Request& req, const User& user);
// PUT /volumes/{name}/files?path=P: the raw body becomes the file P (volume_files.h)
Answer upload_volume_file(ApiContext& ctx, const Request& req, const User& user);
// GET /volumes/{name}/files?path=DIR: its entries; GET .../files/content?path=F:
// the file's bytes; DELETE .../files?path=P: a file or a directory, whole
Answer list_volume_files(ApiContext& ctx, const Request& req, const User& user);
Answer download_volume_file(ApiContext& ctx, const Request& req, const User& user);
Answer delete_volume_file(ApiContext& ctx, const Request& req, const User& user);

// images.cc: images and the GPU inventory, what clusters are made of
Answer list_images(ApiContext& ctx, const Request& req, const User& user);
Answer register_image(ApiContext& ctx, const Request& req, const User& user);
Answer import_image(ApiContext& ctx, const Request& req, const User& user);
Answer pull_image(ApiContext& ctx, const Request& req, const User& user);
Answer list_image_pulls(ApiContext& ctx, const Request& req, const User& user);
Answer delete_image(ApiContext& ctx, const Request& req, const User& user);
Answer list_gpus(ApiContext& ctx, const Request& req, const User& user);

// users.cc
Answer whoami(ApiContext& ctx, const Request& req, const User& user);
Answer list_users(ApiContext& ctx, const Request& req, const User& user);
Answer create_user(ApiContext& ctx, const Request& req, const User& user);
Answer delete_user(ApiContext& ctx, const Request& req, const User& user);
Answer create_token(ApiContext& ctx, const Request& req, const User& user);
Answer list_tokens(ApiContext& ctx, const Request& req, const User& user);
Answer revoke_token(ApiContext& ctx, const Request& req, const User& user);

// Teams and quotas (teams.cc).
Answer list_teams(ApiContext& ctx, const Request& req, const User& user);
Answer create_team(ApiContext& ctx, const Request& req, const User& user);
Answer get_team(ApiContext& ctx, const Request& req, const User& user);
Answer delete_team(ApiContext& ctx, const Request& req, const User& user);
Answer set_quota(ApiContext& ctx, const Request& req, const User& user);
Answer delete_quota(ApiContext& ctx, const Request& req, const User& user);
Answer set_user_team(ApiContext& ctx, const Request& req, const User& user);

// system.cc
Answer healthz(ApiContext& ctx, const Request& req, const User& user);
Answer openapi(ApiContext& ctx, const Request& req, const User& user);
Answer metrics(ApiContext& ctx, const Request& req, const User& user);

}  // namespace handlers
}  // namespace edt::control

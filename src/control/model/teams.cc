#include "control/model/teams.h"

#include <algorithm>

#include "control/model/cluster.h"
#include "control/model/fields.h"
#include "edt_api/contract.h"

namespace edt::control {

using nlohmann::json;

namespace {

Status quota_count(const Fields& body, const char* key, int* out) {
  int64_t n = 0;
  EDT_RETURN_IF_ERROR(body.integer(key, &n, Presence::kRequired));
  if (n < 0 || n > kMaxQuotaGpus)
    return invalid(key, std::string(key) + " must be a whole number of GPUs from 0 to " + std::to_string(kMaxQuotaGpus) +
                            ", not " + std::to_string(n),
                   "give a count such as 4 (0: none)");
  *out = static_cast<int>(n);
  return Status::ok();
}

}  // namespace

std::map<TeamModel, TeamGpus> team_gpus(const std::vector<Cluster>& clusters) {
  std::map<TeamModel, TeamGpus> out;
  for (const auto& c : clusters) {
    if (c.spec.gpu.count <= 0) continue;
    TeamGpus& gpus = out[{c.team, c.spec.gpu.model}];
    int staying = 0;
    for (const auto& k : c.containers) {
      gpus.in_use += static_cast<int>(k.gpus.size());
      staying += k.leaving ? 0 : 1;
    }
    if (c.queued.waiting() && !c.deleting)
      gpus.pending += std::max(c.queued.containers - staying, 0) * c.spec.gpu.count;
  }
  return out;
}

const Quota* find_quota(const std::vector<Quota>& quotas, const std::string& team, const std::string& model) {
  for (const auto& q : quotas)
    if (q.team == team && q.model == model && !team.empty()) return &q;
  return nullptr;
}

Status parse_team_request(const json& object, std::string* name) {
  Fields body(object, "");
  EDT_RETURN_IF_ERROR(body.only(api::fields::TeamRequest::kProperties));
  std::string given;
  EDT_RETURN_IF_ERROR(body.text("name", &given, Presence::kRequired));
  EDT_RETURN_IF_ERROR(check_resource_name(given, "name", "team"));
  *name = given;
  return Status::ok();
}

Status parse_quota_request(const json& object, Quota* out) {
  Fields body(object, "");
  EDT_RETURN_IF_ERROR(body.only(api::fields::QuotaRequest::kProperties));
  Quota quota = *out;
  EDT_RETURN_IF_ERROR(quota_count(body, "guaranteed", &quota.guaranteed));
  EDT_RETURN_IF_ERROR(quota_count(body, "borrow_limit", &quota.borrow_limit));
  *out = quota;
  return Status::ok();
}

Status parse_user_team(const json& object, std::string* team) {
  Fields body(object, "");
  EDT_RETURN_IF_ERROR(body.only(api::fields::UserTeam::kProperties));
  std::string given;
  EDT_RETURN_IF_ERROR(body.text("team", &given, Presence::kRequired));
  if (!given.empty()) EDT_RETURN_IF_ERROR(check_resource_name(given, "team", "team"));
  *team = given;
  return Status::ok();
}

json team_to_json(const Team& team) {
  json quotas = json::array();
  for (const auto& u : team.quotas)
    quotas.push_back({{"gpu_model", u.quota.model},
                      {"guaranteed", u.quota.guaranteed},
                      {"borrow_limit", u.quota.borrow_limit},
                      {"in_use", u.in_use},
                      {"borrowed", u.borrowed()},
                      {"pending", u.pending}});
  return {{"name", team.name}, {"members", team.members}, {"quotas", quotas}};
}

}  // namespace edt::control

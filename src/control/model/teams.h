// Teams and their GPU quotas, the scheduler's shares: a team is a named
// group of users (each user in at most one; the admin assigns), and per GPU
// model a team has a quota: `guaranteed` GPUs that are its own whenever it
// asks (containers others borrowed there are drained to give them back),
// and `borrow_limit` GPUs more it may hold while no one's guarantee needs
// them. A team holds at most guaranteed + borrow_limit of a model. A user
// with no team, or a team with no quota for a model, has no guarantee and
// no limit there: it may hold what is free, and what it holds beyond 0 is
// borrowed. The rules that use these are the scheduler's (docs/scheduling.md).
//
// Reading the requests checks shape and ranges only (a negative count, a
// bad name); whether the team or user exists is the service's. Never throws.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "control/model/cluster.h"
#include "control/model/error.h"

namespace edt::control {

inline constexpr int kMaxQuotaGpus = 65536;

struct Quota {
  std::string team;
  std::string model;  // a GPU model, as the inventory names it
  int guaranteed = 0;
  int borrow_limit = 0;
  int limit() const { return guaranteed + borrow_limit; }
};

// One quota with what the team does with it now.
struct QuotaUsage {
  Quota quota;
  int in_use = 0;  // GPUs its members' containers hold, draining ones included
  int pending = 0;  // GPUs its queued requests wait for
  int borrowed() const { return in_use > quota.guaranteed ? in_use - quota.guaranteed : 0; }
};

struct Team {
  std::string name;
  std::vector<std::string> members;  // by name
  std::vector<QuotaUsage> quotas;    // by model
};

// The scheduler's own key in the reconciler's work queue (no cluster can be
// named so): a pass over it places what waits and resizes elastic clusters.
inline constexpr const char* kScheduleKey = "*schedule";

// A team's GPUs of one model: held by its members' containers (leaving ones
// included: they hold their GPUs until they are gone) and waited for by its
// queued requests. Users without a team count under "".
struct TeamGpus {
  int in_use = 0;
  int pending = 0;
};
using TeamModel = std::pair<std::string, std::string>;  // team, GPU model
std::map<TeamModel, TeamGpus> team_gpus(const std::vector<Cluster>& clusters);

// The quota of `team` for `model`, or nullptr (no guarantee, no limit).
const Quota* find_quota(const std::vector<Quota>& quotas, const std::string& team, const std::string& model);

// POST /teams: {"name"}.
Status parse_team_request(const nlohmann::json& body, std::string* name);
// PUT /teams/{name}/quotas/{model}: {"guaranteed", "borrow_limit"}.
Status parse_quota_request(const nlohmann::json& body, Quota* out);
// PUT /users/{name}/team: {"team"}; "" takes the user out of their team.
Status parse_user_team(const nlohmann::json& body, std::string* team);

nlohmann::json team_to_json(const Team& team);

}  // namespace edt::control

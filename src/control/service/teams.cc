// Service: teams, their members and their GPU quotas.
#include <algorithm>

#include "control/model/fields.h"
#include "control/model/teams.h"
#include "control/service/service.h"

namespace edt::control {

namespace {

// The team as `tx` reads it, with what it holds and waits for per model.
Team read_team(Database::Tx& tx, const std::string& name) {
  Team team{name, {}, {}};
  for (const auto& u : tx.users())
    if (u.team == name) team.members.push_back(u.name);
  const auto gpus = team_gpus(tx.clusters());
  for (const auto& q : tx.quotas()) {
    if (q.team != name) continue;
    auto held = gpus.find({name, q.model});
    QuotaUsage usage{q};
    if (held != gpus.end()) {
      usage.in_use = held->second.in_use;
      usage.pending = held->second.pending;
    }
    team.quotas.push_back(usage);
  }
  return team;
}

Status missing_team(const std::string& name, const std::string& field) {
  return missing(field, "team '" + name + "' does not exist", "see edt team list, or create it: edt team create " + name);
}

}  // namespace

Status Service::check_team(Database::Tx& tx, const std::string& team, const std::string& field) {
  const auto names = tx.teams();
  if (std::find(names.begin(), names.end(), team) == names.end()) return missing_team(team, field);
  return Status::ok();
}

Result<Team> Service::create_team(const User& by, const std::string& name) {
  if (!by.admin) return admin_only("create teams");
  auto tx = db_->transaction();
  Status st = tx.insert_team(name);
  if (st.code() == StatusCode::kAlreadyExists)
    return conflict("name", "team '" + name + "' exists", "choose another name");
  if (!st.is_ok()) return as_refusal(st, "name");
  Team made = read_team(tx, name);
  EDT_RETURN_IF_ERROR(as_refusal(tx.commit(), ""));
  return made;
}

Result<Team> Service::delete_team(const User& by, const std::string& name) {
  if (!by.admin) return admin_only("delete teams");
  auto tx = db_->transaction();
  EDT_RETURN_IF_ERROR(check_team(tx, name, "name"));
  Team gone = read_team(tx, name);
  EDT_RETURN_IF_ERROR(as_refusal(tx.delete_team(name), "name"));
  EDT_RETURN_IF_ERROR(commit_and_reconcile(tx, kScheduleKey));
  return gone;
}

Result<std::vector<Team>> Service::teams(const User& by) {
  auto tx = db_->lock();
  std::vector<Team> out;
  for (const auto& name : tx.teams())
    if (by.admin || name == by.team) out.push_back(read_team(tx, name));
  return out;
}

Result<Team> Service::team(const User& by, const std::string& name) {
  auto tx = db_->lock();
  // Another team is answered for as a missing one, as clusters are.
  if (!by.admin && name != by.team) return missing_team(name, "name");
  EDT_RETURN_IF_ERROR(check_team(tx, name, "name"));
  return read_team(tx, name);
}

Result<Team> Service::set_quota(const User& by, const Quota& quota) {
  if (!by.admin) return admin_only("set quotas");
  auto tx = db_->transaction();
  EDT_RETURN_IF_ERROR(check_team(tx, quota.team, "name"));
  const Catalog catalog = tx.catalog(std::nullopt);
  if (!catalog.gpus_total.count(quota.model)) {
    std::vector<std::string> models;
    for (const auto& [model, _] : catalog.gpus_total) models.push_back(model);
    return missing("model", "there is no GPU model '" + quota.model + "'",
                   models.empty() ? "this machine has no GPUs" : "choose one of: " + comma_list(models));
  }
  EDT_RETURN_IF_ERROR(as_refusal(tx.put_quota(quota), ""));
  Team team = read_team(tx, quota.team);
  EDT_RETURN_IF_ERROR(commit_and_reconcile(tx, kScheduleKey));
  return team;
}

Result<Team> Service::delete_quota(const User& by, const std::string& name, const std::string& model) {
  if (!by.admin) return admin_only("delete quotas");
  auto tx = db_->transaction();
  EDT_RETURN_IF_ERROR(check_team(tx, name, "name"));
  if (Status st = tx.delete_quota(name, model); !st.is_ok())
    return missing("model", "team '" + name + "' has no quota for '" + model + "'", "see edt team get " + name);
  Team team = read_team(tx, name);
  EDT_RETURN_IF_ERROR(commit_and_reconcile(tx, kScheduleKey));
  return team;
}

Result<User> Service::set_user_team(const User& by, const std::string& user, const std::string& team) {
  if (!by.admin) return admin_only("assign users to teams");
  auto tx = db_->transaction();
  auto found = tx.user(user);
  if (!found) return missing("name", "user '" + user + "' does not exist", "see edt user list");
  if (!team.empty()) EDT_RETURN_IF_ERROR(check_team(tx, team, "team"));
  EDT_RETURN_IF_ERROR(as_refusal(tx.set_user_team(user, team), "name"));
  found->team = team;
  EDT_RETURN_IF_ERROR(commit_and_reconcile(tx, kScheduleKey));
  return *found;
}

}  // namespace edt::control

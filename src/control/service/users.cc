// Service: users and their tokens.
#include "common/units.h"
#include "control/service/service.h"
#include "control/service/tokens.h"

namespace edt::control {

Result<std::optional<std::string>> Service::ensure_admin() {
  auto tx = db_->transaction();
  for (const auto& user : tx.users())
    if (user.admin) return std::optional<std::string>();
  const std::string token = new_token();
  EDT_RETURN_IF_ERROR(tx.insert_user({"admin", true}));
  EDT_RETURN_IF_ERROR(tx.insert_token({0, "admin", "made at first start", unix_seconds(), 0}, hash_token(token)).status());
  EDT_RETURN_IF_ERROR(tx.commit());
  return std::optional<std::string>(token);
}

std::optional<User> Service::authenticate(const std::string& token) {
  return db_->lock().user_for_token(hash_token(token), unix_seconds());
}

Result<std::vector<User>> Service::users(const User& by) {
  if (!by.admin) return admin_only("list users");
  return db_->lock().users();
}

Result<NewToken> Service::create_user(const User& by, const std::string& name) {
  if (!by.admin) return admin_only("create users");
  const std::string token = new_token();
  TokenInfo info{0, name, "made with the user", unix_seconds(), 0};
  auto tx = db_->transaction();
  Status st = tx.insert_user({name, false});
  if (st.is_ok()) {
    auto id = tx.insert_token(info, hash_token(token));
    st = id.status();
    if (id.is_ok()) info.id = *id;
  }
  if (st.is_ok()) st = tx.commit();
  if (!st.is_ok()) return as_refusal(st, "name");
  return NewToken{info, token};
}

Result<User> Service::delete_user(const User& by, const std::string& name) {
  if (!by.admin) return admin_only("delete users");
  auto tx = db_->transaction();
  auto user = tx.user(name);
  if (!user) return missing("name", "user '" + name + "' does not exist", "see edt user list");
  if (user->admin) return conflict("name", "'" + name + "' is the admin; edtd keeps its admin", "delete another user");
  int clusters = 0, volumes = 0;
  for (const auto& c : tx.clusters()) clusters += c.owner == name ? 1 : 0;
  for (const auto& v : tx.volumes()) volumes += v.owner == name ? 1 : 0;
  if (clusters + volumes > 0)
    return conflict("name",
                    "user '" + name + "' still owns " + std::to_string(clusters) + " cluster(s) and " +
                        std::to_string(volumes) + " volume(s)",
                    "delete them first (edt cluster delete, edt volume delete; a cluster being deleted counts until "
                    "it is gone), then delete the user");
  Status st = tx.delete_user(name);
  if (st.is_ok()) st = tx.commit();
  if (!st.is_ok()) return as_refusal(st, "name");
  return *user;
}

Status Service::check_still_a_user(Database::Tx& tx, const User& by) {
  if (tx.user(by.name)) return Status::ok();
  return unauthenticated("Authorization", "user '" + by.name + "' has been deleted",
                         "ask the admin for a user and a token");
}

Status Service::check_token_owner(Database::Tx& tx, const User& by, const std::string& user) {
  // A user asking about another name learns nothing of it, not even whether it exists.
  if (!by.admin && by.name != user)
    return forbidden("name", "you may make, list and revoke only your own tokens", "use /users/" + by.name + "/tokens");
  if (!tx.user(user)) return missing("name", "user '" + user + "' does not exist", "see edt user list");
  return Status::ok();
}

Result<NewToken> Service::create_token(const User& by, const std::string& user, const TokenRequest& request) {
  const std::string token = new_token();
  const int64_t now = unix_seconds();
  TokenInfo info{0, user, request.description, now, request.expires_in ? now + request.expires_in->count() : 0};
  auto tx = db_->transaction();
  EDT_RETURN_IF_ERROR(check_token_owner(tx, by, user));
  auto id = tx.insert_token(info, hash_token(token));
  if (!id.is_ok()) return as_refusal(id.status(), "name");
  if (Status st = tx.commit(); !st.is_ok()) return as_refusal(st, "");
  info.id = *id;
  return NewToken{info, token};
}

Result<std::vector<TokenInfo>> Service::tokens(const User& by, const std::string& user) {
  auto tx = db_->lock();
  EDT_RETURN_IF_ERROR(check_token_owner(tx, by, user));
  return tx.tokens(user);
}

Result<TokenInfo> Service::revoke_token(const User& by, const std::string& user, int64_t id) {
  auto tx = db_->transaction();
  EDT_RETURN_IF_ERROR(check_token_owner(tx, by, user));
  std::optional<TokenInfo> found;
  int others_valid = 0;  // the user's unexpired tokens but this one
  const int64_t now = unix_seconds();
  for (auto& t : tx.tokens(user)) {
    if (t.id == id) found = std::move(t);
    else others_valid += t.expired(now) ? 0 : 1;
  }
  const std::string text = std::to_string(id);
  if (!found) return missing("id", user + " has no token " + text, "see edt token list");
  // Without a token the admin is locked out: no one else can make one.
  if (others_valid == 0 && tx.user(user)->admin && !found->expired(now))
    return conflict("id", "token " + text + " is the admin's last valid token",
                    "make another first (edt token create), then revoke this one");
  Status st = tx.delete_token(user, id);
  if (st.is_ok()) st = tx.commit();
  if (!st.is_ok()) return as_refusal(st, "id");
  return *found;
}

}  // namespace edt::control

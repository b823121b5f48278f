// Service: volumes, images, GPUs, users and tokens, jobs' ownership.
#include <filesystem>

#include "control/service/service.h"
#include "control/service/tokens.h"

namespace edt::control {

namespace fs = std::filesystem;

Status Service::set_inventory(const Image& builtin, const std::vector<Gpu>& gpus) {
  auto tx = db_->transaction();
  EDT_RETURN_IF_ERROR(tx.put_image(builtin));
  EDT_RETURN_IF_ERROR(tx.set_gpus(gpus));
  return tx.commit();
}

Result<std::optional<std::string>> Service::ensure_admin() {
  auto tx = db_->transaction();
  for (const auto& user : tx.users())
    if (user.admin) return std::optional<std::string>();
  const std::string token = new_token();
  EDT_RETURN_IF_ERROR(tx.insert_user({"admin", true}));
  EDT_RETURN_IF_ERROR(tx.insert_token("admin", hash_token(token)));
  EDT_RETURN_IF_ERROR(tx.commit());
  return std::optional<std::string>(token);
}

std::optional<User> Service::authenticate(const std::string& token) {
  return db_->lock().user_for_token(hash_token(token));
}

// Volumes.

Outcome<Volume> Service::create_volume(const User& by, const VolumeRequest& request) {
  Volume v{request.name, by.name, "", true};
  if (request.has_host_path) {
    if (!by.admin)
      return forbidden("host_path", "only the admin may register a host path",
                       "leave host_path out to get a directory edtd makes");
    if (request.host_path.empty() || request.host_path[0] != '/')
      return invalid("host_path", "host_path must be an absolute path", "e.g. /srv/datasets");
    v.host_path = request.host_path;
    v.managed = false;
    if (!fs::is_directory(v.host_path))
      return invalid("host_path", "host_path " + v.host_path + " is not a directory on the host",
                     "create it first, or give an existing directory");
  } else {
    v.host_path = options_.data_dir + "/volumes/" + v.name;
  }
  if (Status st = db_->lock().insert_volume(v); !st.is_ok()) return error_from_status(st, "name");
  std::error_code ec;
  if (v.managed) fs::create_directories(v.host_path, ec);
  if (ec) {
    // No directory, no volume: the row goes again.
    (void)db_->lock().delete_volume(v.name);
    return error_from_status(io_error("make " + v.host_path, ec.value()), "name");
  }
  return v;
}

Outcome<Volume> Service::delete_volume(const User& by, const std::string& name) {
  Volume v;
  {
    auto tx = db_->transaction();
    auto found = tx.volume(name);
    if (!found) return missing("name", "volume '" + name + "' does not exist", "see edt volume list");
    if (!by.admin && found->owner != by.name)
      return forbidden("name", "volume '" + name + "' belongs to another user", "use your own");
    for (const auto& c : tx.clusters()) {
      for (const auto& m : c.spec.mounts)
        if (m.volume == name)
          return conflict("name", "volume '" + name + "' is mounted by cluster " + c.spec.name + "; delete that cluster first",
                          "wait, or change what it depends on");
    }
    Status st = tx.delete_volume(name);
    if (st.is_ok()) st = tx.commit();
    if (!st.is_ok()) return error_from_status(st, "name");
    v = *found;
  }
  std::error_code ec;
  if (v.managed) fs::remove_all(v.host_path, ec);
  return v;
}

std::vector<Volume> Service::volumes(const User& by) {
  std::vector<Volume> out;
  for (auto& v : db_->lock().volumes())
    if (by.admin || v.owner == by.name) out.push_back(std::move(v));
  return out;
}

// Images and GPUs.

Outcome<Image> Service::register_image(const User& by, const Image& image) {
  if (!by.admin) return admin_only("register images");
  if (image.root.empty() || image.root[0] != '/' || !fs::is_directory(image.root + "/usr"))
    return invalid("root", "root '" + image.root + "' is not a directory with a /usr",
                   "give the absolute path of an unpacked root file system, or / for the host's");
  auto tx = db_->transaction();
  for (const auto& i : tx.images())
    if (i.name == image.name && i.builtin) return conflict("name", "image " + i.name + " is built in", "choose another name");
  Status st = tx.put_image(image);
  if (st.is_ok()) st = tx.commit();
  if (!st.is_ok()) return error_from_status(st, "name");
  return image;
}

std::vector<Image> Service::images() { return db_->lock().images(); }

std::vector<Gpu> Service::gpus() { return db_->lock().gpus(); }

// Users and tokens.

Outcome<std::vector<User>> Service::users(const User& by) {
  if (!by.admin) return admin_only("list users");
  return db_->lock().users();
}

Outcome<NewToken> Service::create_user(const User& by, const std::string& name) {
  if (!by.admin) return admin_only("create users");
  const std::string token = new_token();
  auto tx = db_->transaction();
  Status st = tx.insert_user({name, false});
  if (st.is_ok()) st = tx.insert_token(name, hash_token(token));
  if (st.is_ok()) st = tx.commit();
  if (!st.is_ok()) return error_from_status(st, "name");
  return NewToken{name, token};
}

Outcome<NewToken> Service::create_token(const User& by, const std::string& user) {
  if (!by.admin && by.name != user)
    return forbidden("name", "you may make tokens only for yourself", "ask the admin");
  const std::string token = new_token();
  if (Status st = db_->lock().insert_token(user, hash_token(token)); !st.is_ok()) return error_from_status(st, "name");
  return NewToken{user, token};
}

// Jobs.

Outcome<Job> Service::job(const User& by, int64_t id) {
  auto job = db_->lock().job(id);
  const std::string text = std::to_string(id);
  if (!job) return missing("id", "job " + text + " does not exist", "use the id that POST .../jobs returned");
  if (!by.admin && job->owner != by.name)
    return forbidden("id", "job " + text + " belongs to another user", "use one of your own jobs");
  return *job;
}

}  // namespace edt::control

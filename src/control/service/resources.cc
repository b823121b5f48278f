// Service: volumes, images, GPUs, jobs' ownership.
#include <filesystem>
#include <set>

#include "common/log.h"
#include "control/service/service.h"

namespace edt::control {

namespace fs = std::filesystem;

Status Service::set_inventory(const Image& builtin, const std::vector<Gpu>& gpus) {
  auto tx = db_->transaction();
  EDT_RETURN_IF_ERROR(tx.put_image(builtin));
  EDT_RETURN_IF_ERROR(tx.set_gpus(gpus));
  return tx.commit();
}

// Volumes.

Result<Volume> Service::create_volume(const User& by, const VolumeRequest& request) {
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
  {
    auto tx = db_->transaction();
    EDT_RETURN_IF_ERROR(check_still_a_user(tx, by));
    Status st = tx.insert_volume(v);
    if (st.is_ok()) st = tx.commit();
    if (!st.is_ok()) return as_refusal(st, "name");
  }
  if (Status st = v.managed ? make_volume_dir(v) : Status::ok(); !st.is_ok()) {
    // No directory, no volume: the row goes again.
    (void)db_->lock().delete_volume(v.name);
    return as_refusal(st, "name");
  }
  return v;
}

std::string Service::volume_bound_text(const Volume& v) const {
  std::error_code ec;
  const auto bytes = v.managed ? fs::file_size(volume_disk_image(v.name), ec) : 0;
  if (ec || bytes == 0) return "";
  return ": it is bounded to " + std::to_string(bytes >> 20) + " MiB (edtd's --volume-size)";
}

std::string Service::volume_disk_image(const std::string& name) const {
  return options_.data_dir + "/volume-disks/" + name + ".disk";
}

Status Service::make_volume_dir(const Volume& v) const {
  std::error_code ec;
  const std::string under = options_.volume_disk.bytes > 0 ? options_.data_dir + "/volume-disks" : v.host_path;
  fs::create_directories(under, ec);
  if (ec) return io_error("make " + under, ec.value());
  if (options_.volume_disk.bytes == 0) return Status::ok();
  return make_bounded_disk(volume_disk_image(v.name), v.host_path, options_.volume_disk);
}

Status Service::remove_volume_dir(const Volume& v) const {
  // Lazily unmounted: a process still holding a file of it keeps the disk
  // until it lets go. A plain directory has no disk file: nothing to do.
  Status st = remove_bounded_disk(volume_disk_image(v.name), v.host_path);
  std::error_code ec;
  fs::remove_all(v.host_path, ec);
  return st;
}

Status Service::remount_volumes() {
  for (const auto& v : db_->lock().volumes()) {
    if (!v.managed || !fs::exists(volume_disk_image(v.name))) continue;
    EDT_RETURN_IF_ERROR(mount_bounded_disk(volume_disk_image(v.name), v.host_path)
                            .with_context("remount volume '" + v.name + "'"));
  }
  return Status::ok();
}

Result<Volume> Service::delete_volume(const User& by, const std::string& name) {
  Volume v;
  {
    auto tx = db_->transaction();
    auto found = tx.volume(name);
    // Another user's volume is answered for as a missing one.
    if (!found || (!by.admin && found->owner != by.name))
      return missing("name", "volume '" + name + "' does not exist", "see edt volume list");
    for (const auto& c : tx.clusters()) {
      const bool visible = by.admin || c.owner == by.name;
      for (const auto& m : c.spec.mounts)
        if (m.volume == name)
          return conflict("name", "volume '" + name + "' is mounted by " +
                                      (visible ? "cluster " + c.spec.name : std::string("another user's cluster")) +
                                      "; delete that cluster first",
                          "wait, or change what it depends on");
    }
    Status st = tx.delete_volume(name);
    if (st.is_ok()) st = tx.commit();
    if (!st.is_ok()) return as_refusal(st, "name");
    v = *found;
  }
  if (v.managed) {
    if (Status st = remove_volume_dir(v); !st.is_ok())
      log::warn("volume '{}' is deleted, but its disk stays: {}", v.name, st.to_string());
  }
  return v;
}

std::vector<Volume> Service::volumes(const User& by) {
  std::vector<Volume> out;
  for (auto& v : db_->lock().volumes())
    if (by.admin || v.owner == by.name) out.push_back(std::move(v));
  return out;
}

Result<Volume> Service::visible_volume(const User& by, const std::string& name) {
  auto found = db_->lock().volume(name);
  if (!found || (!by.admin && found->owner != by.name))
    return missing("name", "volume '" + name + "' does not exist", "see edt volume list");
  return *found;
}

Result<VolumeFile> Service::upload_file(const User& by, const std::string& volume, const std::string& path,
                                         std::string_view bytes) {
  auto found = visible_volume(by, volume);
  if (!found.is_ok()) return found.status();
  auto written = write_volume_file(found->host_path, path, bytes);
  if (!written.is_ok() && written.status().code() == StatusCode::kResourceExhausted)
    return too_large("path",
                     "volume '" + volume + "' has no room for '" + path + "' (" + std::to_string(bytes.size()) +
                         " bytes)" + volume_bound_text(*found),
                     "delete files in the volume, or upload into a larger volume");
  if (!written.is_ok()) return written.status();
  return VolumeFile{volume, path, *written};
}

Result<VolumeListing> Service::volume_files(const User& by, const std::string& volume, const std::string& path,
                                            size_t limit) {
  EDT_ASSIGN_OR_RETURN(Volume found, visible_volume(by, volume));
  return list_volume_dir(found.host_path, path, limit);
}

Result<OpenedVolumeFile> Service::open_volume_file(const User& by, const std::string& volume, const std::string& path) {
  EDT_ASSIGN_OR_RETURN(Volume found, visible_volume(by, volume));
  return edt::control::open_volume_file(found.host_path, path);
}

Result<int64_t> Service::delete_volume_file(const User& by, const std::string& volume, const std::string& path) {
  EDT_ASSIGN_OR_RETURN(Volume found, visible_volume(by, volume));
  return delete_volume_path(found.host_path, path);
}

// Images and GPUs.

Result<Image> Service::register_image(const User& by, const Image& image) {
  if (!by.admin) return admin_only("register images");
  if (image.root.empty() || image.root[0] != '/' || !fs::is_directory(image.root + "/usr"))
    return invalid("root", "root '" + image.root + "' is not a directory with a /usr",
                   "give the absolute path of an unpacked root file system, or / for the host's");
  auto tx = db_->transaction();
  for (const auto& i : tx.images())
    if (i.name == image.name && i.builtin) return conflict("name", "image " + i.name + " is built in", "choose another name");
  Status st = tx.put_image(image);
  if (st.is_ok()) st = tx.commit();
  if (!st.is_ok()) return as_refusal(st, "name");
  return image;
}

std::vector<Image> Service::images() { return db_->lock().images(); }

std::vector<Gpu> Service::gpus(const User& by) {
  auto tx = db_->lock();
  std::vector<Gpu> gpus = tx.gpus();
  if (by.admin) return gpus;
  std::set<std::string> mine;
  for (const auto& c : tx.clusters())
    if (c.owner == by.name)
      for (const auto& k : c.containers) mine.insert(k.name);
  for (auto& g : gpus)
    if (!mine.count(g.holder)) g.holder.clear();
  return gpus;
}

// Jobs.

Status Service::check_has(const void* part, const std::string& what) const {
  if (part) return Status::ok();
  return internal("", "this edtd was started without " + what, "see edtd's log");
}

Result<Job> Service::job(const User& by, int64_t id) {
  auto job = db_->lock().job(id);
  const std::string text = std::to_string(id);
  // Another user's job is answered for as a missing one.
  if (!job || (!by.admin && job->owner != by.name))
    return missing("id", "job " + text + " does not exist", "use the id that POST .../jobs returned");
  return options_.jobs ? options_.jobs->refresh(*job) : *job;
}

Result<Job> Service::start_job(const User& by, const std::string& cluster, const JobRequest& request) {
  EDT_RETURN_IF_ERROR(check_has(options_.jobs, "a job runner"));
  auto found = this->cluster(by, cluster);
  if (!found.is_ok()) return found.status();
  auto records = containers(by, cluster);
  if (!records.is_ok()) return records.status();
  // As Jupyter does: from the first volume, where the user's files are.
  const auto& mounts = found->spec.mounts;
  const std::string cwd = request.cwd.value_or(mounts.empty() ? std::string() : mounts.front().path);
  return options_.jobs->start(
      *found, *records, {request.container.value_or(container_name(cluster, 0)), request.command, cwd, by.name});
}

Result<std::vector<Job>> Service::jobs(const User& by, const std::string& cluster) {
  EDT_RETURN_IF_ERROR(check_has(options_.jobs, "a job runner"));
  auto found = this->cluster(by, cluster);
  if (!found.is_ok()) return found.status();
  return options_.jobs->jobs_of(found->spec.name);
}

Result<Job> Service::delete_job(const User& by, int64_t id) {
  EDT_RETURN_IF_ERROR(check_has(options_.jobs, "a job runner"));
  auto found = job(by, id);
  if (!found.is_ok()) return found;
  return options_.jobs->remove(*found);
}

Result<JobLog> Service::job_log(const User& by, int64_t id) {
  EDT_RETURN_IF_ERROR(check_has(options_.jobs, "a job runner"));
  auto found = job(by, id);
  if (!found.is_ok()) return found.status();
  JobRunner* runner = options_.jobs;
  auto running = [runner, id] {
    const auto now = runner->current(id);
    return now && now->state == JobState::kRunning;
  };
  return JobLog{*found, runner->log_path(id), running};
}

}  // namespace edt::control

#include "control/reconcile/reconciler.h"

#include <signal.h>

#include <algorithm>

namespace edt::control {

using Clock = std::chrono::steady_clock;

namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::map<std::string, std::string> container_env(const ClusterSpec& spec, const ContainerStatus& container,
                                                 const std::map<std::string, std::string>& base) {
  std::map<std::string, std::string> env = base;
  env["HOME"] = "/root";
  env["USER"] = "root";
  env["EDT_CLUSTER"] = spec.name;
  env["EDT_CONTAINER"] = container.name;
  env["EDT_FRAMEWORK"] = spec.framework;
  std::string devices;
  for (int gpu : container.gpus) devices += (devices.empty() ? "" : ",") + std::to_string(gpu);
  env["CUDA_VISIBLE_DEVICES"] = devices;
  if (spec.framework == "megatron") {
    env["MASTER_ADDR"] = container_name(spec.name, 0);
    env["MASTER_PORT"] = "6000";
    env["NNODES"] = std::to_string(spec.containers);
    env["NODE_RANK"] = std::to_string(container.index);
  }
  for (const auto& [key, value] : spec.env) env[key] = value;
  return env;
}

Reconciler::Reconciler(ControlStore* store, Backend* backend, ReconcilerOptions options)
    : store_(store), backend_(backend), options_(std::move(options)) {}

Reconciler::~Reconciler() { stop(); }

void Reconciler::start() {
  for (const auto& name : store_->cluster_names()) enqueue(name);
  worker_ = std::thread([this] { run(); });
}

void Reconciler::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void Reconciler::enqueue(const std::string& cluster) { schedule(cluster, Clock::now()); }

void Reconciler::schedule(const std::string& cluster, Clock::time_point when) {
  {
    std::lock_guard lock(mu_);
    auto it = due_.find(cluster);
    if (it == due_.end() || when < it->second) due_[cluster] = when;
  }
  cv_.notify_all();
}

ReconcilerStats Reconciler::stats() {
  std::lock_guard lock(mu_);
  return stats_;
}

void Reconciler::run() {
  auto next_resync = Clock::now() + options_.resync;
  std::unique_lock lock(mu_);
  while (!stopping_) {
    auto now = Clock::now();
    if (now >= next_resync) {
      lock.unlock();
      for (const auto& name : store_->cluster_names()) schedule(name, now);
      if (options_.on_resync) options_.on_resync();
      lock.lock();
      next_resync = now + options_.resync;
    }
    auto first = std::min_element(due_.begin(), due_.end(), [](auto& a, auto& b) { return a.second < b.second; });
    auto wake = next_resync;
    if (first != due_.end()) wake = std::min(wake, first->second);
    if (wake > now) {
      cv_.wait_until(lock, wake);
      continue;
    }
    std::string key = first->first;
    due_.erase(first);
    lock.unlock();
    auto started = Clock::now();
    Result<bool> result = reconcile(key);
    double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    lock.lock();
    stats_.passes++;
    stats_.seconds += seconds;
    if (!result.is_ok()) {
      stats_.errors++;
      int failures = ++failures_[key];
      auto delay = std::min<std::chrono::milliseconds>(options_.max_backoff,
                                                       std::chrono::milliseconds(100LL << std::min(failures, 10)));
      fprintf(stderr, "edtd: reconcile %s: %s (retry in %lld ms)\n", key.c_str(),
              result.status().to_string().c_str(), static_cast<long long>(delay.count()));
      auto when = Clock::now() + delay;
      auto it = due_.find(key);
      if (it == due_.end() || when < it->second) due_[key] = when;
    } else {
      failures_.erase(key);
      if (!*result) {
        auto when = Clock::now() + options_.poll;
        auto it = due_.find(key);
        if (it == due_.end() || when < it->second) due_[key] = when;
      }
    }
  }
}

SandboxSpec Reconciler::sandbox_spec(const Cluster& cluster, const ContainerRecord& record, const Catalog& catalog) {
  const ClusterSpec& spec = cluster.spec;
  SandboxSpec s;
  s.cluster = spec.name;
  s.name = record.status.name;
  s.address = record.status.address;
  auto image = catalog.images.find(spec.image);
  s.image_root = image == catalog.images.end() ? "/" : image->second.root;
  s.shm_bytes = spec.shm_bytes;
  for (const auto& m : spec.mounts) {
    auto volume = catalog.volumes.find(m.volume);
    if (volume != catalog.volumes.end()) s.mounts.push_back({volume->second.host_path, m.path, m.read_only});
  }
  s.env = container_env(spec, record.status, options_.base_env);
  s.job_dir = spec.framework == "deepspeed";
  return s;
}

ClusterFiles Reconciler::cluster_files(const std::vector<ContainerRecord>& records) {
  ClusterFiles files;
  files.hosts = "127.0.0.1\tlocalhost\n";
  std::vector<ContainerStatus> running;
  for (const auto& r : records) {
    if (r.status.leaving) continue;
    files.hosts += r.status.address + "\t" + r.status.name + "\n";
    if (r.status.phase == phase::kRunning) running.push_back(r.status);
  }
  files.hostfile = render_hostfile(running);
  for (const auto& c : running)
    files.discover += c.name + ":" + std::to_string(c.gpus.empty() ? 1 : c.gpus.size()) + "\n";
  return files;
}

Status Reconciler::fail_start(const Cluster& cluster, const std::vector<ContainerRecord>& records,
                              const std::string& reason) {
  std::vector<std::string> undo;
  int keep = 0;
  for (const auto& r : records) {
    if (r.status.leaving) continue;
    if (!cluster.ever_running || r.status.phase != phase::kRunning) {
      undo.push_back(r.status.name);
    } else {
      ++keep;
    }
  }
  EDT_RETURN_IF_ERROR(store_->mark_leaving(undo));
  EDT_RETURN_IF_ERROR(store_->add_event(cluster.spec.name, "Failed", reason));
  if (!cluster.ever_running) return store_->update_cluster_phase(cluster.spec.name, phase::kFailed, reason, false);
  EDT_RETURN_IF_ERROR(store_->set_spec_containers(cluster.spec.name, keep));
  return store_->update_cluster_phase(cluster.spec.name, phase::kScaling,
                                      "scale to " + std::to_string(cluster.spec.containers) + " failed: " + reason +
                                          "; back to " + std::to_string(keep),
                                      true);
}

Result<bool> Reconciler::reconcile(const std::string& name) {
  auto cluster = store_->cluster(name);
  if (!cluster) return true;
  std::vector<ContainerRecord> records = store_->containers(name);
  const int64_t now = now_ms();
  bool settled = true;
  if (!cluster->deleting && cluster->phase != phase::kFailed) EDT_RETURN_IF_ERROR(backend_->prepare_cluster(name));

  // Containers that leave are first taken out of the shared files, then stopped.
  bool signal_needed = std::any_of(records.begin(), records.end(),
                                   [](auto& r) { return r.status.leaving && r.stopping_since_ms == 0; });
  if (signal_needed && !cluster->deleting) EDT_RETURN_IF_ERROR(backend_->write_cluster_files(name, cluster_files(records)));
  std::vector<ContainerRecord> remaining;
  for (auto& r : records) {
    if (!r.status.leaving) {
      remaining.push_back(r);
      continue;
    }
    if (backend_->observe(r.status.name, r.sandbox) != SandboxState::kGone) {
      settled = false;
      if (r.stopping_since_ms == 0) {
        EDT_RETURN_IF_ERROR(backend_->signal(r.sandbox, SIGTERM));
        r.stopping_since_ms = now;
        r.status.phase = phase::kStopping;
        EDT_RETURN_IF_ERROR(store_->update_container(r));
      } else if (now - r.stopping_since_ms >= options_.grace.count()) {
        EDT_RETURN_IF_ERROR(backend_->signal(r.sandbox, SIGKILL));
      }
      remaining.push_back(r);
      continue;
    }
    EDT_RETURN_IF_ERROR(backend_->remove(r.status.name));
    EDT_RETURN_IF_ERROR(store_->delete_container(r.status.name));
  }
  records = std::move(remaining);

  if (cluster->deleting || cluster->phase == phase::kFailed) {
    if (!records.empty()) return false;
    EDT_RETURN_IF_ERROR(backend_->remove_cluster(name));
    if (cluster->deleting) EDT_RETURN_IF_ERROR(store_->delete_cluster(name));
    return true;
  }

  Catalog catalog = store_->catalog({cluster->owner, true});
  for (auto& r : records) {
    if (r.status.leaving) continue;
    SandboxState state = backend_->observe(r.status.name, r.sandbox);
    if (state == SandboxState::kGone) {
      const bool was_started = r.sandbox.pid != 0;
      if (was_started && r.status.phase != phase::kRunning) {
        EDT_RETURN_IF_ERROR(fail_start(*cluster, records, "container " + r.status.name + " exited while starting"));
        return false;
      }
      if (was_started) {
        r.status.message = "restarted after it stopped";
        EDT_RETURN_IF_ERROR(store_->add_event(name, "Restarted", r.status.name + " stopped and was started again"));
      }
      auto ref = backend_->start(sandbox_spec(*cluster, r, catalog));
      if (!ref.is_ok()) {
        EDT_RETURN_IF_ERROR(fail_start(*cluster, records, ref.status().message()));
        return false;
      }
      r.sandbox = *ref;
      r.status.phase = phase::kCreating;
      r.status.started_at = 0;
      r.creating_since_ms = now;
      EDT_RETURN_IF_ERROR(store_->update_container(r));
      settled = false;
    } else if (state == SandboxState::kStarting) {
      if (now - r.creating_since_ms > options_.start_timeout.count()) {
        EDT_RETURN_IF_ERROR(fail_start(*cluster, records, "container " + r.status.name + " did not start within " +
                                                              std::to_string(options_.start_timeout.count()) + " ms"));
        return false;
      }
      settled = false;
    } else if (r.status.phase != phase::kRunning) {
      r.status.phase = phase::kRunning;
      r.status.started_at = now / 1000;
      EDT_RETURN_IF_ERROR(store_->update_container(r));
    }
  }
  EDT_RETURN_IF_ERROR(backend_->write_cluster_files(name, cluster_files(records)));

  bool all_running = std::all_of(records.begin(), records.end(),
                                 [](auto& r) { return !r.status.leaving && r.status.phase == phase::kRunning; });
  std::string next_phase = all_running                ? phase::kRunning
                           : cluster->ever_running    ? phase::kScaling
                                                      : phase::kCreating;
  std::string message = cluster->message;
  if (all_running) {
    message = std::to_string(records.size()) + " of " + std::to_string(cluster->spec.containers) + " containers Running";
    if (cluster->message.find("failed") != std::string::npos) message = cluster->message;
  }
  if (next_phase != cluster->phase || message != cluster->message)
    EDT_RETURN_IF_ERROR(store_->update_cluster_phase(name, next_phase, message, cluster->ever_running || all_running));
  if (all_running && cluster->phase != phase::kRunning) EDT_RETURN_IF_ERROR(store_->add_event(name, "Running", message));
  return settled && all_running;
}

}  // namespace edt::control

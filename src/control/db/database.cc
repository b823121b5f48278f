#include "control/db/database.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "control/db/schema.h"
#include "control/db/sqlite.h"
#include "control/model/cluster_json.h"

namespace edt::control {

using nlohmann::json;
using sqlite::Stmt;

namespace {

// Row mappers: the columns each type is read from, and the function that
// reads them, shared by every query of that type.

// A spec is kept as its API form plus the exact shm and memory sizes (the
// API's "shm" and "memory" are written for people and not read back; its
// "cpus" is exact, and read back as it is).
std::string spec_to_text(const ClusterSpec& spec) {
  json j = spec_to_json(spec);
  j["shm_bytes"] = spec.shm_bytes;
  j["memory_bytes"] = spec.memory_bytes;
  return j.dump();
}

// The exact size `key` of a stored spec, taken out of it; 0 if absent.
uint64_t take_bytes(json& j, const char* key) {
  uint64_t bytes = j.contains(key) && j[key].is_number_unsigned() ? j[key].get<uint64_t>() : 0;
  j.erase(key);
  return bytes;
}

// A stored spec passed parse_cluster_spec() when it was made, so one that no
// longer does means a damaged database: the cluster keeps an empty spec
// with its name, and the reason is logged.
ClusterSpec spec_from_text(const std::string& name, const std::string& text) {
  json j = json::parse(text, nullptr, false);
  ClusterSpec spec;
  uint64_t shm_bytes = kDefaultShmBytes, memory_bytes = 0;
  if (j.is_object()) {
    if (uint64_t bytes = take_bytes(j, "shm_bytes")) shm_bytes = bytes;
    memory_bytes = take_bytes(j, "memory_bytes");
    j.erase("shm");
    j.erase("memory");
  }
  if (Status r = parse_cluster_spec(j, &spec); !r.is_ok()) {
    log::error("the stored spec of cluster {} is damaged ({}: {})", name, r.field(), r.message());
    spec = ClusterSpec{};
    spec.name = name;
    return spec;
  }
  spec.shm_bytes = shm_bytes;
  spec.memory_bytes = memory_bytes;
  return spec;
}

std::vector<int> gpus_from_text(const std::string& text) {
  std::vector<int> out;
  json j = json::parse(text, nullptr, false);
  if (!j.is_array()) return out;
  for (const auto& g : j)
    if (g.is_number_integer()) out.push_back(g.get<int>());
  return out;
}

Phase phase_from_text(const std::string& text) { return parse_phase(text).value_or(Phase::kPending); }

constexpr const char* kContainerColumns =
    "name, idx, address, gpus, phase, message, started_at, leaving, pid, pid_start, stopping_since, creating_since, "
    "draining_since, node, slurm_job";

ContainerRecord read_container(Stmt& s, int at = 0) {
  ContainerRecord r;
  r.status.name = s.text(at + 0);
  r.status.index = static_cast<int>(s.i64(at + 1));
  r.status.address = s.text(at + 2);
  r.status.gpus = gpus_from_text(s.text(at + 3));
  r.status.phase = phase_from_text(s.text(at + 4));
  r.status.message = s.text(at + 5);
  r.status.started_at = s.i64(at + 6);
  r.status.leaving = s.i64(at + 7) != 0;
  r.sandbox = {s.i64(at + 8), static_cast<uint64_t>(s.i64(at + 9))};
  r.stopping_since_ms = s.i64(at + 10);
  r.creating_since_ms = s.i64(at + 11);
  r.draining_since_ms = s.i64(at + 12);
  r.status.node = s.text(at + 13);
  r.status.slurm_job = s.i64(at + 14);
  return r;
}

constexpr const char* kClusterColumns =
    "name, spec, owner, phase, message, scale_failure, deleting, ever_running, created_at, queued_containers, "
    "queued_since, queue_position, queue_reason, (SELECT team FROM users WHERE users.name = clusters.owner)";

Cluster read_cluster(Stmt& s) {
  Cluster c;
  c.spec = spec_from_text(s.text(0), s.text(1));
  c.owner = s.text(2);
  c.phase = phase_from_text(s.text(3));
  c.message = s.text(4);
  c.scale_failure = s.text(5);
  c.deleting = s.i64(6) != 0;
  c.ever_running = s.i64(7) != 0;
  c.created_at = s.i64(8);
  c.queued = {static_cast<int>(s.i64(9)), s.i64(10), static_cast<int>(s.i64(11)), s.text(12)};
  c.team = s.text(13);
  return c;
}

User read_user(Stmt& s) { return User{s.text(0), s.i64(1) != 0, s.text(2)}; }

constexpr const char* kVolumeColumns = "name, owner, host_path, managed";

Volume read_volume(Stmt& s) { return Volume{s.text(0), s.text(1), s.text(2), s.i64(3) != 0}; }

constexpr const char* kJobColumns =
    "id, cluster, container, owner, command, state, exit_code, message, pid, pid_start, created_at, finished_at";

Job read_job(Stmt& s) {
  Job job;
  job.id = s.i64(0);
  job.cluster = s.text(1);
  job.container = s.text(2);
  job.owner = s.text(3);
  job.command = s.text(4);
  job.state = parse_job_state(s.text(5)).value_or(JobState::kFailed);
  job.exit_code = static_cast<int>(s.i64(6));
  job.message = s.text(7);
  job.process = {s.i64(8), static_cast<uint64_t>(s.i64(9))};
  job.created_at = s.i64(10);
  job.finished_at = s.i64(11);
  return job;
}

std::string select(const char* columns, const std::string& rest) { return std::string("SELECT ") + columns + " " + rest; }

// A write that names one row: NotFound when it changed none.
Status expect_changed(sqlite3* db, Status st, const std::string& what) {
  if (st.is_ok() && sqlite3_changes(db) == 0) return not_found(what + " does not exist");
  return st;
}

// The store is 0600: made so before SQLite opens it, since SQLite makes its
// -wal, -shm and -journal files with the database's mode; those an earlier
// edtd left wider are narrowed too.
Status make_private(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return io_error("open database " + path, errno);
  const bool narrowed = ::fchmod(fd, 0600) == 0;
  ::close(fd);
  if (!narrowed) return io_error("chmod 0600 " + path, errno);
  for (const char* suffix : {"-wal", "-shm", "-journal"}) ::chmod((path + suffix).c_str(), 0600);
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Database>> Database::open(const std::string& path) {
  EDT_RETURN_IF_ERROR(make_private(path));
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return Status(StatusCode::kIoError, "open database " + path + ": " + message);
  }
  std::unique_ptr<Database> database(new Database(db));
  sqlite3_busy_timeout(db, 5000);
  EDT_RETURN_IF_ERROR(sqlite::exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"));
  EDT_RETURN_IF_ERROR(migrate(db).with_context(path));
  return database;
}

Database::~Database() { sqlite3_close(db_); }

std::unique_lock<std::mutex> Database::acquire() {
  EDT_CHECK_MSG(holder_.load() != std::this_thread::get_id(), "a second Database::Tx on the thread that holds one");
  std::unique_lock lock(mu_);
  holder_ = std::this_thread::get_id();
  return lock;
}

Database::Tx Database::lock() { return Tx(this, acquire(), false); }

Database::Tx Database::transaction() { return Tx(this, acquire(), true); }

Database::Tx::Tx(Database* owner, std::unique_lock<std::mutex> lock, bool transaction)
    : owner_(owner), lock_(std::move(lock)), db_(owner->db_), open_transaction_(transaction) {
  if (transaction) (void)sqlite::exec(db_, "BEGIN IMMEDIATE");
}

Database::Tx::Tx(Tx&& other) noexcept
    : owner_(other.owner_), lock_(std::move(other.lock_)), db_(other.db_), open_transaction_(other.open_transaction_) {
  other.open_transaction_ = false;
}

Database::Tx::~Tx() {
  if (open_transaction_) (void)sqlite::exec(db_, "ROLLBACK");
  if (lock_.owns_lock()) owner_->holder_ = std::thread::id();
}

Status Database::Tx::commit() {
  if (!open_transaction_) return Status::ok();
  open_transaction_ = false;
  return sqlite::exec(db_, "COMMIT").with_context("commit");
}

// Users and tokens.

Status Database::Tx::set_user_team(const std::string& user, const std::string& team) {
  Stmt s(db_, "UPDATE users SET team = ? WHERE name = ?");
  return expect_changed(db_, s.bind(1, team).bind(2, user).run(), "user '" + user + "'");
}

// Teams and quotas.

Status Database::Tx::insert_team(const std::string& name) {
  Stmt s(db_, "INSERT INTO teams(name) VALUES(?)");
  Status st = s.bind(1, name).run();
  if (!st.is_ok() && s.constraint_failed()) return already_exists("team '" + name + "' exists");
  return st;
}

std::vector<std::string> Database::Tx::teams() {
  std::vector<std::string> out;
  Stmt s(db_, "SELECT name FROM teams ORDER BY name");
  while (s.step()) out.push_back(s.text(0));
  return out;
}

Status Database::Tx::delete_team(const std::string& name) {
  EDT_RETURN_IF_ERROR(Stmt(db_, "DELETE FROM quotas WHERE team = ?").bind(1, name).run());
  EDT_RETURN_IF_ERROR(Stmt(db_, "UPDATE users SET team = '' WHERE team = ?").bind(1, name).run());
  Stmt s(db_, "DELETE FROM teams WHERE name = ?");
  return expect_changed(db_, s.bind(1, name).run(), "team '" + name + "'");
}

Status Database::Tx::put_quota(const Quota& quota) {
  Stmt s(db_, "INSERT INTO quotas(team, model, guaranteed, borrow_limit) VALUES(?, ?, ?, ?) "
              "ON CONFLICT(team, model) DO UPDATE SET guaranteed = excluded.guaranteed, "
              "borrow_limit = excluded.borrow_limit");
  return s.bind(1, quota.team).bind(2, quota.model).bind(3, quota.guaranteed).bind(4, quota.borrow_limit).run();
}

Status Database::Tx::delete_quota(const std::string& team, const std::string& model) {
  Stmt s(db_, "DELETE FROM quotas WHERE team = ? AND model = ?");
  return expect_changed(db_, s.bind(1, team).bind(2, model).run(), "quota of team '" + team + "' for " + model);
}

std::vector<Quota> Database::Tx::quotas() {
  std::vector<Quota> out;
  Stmt s(db_, "SELECT team, model, guaranteed, borrow_limit FROM quotas ORDER BY team, model");
  while (s.step())
    out.push_back({s.text(0), s.text(1), static_cast<int>(s.i64(2)), static_cast<int>(s.i64(3))});
  return out;
}

Status Database::Tx::insert_user(const User& user) {
  Stmt s(db_, "INSERT INTO users(name, admin) VALUES(?, ?)");
  s.bind(1, user.name).bind(2, user.admin);
  Status st = s.run();
  if (!st.is_ok() && s.constraint_failed()) return already_exists("user '" + user.name + "' exists");
  if (!st.is_ok()) return st;
  return Stmt(db_, "INSERT INTO user_ranges(user) VALUES(?)").bind(1, user.name).run();
}

std::vector<User> Database::Tx::users() {
  std::vector<User> out;
  Stmt s(db_, "SELECT name, admin, team FROM users ORDER BY name");
  while (s.step()) out.push_back(read_user(s));
  return out;
}

std::optional<User> Database::Tx::user(const std::string& name) {
  Stmt s(db_, "SELECT name, admin, team FROM users WHERE name = ?");
  s.bind(1, name);
  if (!s.step()) return std::nullopt;
  return read_user(s);
}

Status Database::Tx::delete_user(const std::string& name) {
  EDT_RETURN_IF_ERROR(Stmt(db_, "DELETE FROM tokens WHERE user = ?").bind(1, name).run());
  EDT_RETURN_IF_ERROR(Stmt(db_, "DELETE FROM jobs WHERE owner = ?").bind(1, name).run());
  EDT_RETURN_IF_ERROR(Stmt(db_, "DELETE FROM user_ranges WHERE user = ?").bind(1, name).run());
  Stmt s(db_, "DELETE FROM users WHERE name = ?");
  return expect_changed(db_, s.bind(1, name).run(), "user '" + name + "'");
}

Result<int64_t> Database::Tx::insert_token(const TokenInfo& token, const std::string& token_hash) {
  Stmt s(db_, "INSERT INTO tokens(hash, user, description, created_at, expires_at) VALUES(?, ?, ?, ?, ?)");
  s.bind(1, token_hash).bind(2, token.user).bind(3, token.description).bind(4, token.created_at);
  Status st = s.bind(5, token.expires_at).run();
  if (!st.is_ok() && s.constraint_failed()) return not_found("user '" + token.user + "' does not exist");
  EDT_RETURN_IF_ERROR(st);
  return static_cast<int64_t>(sqlite3_last_insert_rowid(db_));
}

std::vector<TokenInfo> Database::Tx::tokens(const std::string& user) {
  std::vector<TokenInfo> out;
  Stmt s(db_, "SELECT id, user, description, created_at, expires_at FROM tokens WHERE user = ? ORDER BY id");
  s.bind(1, user);
  while (s.step()) out.push_back({s.i64(0), s.text(1), s.text(2), s.i64(3), s.i64(4)});
  return out;
}

Status Database::Tx::delete_token(const std::string& user, int64_t id) {
  Stmt s(db_, "DELETE FROM tokens WHERE user = ? AND id = ?");
  return expect_changed(db_, s.bind(1, user).bind(2, id).run(), "token " + std::to_string(id) + " of " + user);
}

std::optional<User> Database::Tx::user_for_token(const std::string& token_hash, int64_t now) {
  Stmt s(db_, "SELECT u.name, u.admin, u.team FROM tokens t JOIN users u ON u.name = t.user "
              "WHERE t.hash = ? AND (t.expires_at = 0 OR t.expires_at > ?)");
  s.bind(1, token_hash).bind(2, now);
  if (!s.step()) return std::nullopt;
  return read_user(s);
}

// Images, volumes and GPUs.

Status Database::Tx::put_image(const Image& image) {
  Stmt s(db_, "INSERT OR REPLACE INTO images(name, root, frameworks, builtin, config) VALUES(?, ?, ?, ?, ?)");
  s.bind(1, image.name).bind(2, image.root).bind(3, json(image.frameworks).dump()).bind(4, image.builtin);
  s.bind(5, image_config_text(image));
  return s.run();
}

Status Database::Tx::delete_image(const std::string& name) {
  Stmt s(db_, "DELETE FROM images WHERE name = ?");
  s.bind(1, name);
  return s.run();
}

std::vector<Image> Database::Tx::images() {
  std::vector<Image> out;
  Stmt s(db_, "SELECT name, root, frameworks, builtin, config FROM images ORDER BY name");
  while (s.step()) {
    Image image{s.text(0), s.text(1), {}, s.i64(3) != 0};
    read_image_config(s.text(4), &image);
    json frameworks = json::parse(s.text(2), nullptr, false);
    if (frameworks.is_array())
      for (const auto& f : frameworks)
        if (f.is_string()) image.frameworks.push_back(f.get<std::string>());
    out.push_back(std::move(image));
  }
  return out;
}

Status Database::Tx::insert_volume(const Volume& volume) {
  Stmt s(db_, "INSERT INTO volumes(name, owner, host_path, managed) VALUES(?, ?, ?, ?)");
  s.bind(1, volume.name).bind(2, volume.owner).bind(3, volume.host_path).bind(4, volume.managed);
  Status st = s.run();
  if (!st.is_ok() && s.constraint_failed()) return already_exists("volume '" + volume.name + "' exists");
  return st;
}

std::vector<Volume> Database::Tx::volumes() {
  std::vector<Volume> out;
  Stmt s(db_, select(kVolumeColumns, "FROM volumes ORDER BY name"));
  while (s.step()) out.push_back(read_volume(s));
  return out;
}

std::optional<Volume> Database::Tx::volume(const std::string& name) {
  Stmt s(db_, select(kVolumeColumns, "FROM volumes WHERE name = ?"));
  s.bind(1, name);
  if (!s.step()) return std::nullopt;
  return read_volume(s);
}

Status Database::Tx::delete_volume(const std::string& name) {
  Stmt s(db_, "DELETE FROM volumes WHERE name = ?");
  return expect_changed(db_, s.bind(1, name).run(), "volume '" + name + "'");
}

Status Database::Tx::set_gpus(const std::vector<Gpu>& gpus) {
  EDT_RETURN_IF_ERROR(sqlite::exec(db_, "DELETE FROM gpus"));
  for (const auto& gpu : gpus) {
    Stmt s(db_, "INSERT INTO gpus(idx, model, simulated) VALUES(?, ?, ?)");
    s.bind(1, gpu.index).bind(2, gpu.model).bind(3, gpu.simulated);
    EDT_RETURN_IF_ERROR(s.run());
  }
  return Status::ok();
}

std::vector<Gpu> Database::Tx::gpus() {
  std::vector<Gpu> out;
  Stmt s(db_, "SELECT g.idx, g.model, g.simulated, COALESCE(h.container, '') FROM gpus g "
              "LEFT JOIN gpu_holders h ON h.idx = g.idx ORDER BY g.idx");
  while (s.step()) {
    std::string holder = s.text(3);
    const bool held = !holder.empty();
    out.push_back({static_cast<int>(s.i64(0)), s.text(1), s.i64(2) != 0, std::move(holder), held});
  }
  return out;
}

Status Database::Tx::hold_gpus(const std::string& container, const std::vector<int>& gpus) {
  for (int gpu : gpus) {
    Stmt s(db_, "INSERT INTO gpu_holders(idx, container) VALUES(?, ?)");
    EDT_RETURN_IF_ERROR(s.bind(1, gpu).bind(2, container).run().with_context("hold GPU " + std::to_string(gpu)));
  }
  return Status::ok();
}

Catalog Database::Tx::catalog(const std::optional<std::string>& volume_owner) {
  Catalog catalog;
  for (auto& image : images()) catalog.images[image.name] = image;
  for (auto& volume : volumes())
    if (!volume_owner || volume.owner == *volume_owner) catalog.volumes[volume.name] = volume;
  for (const auto& gpu : gpus()) {
    catalog.gpus_total[gpu.model]++;
    catalog.gpus_free[gpu.model] += gpu.holder.empty() ? 1 : 0;
  }
  Stmt ranges(db_, "SELECT user, id FROM user_ranges");
  while (ranges.step()) catalog.user_ranges[ranges.text(0)] = ranges.i64(1);
  return catalog;
}

// Clusters.

Status Database::Tx::insert_cluster(const Cluster& c) {
  Stmt s(db_, "INSERT INTO clusters(name, owner, spec, phase, message, scale_failure, deleting, ever_running, "
              "created_at) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)");
  s.bind(1, c.spec.name).bind(2, c.owner).bind(3, spec_to_text(c.spec)).bind(4, std::string(to_string(c.phase)));
  s.bind(5, c.message).bind(6, c.scale_failure).bind(7, c.deleting).bind(8, c.ever_running).bind(9, c.created_at);
  Status st = s.run();
  if (!st.is_ok() && s.constraint_failed()) return already_exists("cluster '" + c.spec.name + "' exists");
  return st;
}

std::optional<Cluster> Database::Tx::cluster(const std::string& name) {
  Stmt s(db_, select(kClusterColumns, "FROM clusters WHERE name = ?"));
  s.bind(1, name);
  if (!s.step()) return std::nullopt;
  Cluster c = read_cluster(s);
  for (auto& r : containers(name)) c.containers.push_back(std::move(r.status));
  return c;
}

std::vector<Cluster> Database::Tx::clusters() {
  std::vector<Cluster> out;
  std::map<std::string, size_t> position;
  Stmt s(db_, select(kClusterColumns, "FROM clusters ORDER BY name"));
  while (s.step()) {
    position[s.text(0)] = out.size();
    out.push_back(read_cluster(s));
  }
  Stmt containers(db_, std::string("SELECT cluster, ") + kContainerColumns + " FROM containers ORDER BY cluster, idx");
  while (containers.step()) {
    auto it = position.find(containers.text(0));
    if (it != position.end()) out[it->second].containers.push_back(read_container(containers, 1).status);
  }
  return out;
}

std::vector<std::string> Database::Tx::cluster_names() {
  std::vector<std::string> out;
  Stmt s(db_, "SELECT name FROM clusters ORDER BY name");
  while (s.step()) out.push_back(s.text(0));
  return out;
}

Status Database::Tx::set_spec(const std::string& name, const ClusterSpec& spec) {
  Stmt s(db_, "UPDATE clusters SET spec = ? WHERE name = ?");
  return expect_changed(db_, s.bind(1, spec_to_text(spec)).bind(2, name).run(), "cluster '" + name + "'");
}

Status Database::Tx::set_status(const std::string& name, Phase phase, const std::string& message, bool ever_running) {
  Stmt s(db_, "UPDATE clusters SET phase = ?, message = ?, ever_running = ? WHERE name = ?");
  s.bind(1, std::string(to_string(phase))).bind(2, message).bind(3, ever_running).bind(4, name);
  return expect_changed(db_, s.run(), "cluster '" + name + "'");
}

Status Database::Tx::set_queued(const std::string& name, const QueuedRequest& queued) {
  Stmt s(db_, "UPDATE clusters SET queued_containers = ?, queued_since = ?, queue_position = ?, queue_reason = ? "
              "WHERE name = ?");
  s.bind(1, queued.containers).bind(2, queued.since_ms).bind(3, queued.position).bind(4, queued.reason);
  return expect_changed(db_, s.bind(5, name).run(), "cluster '" + name + "'");
}

Status Database::Tx::set_scale_failure(const std::string& name, const std::string& failure) {
  Stmt s(db_, "UPDATE clusters SET scale_failure = ? WHERE name = ?");
  return expect_changed(db_, s.bind(1, failure).bind(2, name).run(), "cluster '" + name + "'");
}

Status Database::Tx::mark_deleting(const std::string& name) {
  Stmt s(db_, "UPDATE clusters SET deleting = 1, phase = ? WHERE name = ?");
  s.bind(1, std::string(to_string(Phase::kDeleting))).bind(2, name);
  EDT_RETURN_IF_ERROR(expect_changed(db_, s.run(), "cluster '" + name + "'"));
  return Stmt(db_, "UPDATE containers SET leaving = 1 WHERE cluster = ?").bind(1, name).run();
}

Status Database::Tx::delete_cluster(const std::string& name) {
  Stmt left(db_, "SELECT COUNT(*) FROM containers WHERE cluster = ?");
  left.bind(1, name);
  if (left.step() && left.i64(0) > 0) return failed_precondition("cluster '" + name + "' still has containers");
  EDT_RETURN_IF_ERROR(Stmt(db_, "DELETE FROM events WHERE cluster = ?").bind(1, name).run());
  EDT_RETURN_IF_ERROR(Stmt(db_, "DELETE FROM jobs WHERE cluster = ?").bind(1, name).run());
  return Stmt(db_, "DELETE FROM clusters WHERE name = ?").bind(1, name).run();
}

// Containers.

Status Database::Tx::insert_container(const std::string& cluster, const ContainerStatus& c) {
  Stmt s(db_, "INSERT INTO containers(name, cluster, idx, address, gpus, phase, message, started_at, leaving, "
              "pid, pid_start, stopping_since, creating_since) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, 0, 0)");
  s.bind(1, c.name).bind(2, cluster).bind(3, c.index).bind(4, c.address).bind(5, json(c.gpus).dump());
  s.bind(6, std::string(to_string(c.phase))).bind(7, c.message).bind(8, c.started_at).bind(9, c.leaving);
  Status st = s.run();
  if (!st.is_ok() && s.constraint_failed())
    return already_exists("container " + c.name + " or address " + c.address + " exists (" + st.message() + ")");
  return st;
}

std::vector<ContainerRecord> Database::Tx::containers(const std::string& cluster) {
  std::vector<ContainerRecord> out;
  Stmt s(db_, select(kContainerColumns, "FROM containers WHERE cluster = ? ORDER BY idx"));
  s.bind(1, cluster);
  while (s.step()) out.push_back(read_container(s));
  return out;
}

std::set<std::string> Database::Tx::addresses() {
  std::set<std::string> out;
  Stmt s(db_, "SELECT address FROM containers");
  while (s.step()) out.insert(s.text(0));
  return out;
}

Status Database::Tx::update_container(const ContainerRecord& r) {
  Stmt s(db_, "UPDATE containers SET phase = ?, message = ?, started_at = ?, pid = ?, pid_start = ?, "
              "stopping_since = ?, creating_since = ?, draining_since = ?, node = ?, slurm_job = ? WHERE name = ?");
  s.bind(1, std::string(to_string(r.status.phase))).bind(2, r.status.message).bind(3, r.status.started_at);
  s.bind(4, r.sandbox.pid).bind(5, r.sandbox.start_time).bind(6, r.stopping_since_ms).bind(7, r.creating_since_ms);
  s.bind(8, r.draining_since_ms).bind(9, r.status.node).bind(10, r.status.slurm_job);
  return s.bind(11, r.status.name).run();
}

Status Database::Tx::mark_leaving(const std::vector<std::string>& containers) {
  for (const auto& name : containers)
    EDT_RETURN_IF_ERROR(Stmt(db_, "UPDATE containers SET leaving = 1 WHERE name = ?").bind(1, name).run());
  return Status::ok();
}

Status Database::Tx::mark_leaving_from(const std::string& cluster, int index) {
  Stmt s(db_, "UPDATE containers SET leaving = 1 WHERE cluster = ? AND idx >= ?");
  return s.bind(1, cluster).bind(2, index).run();
}

Status Database::Tx::delete_container(const std::string& name) {
  EDT_RETURN_IF_ERROR(Stmt(db_, "DELETE FROM gpu_holders WHERE container = ?").bind(1, name).run());
  return Stmt(db_, "DELETE FROM containers WHERE name = ?").bind(1, name).run();
}

// Events.

Status Database::Tx::add_event(const std::string& cluster, EventType type, const std::string& message,
                               int64_t time_ms) {
  Stmt s(db_, "INSERT INTO events(cluster, time_ms, type, message) VALUES(?, ?, ?, ?)");
  return s.bind(1, cluster).bind(2, time_ms).bind(3, std::string(to_string(type))).bind(4, message).run();
}

std::vector<ClusterEvent> Database::Tx::events(const std::string& cluster) {
  std::vector<ClusterEvent> out;
  Stmt s(db_, "SELECT time_ms, type, message FROM events WHERE cluster = ? ORDER BY id");
  s.bind(1, cluster);
  while (s.step()) {
    auto type = parse_event_type(s.text(1));
    if (!type) continue;  // a type this edtd does not know: not shown
    out.push_back({s.i64(0), *type, s.text(2)});
  }
  return out;
}

// Jobs.

Result<int64_t> Database::Tx::insert_job(const Job& job) {
  Stmt s(db_, "INSERT INTO jobs(cluster, container, owner, command, state, exit_code, message, pid, pid_start, "
              "created_at, finished_at) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  s.bind(1, job.cluster).bind(2, job.container).bind(3, job.owner).bind(4, job.command);
  s.bind(5, std::string(to_string(job.state))).bind(6, job.exit_code).bind(7, job.message).bind(8, job.process.pid);
  s.bind(9, job.process.start_time).bind(10, job.created_at).bind(11, job.finished_at);
  EDT_RETURN_IF_ERROR(s.run());
  return static_cast<int64_t>(sqlite3_last_insert_rowid(db_));
}

Status Database::Tx::update_job(const Job& job) {
  Stmt s(db_, "UPDATE jobs SET state = ?, exit_code = ?, message = ?, pid = ?, pid_start = ?, finished_at = ? "
              "WHERE id = ?");
  s.bind(1, std::string(to_string(job.state))).bind(2, job.exit_code).bind(3, job.message).bind(4, job.process.pid);
  return s.bind(5, job.process.start_time).bind(6, job.finished_at).bind(7, job.id).run();
}

std::optional<Job> Database::Tx::job(int64_t id) {
  Stmt s(db_, select(kJobColumns, "FROM jobs WHERE id = ?"));
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return read_job(s);
}

std::vector<Job> Database::Tx::jobs_running() {
  std::vector<Job> out;
  Stmt s(db_, select(kJobColumns, "FROM jobs WHERE state = ? ORDER BY id"));
  s.bind(1, std::string(to_string(JobState::kRunning)));
  while (s.step()) out.push_back(read_job(s));
  return out;
}

std::vector<Job> Database::Tx::jobs_of(const std::string& cluster) {
  std::vector<Job> out;
  Stmt s(db_, select(kJobColumns, "FROM jobs WHERE cluster = ? ORDER BY id DESC"));
  s.bind(1, cluster);
  while (s.step()) out.push_back(read_job(s));
  return out;
}

std::set<int64_t> Database::Tx::job_ids() {
  std::set<int64_t> out;
  Stmt s(db_, "SELECT id FROM jobs");
  while (s.step()) out.insert(s.i64(0));
  return out;
}

Status Database::Tx::delete_job(int64_t id) {
  Stmt s(db_, "DELETE FROM jobs WHERE id = ?");
  return expect_changed(db_, s.bind(1, id).run(), "job " + std::to_string(id));
}

Status Database::Tx::delete_orphan_jobs() {
  return Stmt(db_, "DELETE FROM jobs WHERE cluster NOT IN (SELECT name FROM clusters)").run();
}

int64_t Database::Tx::version() { return sqlite3_total_changes64(db_); }

}  // namespace edt::control

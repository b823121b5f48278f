#include "control/store/store.h"

#include <arpa/inet.h>

#include <algorithm>
#include <chrono>
#include <set>

namespace edt::control {
namespace {

using nlohmann::json;

// One prepared statement; binds by position, steps, reads columns.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK)
      check_failed(__FILE__, __LINE__, sql, sqlite3_errmsg(db));
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt& bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Stmt& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
  Stmt& bind(int i, bool v) { return bind(i, static_cast<int64_t>(v)); }
  Stmt& bind(int i, uint64_t v) { return bind(i, static_cast<int64_t>(v)); }
  // True while there is a row.
  bool step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    last_rc_ = rc;
    return false;
  }
  Status run() {
    step();
    if (last_rc_ != SQLITE_DONE) return Status(StatusCode::kIoError, std::string("sqlite: ") + sqlite3_errmsg(db_));
    return Status::ok();
  }
  bool constraint_failed() const { return last_rc_ == SQLITE_CONSTRAINT; }
  std::string text(int i) {
    auto* p = sqlite3_column_text(stmt_, i);
    return p ? reinterpret_cast<const char*>(p) : "";
  }
  int64_t i64(int i) { return sqlite3_column_int64(stmt_, i); }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int last_rc_ = SQLITE_OK;
};

// BEGIN IMMEDIATE ... COMMIT, rolled back unless commit() is called.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) { sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr); }
  ~Transaction() {
    if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  Status commit() {
    done_ = true;
    if (sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK)
      return Status(StatusCode::kIoError, std::string("sqlite commit: ") + sqlite3_errmsg(db_));
    return Status::ok();
  }

 private:
  sqlite3* db_;
  bool done_ = false;
};

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS users(name TEXT PRIMARY KEY, admin INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS tokens(hash TEXT PRIMARY KEY, user TEXT NOT NULL REFERENCES users(name));
CREATE TABLE IF NOT EXISTS images(name TEXT PRIMARY KEY, root TEXT NOT NULL, frameworks TEXT NOT NULL,
  builtin INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS volumes(name TEXT PRIMARY KEY, owner TEXT NOT NULL, host_path TEXT NOT NULL,
  managed INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS gpus(idx INTEGER PRIMARY KEY, model TEXT NOT NULL, simulated INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS clusters(name TEXT PRIMARY KEY, owner TEXT NOT NULL, spec TEXT NOT NULL,
  phase TEXT NOT NULL, message TEXT NOT NULL, deleting INTEGER NOT NULL, ever_running INTEGER NOT NULL,
  created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS containers(name TEXT PRIMARY KEY, cluster TEXT NOT NULL, idx INTEGER NOT NULL,
  address TEXT NOT NULL UNIQUE, gpus TEXT NOT NULL, phase TEXT NOT NULL, message TEXT NOT NULL,
  started_at INTEGER NOT NULL, leaving INTEGER NOT NULL, pid INTEGER NOT NULL, pid_start INTEGER NOT NULL,
  stopping_since INTEGER NOT NULL, creating_since INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS containers_by_cluster ON containers(cluster, idx);
CREATE TABLE IF NOT EXISTS gpu_holders(idx INTEGER PRIMARY KEY, container TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events(id INTEGER PRIMARY KEY AUTOINCREMENT, cluster TEXT NOT NULL,
  time_ms INTEGER NOT NULL, type TEXT NOT NULL, message TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS events_by_cluster ON events(cluster, id);
CREATE TABLE IF NOT EXISTS jobs(id INTEGER PRIMARY KEY AUTOINCREMENT, cluster TEXT NOT NULL,
  container TEXT NOT NULL, owner TEXT NOT NULL, command TEXT NOT NULL, state TEXT NOT NULL,
  exit_code INTEGER NOT NULL, message TEXT NOT NULL, pid INTEGER NOT NULL, pid_start INTEGER NOT NULL,
  created_at INTEGER NOT NULL, finished_at INTEGER NOT NULL);
)sql";

ClusterSpec spec_from_json(const std::string& text) {
  json j = json::parse(text);
  ClusterSpec spec;
  spec.name = j.at("name");
  spec.framework = j.at("framework");
  spec.containers = j.at("containers");
  spec.image = j.at("image");
  spec.shm_bytes = j.at("shm_bytes");
  if (!j.at("gpu").is_null()) spec.gpu = {j["gpu"].at("model"), j["gpu"].at("count")};
  for (const auto& m : j.at("mounts")) spec.mounts.push_back({m.at("volume"), m.at("path"), m.at("read_only")});
  spec.env = j.at("env").get<std::map<std::string, std::string>>();
  return spec;
}

std::string spec_to_text(const ClusterSpec& spec) {
  json j = spec_to_json(spec);
  j["shm_bytes"] = spec.shm_bytes;
  return j.dump();
}

}  // namespace

Result<AddressRange> AddressRange::parse(const std::string& cidr) {
  auto slash = cidr.find('/');
  const std::string fix = "; write a block inside 127.0.0.0/8 such as 127.77.0.0/16";
  if (slash == std::string::npos) return invalid_argument("address range '" + cidr + "' has no /prefix" + fix);
  in_addr addr{};
  if (inet_pton(AF_INET, cidr.substr(0, slash).c_str(), &addr) != 1)
    return invalid_argument("address range '" + cidr + "' is not an IPv4 address" + fix);
  int prefix = 0;
  try {
    prefix = std::stoi(cidr.substr(slash + 1));
  } catch (...) {
    prefix = -1;
  }
  if (prefix < 8 || prefix > 30) return invalid_argument("address range '" + cidr + "' needs a prefix from /8 to /30" + fix);
  AddressRange range;
  range.size = 1u << (32 - prefix);
  range.base = ntohl(addr.s_addr) & ~(range.size - 1);
  if ((range.base >> 24) != 127) return invalid_argument("address range '" + cidr + "' is outside 127.0.0.0/8" + fix);
  if (range.base <= 0x7f000001 && 0x7f000001 < range.base + range.size)
    return invalid_argument("address range '" + cidr + "' contains 127.0.0.1" + fix);
  return range;
}

std::string AddressRange::address(uint32_t offset) const {
  in_addr addr{};
  addr.s_addr = htonl(base + offset);
  char text[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &addr, text, sizeof(text));
  return text;
}

Result<std::unique_ptr<ControlStore>> ControlStore::open(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return Status(StatusCode::kIoError, "open store " + path + ": " + message);
  }
  std::unique_ptr<ControlStore> store(new ControlStore(db));
  sqlite3_busy_timeout(db, 5000);
  EDT_RETURN_IF_ERROR(store->exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"));
  EDT_RETURN_IF_ERROR(store->exec(kSchema));
  return store;
}

ControlStore::~ControlStore() { sqlite3_close(db_); }

Status ControlStore::exec(const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    std::string message = error ? error : "unknown error";
    sqlite3_free(error);
    return Status(StatusCode::kIoError, "sqlite: " + message);
  }
  return Status::ok();
}

Status ControlStore::create_user(const std::string& name, bool admin) {
  std::lock_guard lock(mu_);
  Stmt s(db_, "INSERT INTO users(name, admin) VALUES(?, ?)");
  s.bind(1, name).bind(2, admin);
  Status st = s.run();
  if (!st.is_ok() && s.constraint_failed()) return already_exists("user '" + name + "' exists");
  return st;
}

std::vector<User> ControlStore::users() {
  std::lock_guard lock(mu_);
  std::vector<User> out;
  Stmt s(db_, "SELECT name, admin FROM users ORDER BY name");
  while (s.step()) out.push_back({s.text(0), s.i64(1) != 0});
  return out;
}

Status ControlStore::add_token(const std::string& user, const std::string& token_hash) {
  std::lock_guard lock(mu_);
  Stmt s(db_, "INSERT INTO tokens(hash, user) VALUES(?, ?)");
  s.bind(1, token_hash).bind(2, user);
  Status st = s.run();
  if (!st.is_ok() && s.constraint_failed()) return not_found("user '" + user + "' does not exist");
  return st;
}

std::optional<User> ControlStore::user_for_token(const std::string& token_hash) {
  std::lock_guard lock(mu_);
  Stmt s(db_, "SELECT u.name, u.admin FROM tokens t JOIN users u ON u.name = t.user WHERE t.hash = ?");
  s.bind(1, token_hash);
  if (!s.step()) return std::nullopt;
  return User{s.text(0), s.i64(1) != 0};
}

Status ControlStore::put_image(const Image& image) {
  std::lock_guard lock(mu_);
  Stmt s(db_, "INSERT OR REPLACE INTO images(name, root, frameworks, builtin) VALUES(?, ?, ?, ?)");
  s.bind(1, image.name).bind(2, image.root).bind(3, json(image.frameworks).dump()).bind(4, image.builtin);
  return s.run();
}

std::vector<Image> ControlStore::images() {
  std::lock_guard lock(mu_);
  std::vector<Image> out;
  Stmt s(db_, "SELECT name, root, frameworks, builtin FROM images ORDER BY name");
  while (s.step())
    out.push_back({s.text(0), s.text(1), json::parse(s.text(2)).get<std::vector<std::string>>(), s.i64(3) != 0});
  return out;
}

Status ControlStore::create_volume(const Volume& volume) {
  std::lock_guard lock(mu_);
  Stmt s(db_, "INSERT INTO volumes(name, owner, host_path, managed) VALUES(?, ?, ?, ?)");
  s.bind(1, volume.name).bind(2, volume.owner).bind(3, volume.host_path).bind(4, volume.managed);
  Status st = s.run();
  if (!st.is_ok() && s.constraint_failed()) return already_exists("volume '" + volume.name + "' exists");
  return st;
}

std::vector<Volume> ControlStore::volumes() {
  std::lock_guard lock(mu_);
  std::vector<Volume> out;
  Stmt s(db_, "SELECT name, owner, host_path, managed FROM volumes ORDER BY name");
  while (s.step()) out.push_back({s.text(0), s.text(1), s.text(2), s.i64(3) != 0});
  return out;
}

std::optional<Volume> ControlStore::volume(const std::string& name) {
  std::lock_guard lock(mu_);
  Stmt s(db_, "SELECT name, owner, host_path, managed FROM volumes WHERE name = ?");
  s.bind(1, name);
  if (!s.step()) return std::nullopt;
  return Volume{s.text(0), s.text(1), s.text(2), s.i64(3) != 0};
}

Status ControlStore::delete_volume(const std::string& name) {
  std::lock_guard lock(mu_);
  Stmt clusters(db_, "SELECT name, spec FROM clusters");
  while (clusters.step()) {
    for (const auto& m : spec_from_json(clusters.text(1)).mounts)
      if (m.volume == name)
        return failed_precondition("volume '" + name + "' is mounted by cluster " + clusters.text(0) +
                                   "; delete that cluster first");
  }
  EDT_RETURN_IF_ERROR(Stmt(db_, "DELETE FROM volumes WHERE name = ?").bind(1, name).run());
  if (sqlite3_changes(db_) == 0) return not_found("volume '" + name + "' does not exist");
  return Status::ok();
}

Status ControlStore::set_gpus(const std::vector<Gpu>& gpus) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  EDT_RETURN_IF_ERROR(exec("DELETE FROM gpus"));
  for (const auto& gpu : gpus) {
    Stmt s(db_, "INSERT INTO gpus(idx, model, simulated) VALUES(?, ?, ?)");
    s.bind(1, gpu.index).bind(2, gpu.model).bind(3, gpu.simulated);
    EDT_RETURN_IF_ERROR(s.run());
  }
  return tx.commit();
}

std::vector<Gpu> ControlStore::gpus() {
  std::lock_guard lock(mu_);
  std::vector<Gpu> out;
  Stmt s(db_, "SELECT g.idx, g.model, g.simulated, COALESCE(h.container, '') FROM gpus g "
              "LEFT JOIN gpu_holders h ON h.idx = g.idx ORDER BY g.idx");
  while (s.step()) out.push_back({static_cast<int>(s.i64(0)), s.text(1), s.i64(2) != 0, s.text(3)});
  return out;
}

Catalog ControlStore::catalog(const User& user) {
  std::lock_guard lock(mu_);
  return catalog_locked(user);
}

Catalog ControlStore::catalog_locked(const User& user) {
  Catalog catalog;
  Stmt images(db_, "SELECT name, root, frameworks, builtin FROM images");
  while (images.step())
    catalog.images[images.text(0)] = {images.text(0), images.text(1),
                                      json::parse(images.text(2)).get<std::vector<std::string>>(), images.i64(3) != 0};
  Stmt volumes(db_, "SELECT name, owner, host_path, managed FROM volumes");
  while (volumes.step()) {
    Volume v{volumes.text(0), volumes.text(1), volumes.text(2), volumes.i64(3) != 0};
    if (user.admin || v.owner == user.name) catalog.volumes[v.name] = v;
  }
  Stmt gpus(db_, "SELECT g.model, COUNT(*), SUM(h.idx IS NULL) FROM gpus g "
                 "LEFT JOIN gpu_holders h ON h.idx = g.idx GROUP BY g.model");
  while (gpus.step()) {
    catalog.gpus_total[gpus.text(0)] = static_cast<int>(gpus.i64(1));
    catalog.gpus_free[gpus.text(0)] = static_cast<int>(gpus.i64(2));
  }
  return catalog;
}

Refusal ControlStore::allot_locked(const ClusterSpec& spec, int from, int to, const AddressRange& range) {
  std::set<std::string> taken;
  Stmt used(db_, "SELECT address FROM containers");
  while (used.step()) taken.insert(used.text(0));
  uint32_t next = 1;
  for (int index = from; index < to; ++index) {
    std::string address;
    for (; next < range.size - 1; ++next) {
      std::string candidate = range.address(next);
      if (!taken.count(candidate)) {
        address = candidate;
        ++next;
        break;
      }
    }
    if (address.empty())
      return conflict("containers", "no free address is left in " + range.address(0) + "/" +
                                        std::to_string(32 - __builtin_ctz(range.size)),
                      "delete a cluster, or start edtd with a larger --address-range");
    std::vector<int> gpus;
    if (spec.gpu.count > 0) {
      Stmt free(db_, "SELECT g.idx FROM gpus g LEFT JOIN gpu_holders h ON h.idx = g.idx "
                     "WHERE g.model = ? AND h.idx IS NULL ORDER BY g.idx LIMIT ?");
      free.bind(1, spec.gpu.model).bind(2, spec.gpu.count);
      while (free.step()) gpus.push_back(static_cast<int>(free.i64(0)));
      if (static_cast<int>(gpus.size()) < spec.gpu.count)
        return conflict("gpu.count", "not enough free " + spec.gpu.model + " GPUs", "ask for fewer");
    }
    const std::string name = container_name(spec.name, index);
    for (int gpu : gpus) {
      Stmt hold(db_, "INSERT INTO gpu_holders(idx, container) VALUES(?, ?)");
      hold.bind(1, gpu).bind(2, name);
      if (!hold.run().is_ok()) return ApiError{500, "gpu", "could not record GPU " + std::to_string(gpu), "retry"};
    }
    Stmt insert(db_, "INSERT INTO containers(name, cluster, idx, address, gpus, phase, message, started_at, leaving, "
                     "pid, pid_start, stopping_since, creating_since) VALUES(?, ?, ?, ?, ?, ?, '', 0, 0, 0, 0, 0, 0)");
    insert.bind(1, name).bind(2, spec.name).bind(3, index).bind(4, address).bind(5, json(gpus).dump());
    insert.bind(6, std::string(phase::kPending));
    Status st = insert.run();
    if (!st.is_ok())
      return conflict("containers", "container " + name + " still exists (" + st.message() + ")",
                      "wait until the cluster is Running, then retry");
    taken.insert(address);
  }
  return std::nullopt;
}

Refusal ControlStore::create_cluster(const ClusterSpec& spec, const std::string& owner, const AddressRange& range,
                                     int64_t now) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  {
    Stmt exists(db_, "SELECT 1 FROM clusters WHERE name = ?");
    exists.bind(1, spec.name);
    if (exists.step())
      return conflict("name", "a cluster named '" + spec.name + "' exists", "choose another name, or delete that cluster");
  }
  std::optional<User> user;
  {
    Stmt s(db_, "SELECT admin FROM users WHERE name = ?");
    s.bind(1, owner);
    user = User{owner, s.step() && s.i64(0) != 0};
  }
  if (auto r = check_against_catalog(spec, catalog_locked(*user), spec.containers)) return r;
  Stmt insert(db_, "INSERT INTO clusters(name, owner, spec, phase, message, deleting, ever_running, created_at) "
                   "VALUES(?, ?, ?, ?, '', 0, 0, ?)");
  insert.bind(1, spec.name).bind(2, owner).bind(3, spec_to_text(spec)).bind(4, std::string(phase::kPending)).bind(5, now);
  if (Status st = insert.run(); !st.is_ok()) return ApiError{500, "", st.message(), "retry"};
  if (auto r = allot_locked(spec, 0, spec.containers, range)) return r;
  if (Status st = tx.commit(); !st.is_ok()) return ApiError{500, "", st.message(), "retry"};
  return std::nullopt;
}

Refusal ControlStore::scale_cluster(const std::string& name, int containers, const AddressRange& range) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  auto cluster = cluster_locked(name);
  if (!cluster) return not_found_error("name", "cluster '" + name + "' does not exist", "see edt cluster list");
  if (cluster->deleting)
    return conflict("containers", "cluster '" + name + "' is being deleted", "create a new cluster instead");
  int present = 0;
  for (const auto& c : cluster->containers) present = std::max(present, c.index + 1);
  for (const auto& c : cluster->containers) {
    if (c.leaving && c.index < containers)
      return conflict("containers", "container " + c.name + " is still stopping",
                      "wait until the cluster is Running, then scale again");
  }
  ClusterSpec spec = cluster->spec;
  if (containers > present) {
    User owner{cluster->owner, true};
    if (auto r = check_against_catalog(spec, catalog_locked(owner), containers - present)) return r;
    if (auto r = allot_locked(spec, present, containers, range)) return r;
  } else {
    Stmt leave(db_, "UPDATE containers SET leaving = 1 WHERE cluster = ? AND idx >= ?");
    leave.bind(1, name).bind(2, containers);
    if (Status st = leave.run(); !st.is_ok()) return ApiError{500, "", st.message(), "retry"};
  }
  spec.containers = containers;
  // The phase changes with the spec, so no reader sees the new size as Running.
  Stmt update(db_, "UPDATE clusters SET spec = ?, phase = ?, message = '' WHERE name = ?");
  update.bind(1, spec_to_text(spec)).bind(2, std::string(phase::kScaling)).bind(3, name);
  if (Status st = update.run(); !st.is_ok()) return ApiError{500, "", st.message(), "retry"};
  if (Status st = tx.commit(); !st.is_ok()) return ApiError{500, "", st.message(), "retry"};
  return std::nullopt;
}

Status ControlStore::mark_deleting(const std::string& name) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  Stmt s(db_, "UPDATE clusters SET deleting = 1, phase = ? WHERE name = ?");
  s.bind(1, std::string(phase::kDeleting)).bind(2, name);
  EDT_RETURN_IF_ERROR(s.run());
  if (sqlite3_changes(db_) == 0) return not_found("cluster '" + name + "' does not exist");
  EDT_RETURN_IF_ERROR(Stmt(db_, "UPDATE containers SET leaving = 1 WHERE cluster = ?").bind(1, name).run());
  return tx.commit();
}

std::vector<ContainerRecord> ControlStore::containers(const std::string& cluster) {
  std::lock_guard lock(mu_);
  return containers_locked(cluster);
}

std::vector<ContainerRecord> ControlStore::containers_locked(const std::string& cluster) {
  std::vector<ContainerRecord> out;
  Stmt s(db_, "SELECT name, idx, address, gpus, phase, message, started_at, leaving, pid, pid_start, "
              "stopping_since, creating_since FROM containers WHERE cluster = ? ORDER BY idx");
  s.bind(1, cluster);
  while (s.step()) {
    ContainerRecord r;
    r.status.name = s.text(0);
    r.status.index = static_cast<int>(s.i64(1));
    r.status.address = s.text(2);
    r.status.gpus = json::parse(s.text(3)).get<std::vector<int>>();
    r.status.phase = s.text(4);
    r.status.message = s.text(5);
    r.status.started_at = s.i64(6);
    r.status.leaving = s.i64(7) != 0;
    r.sandbox = {s.i64(8), static_cast<uint64_t>(s.i64(9))};
    r.stopping_since_ms = s.i64(10);
    r.creating_since_ms = s.i64(11);
    out.push_back(std::move(r));
  }
  return out;
}

std::optional<Cluster> ControlStore::cluster(const std::string& name) {
  std::lock_guard lock(mu_);
  return cluster_locked(name);
}

std::optional<Cluster> ControlStore::cluster_locked(const std::string& name) {
  Stmt s(db_, "SELECT spec, owner, phase, message, deleting, ever_running, created_at FROM clusters WHERE name = ?");
  s.bind(1, name);
  if (!s.step()) return std::nullopt;
  Cluster c;
  c.spec = spec_from_json(s.text(0));
  c.owner = s.text(1);
  c.phase = s.text(2);
  c.message = s.text(3);
  c.deleting = s.i64(4) != 0;
  c.ever_running = s.i64(5) != 0;
  c.created_at = s.i64(6);
  for (auto& r : containers_locked(name)) c.containers.push_back(std::move(r.status));
  return c;
}

std::vector<Cluster> ControlStore::clusters() {
  std::lock_guard lock(mu_);
  std::vector<Cluster> out;
  std::map<std::string, size_t> position;
  Stmt s(db_, "SELECT spec, owner, phase, message, deleting, ever_running, created_at, name FROM clusters ORDER BY name");
  while (s.step()) {
    Cluster c;
    c.spec = spec_from_json(s.text(0));
    c.owner = s.text(1);
    c.phase = s.text(2);
    c.message = s.text(3);
    c.deleting = s.i64(4) != 0;
    c.ever_running = s.i64(5) != 0;
    c.created_at = s.i64(6);
    position[s.text(7)] = out.size();
    out.push_back(std::move(c));
  }
  Stmt containers(db_, "SELECT cluster, name, idx, address, gpus, phase, message, started_at, leaving "
                       "FROM containers ORDER BY cluster, idx");
  while (containers.step()) {
    auto it = position.find(containers.text(0));
    if (it == position.end()) continue;
    ContainerStatus st;
    st.name = containers.text(1);
    st.index = static_cast<int>(containers.i64(2));
    st.address = containers.text(3);
    st.gpus = json::parse(containers.text(4)).get<std::vector<int>>();
    st.phase = containers.text(5);
    st.message = containers.text(6);
    st.started_at = containers.i64(7);
    st.leaving = containers.i64(8) != 0;
    out[it->second].containers.push_back(std::move(st));
  }
  return out;
}

std::vector<std::string> ControlStore::cluster_names() {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  Stmt s(db_, "SELECT name FROM clusters ORDER BY name");
  while (s.step()) out.push_back(s.text(0));
  return out;
}

Status ControlStore::update_cluster_phase(const std::string& name, const std::string& phase, const std::string& message,
                                          bool ever_running) {
  std::lock_guard lock(mu_);
  Stmt s(db_, "UPDATE clusters SET phase = ?, message = ?, ever_running = ? WHERE name = ?");
  s.bind(1, phase).bind(2, message).bind(3, ever_running).bind(4, name);
  return s.run();
}

Status ControlStore::set_spec_containers(const std::string& name, int containers) {
  std::lock_guard lock(mu_);
  auto cluster = cluster_locked(name);
  if (!cluster) return not_found("cluster '" + name + "' does not exist");
  cluster->spec.containers = containers;
  Stmt s(db_, "UPDATE clusters SET spec = ? WHERE name = ?");
  s.bind(1, spec_to_text(cluster->spec)).bind(2, name);
  return s.run();
}

Status ControlStore::update_container(const ContainerRecord& r) {
  std::lock_guard lock(mu_);
  Stmt s(db_, "UPDATE containers SET phase = ?, message = ?, started_at = ?, pid = ?, pid_start = ?, "
              "stopping_since = ?, creating_since = ? WHERE name = ?");
  s.bind(1, r.status.phase).bind(2, r.status.message).bind(3, r.status.started_at).bind(4, r.sandbox.pid);
  s.bind(5, r.sandbox.pid_start).bind(6, r.stopping_since_ms).bind(7, r.creating_since_ms).bind(8, r.status.name);
  return s.run();
}

Status ControlStore::mark_leaving(const std::vector<std::string>& containers) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  for (const auto& name : containers) {
    EDT_RETURN_IF_ERROR(Stmt(db_, "UPDATE containers SET leaving = 1 WHERE name = ?").bind(1, name).run());
  }
  return tx.commit();
}

Status ControlStore::delete_container(const std::string& name) {
  std::lock_guard lock(mu_);
  Transaction tx(db_);
  EDT_RETURN_IF_ERROR(Stmt(db_, "DELETE FROM gpu_holders WHERE container = ?").bind(1, name).run());
  EDT_RETURN_IF_ERROR(Stmt(db_, "DELETE FROM containers WHERE name = ?").bind(1, name).run());
  return tx.commit();
}

Status ControlStore::delete_cluster(const std::string& name) {
  std::lock_guard lock(mu_);
  Stmt left(db_, "SELECT COUNT(*) FROM containers WHERE cluster = ?");
  left.bind(1, name);
  if (left.step() && left.i64(0) > 0) return failed_precondition("cluster '" + name + "' still has containers");
  Transaction tx(db_);
  EDT_RETURN_IF_ERROR(Stmt(db_, "DELETE FROM events WHERE cluster = ?").bind(1, name).run());
  EDT_RETURN_IF_ERROR(Stmt(db_, "DELETE FROM clusters WHERE name = ?").bind(1, name).run());
  return tx.commit();
}

Status ControlStore::add_event(const std::string& cluster, const std::string& type, const std::string& message) {
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  std::lock_guard lock(mu_);
  Stmt s(db_, "INSERT INTO events(cluster, time_ms, type, message) VALUES(?, ?, ?, ?)");
  s.bind(1, cluster).bind(2, now).bind(3, type).bind(4, message);
  return s.run();
}

std::vector<ClusterEvent> ControlStore::events(const std::string& cluster) {
  std::lock_guard lock(mu_);
  std::vector<ClusterEvent> out;
  Stmt s(db_, "SELECT time_ms, type, message FROM events WHERE cluster = ? ORDER BY id");
  s.bind(1, cluster);
  while (s.step()) out.push_back({s.i64(0), s.text(1), s.text(2)});
  return out;
}

int64_t ControlStore::version() {
  std::lock_guard lock(mu_);
  return sqlite3_total_changes64(db_);
}

Result<int64_t> ControlStore::create_job(const Job& job) {
  std::lock_guard lock(mu_);
  Stmt s(db_, "INSERT INTO jobs(cluster, container, owner, command, state, exit_code, message, pid, pid_start, "
              "created_at, finished_at) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  s.bind(1, job.cluster).bind(2, job.container).bind(3, job.owner).bind(4, job.command).bind(5, job.state);
  s.bind(6, job.exit_code).bind(7, job.message).bind(8, job.process.pid).bind(9, job.process.pid_start);
  s.bind(10, job.created_at).bind(11, job.finished_at);
  EDT_RETURN_IF_ERROR(s.run());
  return static_cast<int64_t>(sqlite3_last_insert_rowid(db_));
}

Status ControlStore::update_job(const Job& job) {
  std::lock_guard lock(mu_);
  Stmt s(db_, "UPDATE jobs SET state = ?, exit_code = ?, message = ?, pid = ?, pid_start = ?, finished_at = ? "
              "WHERE id = ?");
  s.bind(1, job.state).bind(2, job.exit_code).bind(3, job.message).bind(4, job.process.pid);
  s.bind(5, job.process.pid_start).bind(6, job.finished_at).bind(7, job.id);
  return s.run();
}

namespace {
Job read_job(Stmt& s) {
  Job job;
  job.id = s.i64(0);
  job.cluster = s.text(1);
  job.container = s.text(2);
  job.owner = s.text(3);
  job.command = s.text(4);
  job.state = s.text(5);
  job.exit_code = static_cast<int>(s.i64(6));
  job.message = s.text(7);
  job.process = {s.i64(8), static_cast<uint64_t>(s.i64(9))};
  job.created_at = s.i64(10);
  job.finished_at = s.i64(11);
  return job;
}
constexpr const char* kJobColumns =
    "SELECT id, cluster, container, owner, command, state, exit_code, message, pid, pid_start, created_at, "
    "finished_at FROM jobs ";
}  // namespace

std::optional<Job> ControlStore::job(int64_t id) {
  std::lock_guard lock(mu_);
  Stmt s(db_, (std::string(kJobColumns) + "WHERE id = ?").c_str());
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return read_job(s);
}

std::vector<Job> ControlStore::jobs_running() {
  std::lock_guard lock(mu_);
  std::vector<Job> out;
  Stmt s(db_, (std::string(kJobColumns) + "WHERE state = 'Running' ORDER BY id").c_str());
  while (s.step()) out.push_back(read_job(s));
  return out;
}

}  // namespace edt::control

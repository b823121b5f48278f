#include "control/db/schema.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>

#include "control/db/database.h"

namespace edt::control {
namespace {

// A database as edtd made it before schema versions (user_version 0): its
// tables exactly as they were, and a few rows of each, among them a cluster
// whose last scale failed (told then only by its message).
constexpr const char* kUnversionedDatabase = R"sql(
CREATE TABLE users(name TEXT PRIMARY KEY, admin INTEGER NOT NULL);
CREATE TABLE tokens(hash TEXT PRIMARY KEY, user TEXT NOT NULL REFERENCES users(name));
CREATE TABLE images(name TEXT PRIMARY KEY, root TEXT NOT NULL, frameworks TEXT NOT NULL, builtin INTEGER NOT NULL);
CREATE TABLE volumes(name TEXT PRIMARY KEY, owner TEXT NOT NULL, host_path TEXT NOT NULL, managed INTEGER NOT NULL);
CREATE TABLE gpus(idx INTEGER PRIMARY KEY, model TEXT NOT NULL, simulated INTEGER NOT NULL);
CREATE TABLE clusters(name TEXT PRIMARY KEY, owner TEXT NOT NULL, spec TEXT NOT NULL,
  phase TEXT NOT NULL, message TEXT NOT NULL, deleting INTEGER NOT NULL, ever_running INTEGER NOT NULL,
  created_at INTEGER NOT NULL);
CREATE TABLE containers(name TEXT PRIMARY KEY, cluster TEXT NOT NULL, idx INTEGER NOT NULL,
  address TEXT NOT NULL UNIQUE, gpus TEXT NOT NULL, phase TEXT NOT NULL, message TEXT NOT NULL,
  started_at INTEGER NOT NULL, leaving INTEGER NOT NULL, pid INTEGER NOT NULL, pid_start INTEGER NOT NULL,
  stopping_since INTEGER NOT NULL, creating_since INTEGER NOT NULL);
CREATE INDEX containers_by_cluster ON containers(cluster, idx);
CREATE TABLE gpu_holders(idx INTEGER PRIMARY KEY, container TEXT NOT NULL);
CREATE TABLE events(id INTEGER PRIMARY KEY AUTOINCREMENT, cluster TEXT NOT NULL,
  time_ms INTEGER NOT NULL, type TEXT NOT NULL, message TEXT NOT NULL);
CREATE INDEX events_by_cluster ON events(cluster, id);
CREATE TABLE jobs(id INTEGER PRIMARY KEY AUTOINCREMENT, cluster TEXT NOT NULL,
  container TEXT NOT NULL, owner TEXT NOT NULL, command TEXT NOT NULL, state TEXT NOT NULL,
  exit_code INTEGER NOT NULL, message TEXT NOT NULL, pid INTEGER NOT NULL, pid_start INTEGER NOT NULL,
  created_at INTEGER NOT NULL, finished_at INTEGER NOT NULL);

INSERT INTO users VALUES('admin', 1), ('alice', 0);
INSERT INTO tokens VALUES('hash-of-alice', 'alice');
INSERT INTO images VALUES('edt', '/', '["horovod"]', 1);
INSERT INTO volumes VALUES('data', 'alice', '/var/lib/edt/volumes/data', 1);
INSERT INTO gpus VALUES(0, 'NVIDIA-P4', 1), (1, 'NVIDIA-P4', 1);
INSERT INTO clusters VALUES('tthvd', 'alice',
  '{"containers":2,"env":{"A":"b"},"framework":"horovod","gpu":{"count":1,"model":"NVIDIA-P4"},"image":"edt","mounts":[{"path":"/root/data","read_only":false,"volume":"data"}],"name":"tthvd","shm":"128 MiB","shm_bytes":134217728}',
  'Running', 'scale to 4 failed: no room; back to 2', 0, 1, 1767225600);
INSERT INTO containers VALUES
  ('tthvd-launcher', 'tthvd', 0, '127.77.0.1', '[0]', 'Running', '', 1767225601, 0, 4242, 99, 0, 1767225600500),
  ('tthvd-worker-0', 'tthvd', 1, '127.77.0.2', '[1]', 'Running', '', 1767225601, 0, 4243, 100, 0, 1767225600500);
INSERT INTO gpu_holders VALUES(0, 'tthvd-launcher'), (1, 'tthvd-worker-0');
INSERT INTO events(cluster, time_ms, type, message) VALUES
  ('tthvd', 1767225600000, 'Created', 'created by alice with 2 containers'),
  ('tthvd', 1767225601000, 'Running', '2 of 2 containers Running');
INSERT INTO jobs(cluster, container, owner, command, state, exit_code, message, pid, pid_start, created_at,
  finished_at) VALUES('tthvd', 'tthvd-launcher', 'alice', 'hostname', 'Succeeded', 0, '', 4300, 7, 1767225602,
  1767225603);
)sql";

class SchemaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("edt-schema-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "edtd.db").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // Runs `sql` on the file with SQLite alone, as an older edtd would have.
  void write_raw(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    char* error = nullptr;
    int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
    std::string message = error ? error : "";
    sqlite3_free(error);
    sqlite3_close(db);
    ASSERT_EQ(rc, SQLITE_OK) << message;
  }
  int version_on_disk() {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    int version = schema_version(db);
    sqlite3_close(db);
    return version;
  }

  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(SchemaTest, MigrationsAreNumberedInOrder) {
  int expected = 1;
  for (const auto& m : migrations()) EXPECT_EQ(m.version, expected++) << m.what;
}

TEST_F(SchemaTest, ANewDatabaseGetsTheNewestVersion) {
  ASSERT_TRUE(Database::open(path_).is_ok());
  EXPECT_EQ(version_on_disk(), migrations().back().version);
  // Opening it again applies nothing and loses nothing.
  ASSERT_TRUE(Database::open(path_).is_ok());
  EXPECT_EQ(version_on_disk(), migrations().back().version);
}

TEST_F(SchemaTest, AnUnversionedDatabaseIsMigratedWithEverythingInIt) {
  write_raw(kUnversionedDatabase);
  ASSERT_EQ(version_on_disk(), 0);
  auto opened = Database::open(path_);
  ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
  EXPECT_EQ(version_on_disk(), migrations().back().version);
  auto tx = (*opened)->lock();

  auto cluster = tx.cluster("tthvd");
  ASSERT_TRUE(cluster.has_value());
  EXPECT_EQ(cluster->owner, "alice");
  EXPECT_EQ(cluster->phase, Phase::kRunning);
  EXPECT_TRUE(cluster->ever_running);
  EXPECT_EQ(cluster->created_at, 1767225600);
  EXPECT_EQ(cluster->spec.containers, 2);
  EXPECT_EQ(cluster->spec.gpu.model, "NVIDIA-P4");
  EXPECT_EQ(cluster->spec.shm_bytes, 128u << 20);
  EXPECT_EQ(cluster->spec.memory_bytes, 0u);  // stored before memory bounds: none
  EXPECT_EQ(cluster->spec.cpu_millis, 0);  // stored before CPU bounds: none
  ASSERT_EQ(cluster->spec.mounts.size(), 1u);
  EXPECT_EQ(cluster->spec.mounts[0].path, "/root/data");
  EXPECT_EQ(cluster->spec.env.at("A"), "b");
  // The failed scale, told before only by the message, is now a field.
  EXPECT_EQ(cluster->scale_failure, "scale to 4 failed: no room; back to 2");

  auto records = tx.containers("tthvd");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[1].status.address, "127.77.0.2");
  EXPECT_EQ(records[1].status.gpus, std::vector<int>{1});
  EXPECT_EQ(records[1].sandbox, (SandboxRef{4243, 100}));
  EXPECT_EQ(records[1].creating_since_ms, 1767225600500);
  // Containers of before the drain never drained; the spec gets the default deadline.
  EXPECT_EQ(records[1].draining_since_ms, 0);
  EXPECT_EQ(cluster->spec.drain_timeout, kDefaultDrainTimeout);
  EXPECT_EQ(tx.gpus()[0].holder, "tthvd-launcher");
  // Tokens of before get an id, never expire and keep working.
  EXPECT_EQ(tx.user_for_token("hash-of-alice", 4102444800)->name, "alice");
  auto tokens = tx.tokens("alice");
  ASSERT_EQ(tokens.size(), 1u);
  EXPECT_EQ(tokens[0].id, 1);
  EXPECT_EQ(tokens[0].expires_at, 0);
  EXPECT_EQ(tokens[0].created_at, 0);
  // Users of before get subordinate id ranges, in the order of their names.
  EXPECT_EQ(tx.catalog(std::nullopt).user_ranges, (std::map<std::string, int64_t>{{"admin", 1}, {"alice", 2}}));
  ASSERT_TRUE(tx.delete_token("alice", 1).is_ok());
  EXPECT_FALSE(tx.user_for_token("hash-of-alice", 0).has_value());
  EXPECT_EQ(tx.volume("data")->host_path, "/var/lib/edt/volumes/data");
  EXPECT_EQ(tx.images()[0].frameworks, std::vector<std::string>{"horovod"});
  ASSERT_EQ(tx.events("tthvd").size(), 2u);
  EXPECT_EQ(tx.events("tthvd")[1].type, EventType::kRunning);
  auto job = tx.job(1);
  ASSERT_TRUE(job.has_value());
  EXPECT_EQ(job->state, JobState::kSucceeded);
  EXPECT_EQ(job->process, (SandboxRef{4300, 7}));
}

// A database of version 3 (tokens without ids) with a user and a token:
// the token survives version 4 and can be listed and revoked by its id.
TEST_F(SchemaTest, TokensOfVersion3GetIdsAndKeepWorking) {
  std::string sql;
  for (const auto& m : migrations())
    if (m.version <= 3) sql += m.sql;
  write_raw(sql + "PRAGMA user_version = 3; INSERT INTO users VALUES('admin', 1), ('bob', 0);"
                  "INSERT INTO tokens VALUES('hash-a', 'admin'), ('hash-b', 'bob');");
  auto opened = Database::open(path_);
  ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
  EXPECT_EQ(version_on_disk(), migrations().back().version);
  auto tx = (*opened)->lock();
  EXPECT_EQ(tx.user_for_token("hash-a", 0)->name, "admin");
  EXPECT_EQ(tx.user_for_token("hash-b", 0)->name, "bob");
  EXPECT_EQ(tx.tokens("bob")[0].id, 2);
  auto made = tx.insert_token({0, "bob", "new", 1, 0}, "hash-c");
  ASSERT_TRUE(made.is_ok());
  EXPECT_EQ(*made, 3);
  EXPECT_FALSE(tx.insert_token({0, "bob", "", 1, 0}, "hash-c").is_ok());  // hashes stay unique
}

TEST_F(SchemaTest, ADatabaseFromANewerEdtdIsRefused) {
  write_raw("PRAGMA user_version = 999;");
  auto opened = Database::open(path_);
  ASSERT_FALSE(opened.is_ok());
  EXPECT_NE(opened.status().message().find("newer than this edtd's"), std::string::npos) << opened.status().to_string();
  EXPECT_EQ(version_on_disk(), 999);
}

}  // namespace
}  // namespace edt::control

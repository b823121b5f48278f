#include "control/db/schema.h"

#include <string>

#include "control/db/sqlite.h"

namespace edt::control {

// Version 8: an image imported into the image store keeps its source,
// digest, size and config fields (Env, WorkingDir, User, Labels), as JSON.
constexpr const char* kImagesConfig = R"sql(
ALTER TABLE images ADD COLUMN config TEXT NOT NULL DEFAULT '{}';
)sql";

const std::vector<Migration>& migrations() {
  static const std::vector<Migration> kMigrations = {
      {1, "the tables of edtd 0.1", R"sql(
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
)sql"},
      // Before, a failed scale was told from the message's wording; it is
      // now a column of its own, filled from that wording once.
      {2, "clusters.scale_failure", R"sql(
ALTER TABLE clusters ADD COLUMN scale_failure TEXT NOT NULL DEFAULT '';
UPDATE clusters SET scale_failure = message WHERE message LIKE 'scale to % failed: %';
)sql"},
      // A container leaving on scale-down drains before it is stopped; when
      // it began is kept, so a restarted edtd keeps the drain's deadline.
      {3, "containers.draining_since", R"sql(
ALTER TABLE containers ADD COLUMN draining_since INTEGER NOT NULL DEFAULT 0;
)sql"},
      // Tokens get an id to be listed and revoked by, a description, when
      // they were made and when they expire (0: never). Tokens of before
      // keep working: made at 0 (unknown), never expiring.
      {4, "tokens with ids, descriptions and expiry", R"sql(
CREATE TABLE tokens_v4(id INTEGER PRIMARY KEY AUTOINCREMENT, hash TEXT NOT NULL UNIQUE,
  user TEXT NOT NULL REFERENCES users(name), description TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL DEFAULT 0, expires_at INTEGER NOT NULL DEFAULT 0);
INSERT INTO tokens_v4(hash, user) SELECT hash, user FROM tokens ORDER BY rowid;
DROP TABLE tokens;
ALTER TABLE tokens_v4 RENAME TO tokens;
CREATE INDEX tokens_by_user ON tokens(user, id);
)sql"},
      // Each user's subordinate uid and gid range (container root and the
      // users under it, on the host): its number here, never given twice
      // (AUTOINCREMENT), kept while the user is.
      {5, "user_ranges", R"sql(
CREATE TABLE user_ranges(id INTEGER PRIMARY KEY AUTOINCREMENT, user TEXT NOT NULL UNIQUE);
INSERT INTO user_ranges(user) SELECT name FROM users ORDER BY name;
)sql"},
      // A container placed by Slurm (edtd --backend slurm): its node and job.
      {6, "containers.node and containers.slurm_job", R"sql(
ALTER TABLE containers ADD COLUMN node TEXT NOT NULL DEFAULT '';
ALTER TABLE containers ADD COLUMN slurm_job INTEGER NOT NULL DEFAULT 0;
)sql"},
      // The scheduler: teams of users with GPU quotas per model, and the
      // request a cluster waits with (a queued create has no containers; a
      // queued scale keeps its present ones).
      {7, "teams, quotas and the queue", R"sql(
CREATE TABLE teams(name TEXT PRIMARY KEY);
ALTER TABLE users ADD COLUMN team TEXT NOT NULL DEFAULT '';
CREATE TABLE quotas(team TEXT NOT NULL REFERENCES teams(name), model TEXT NOT NULL,
  guaranteed INTEGER NOT NULL, borrow_limit INTEGER NOT NULL, PRIMARY KEY(team, model));
ALTER TABLE clusters ADD COLUMN queued_containers INTEGER NOT NULL DEFAULT 0;
ALTER TABLE clusters ADD COLUMN queued_since INTEGER NOT NULL DEFAULT 0;
ALTER TABLE clusters ADD COLUMN queue_position INTEGER NOT NULL DEFAULT 0;
ALTER TABLE clusters ADD COLUMN queue_reason TEXT NOT NULL DEFAULT '';
)sql"},
      {8, "images.config", kImagesConfig},
  };
  return kMigrations;
}

int schema_version(sqlite3* db) {
  sqlite::Stmt s(db, "PRAGMA user_version");
  return s.step() ? static_cast<int>(s.i64(0)) : 0;
}

Status migrate(sqlite3* db) {
  const int from = schema_version(db);
  const int newest = migrations().back().version;
  if (from > newest)
    return failed_precondition("the database has schema version " + std::to_string(from) + ", newer than this edtd's " +
                               std::to_string(newest) + "; run a newer edtd, or restore a backup");
  if (from == newest) return Status::ok();
  EDT_RETURN_IF_ERROR(sqlite::exec(db, "BEGIN IMMEDIATE"));
  for (const auto& m : migrations()) {
    if (m.version <= from) continue;
    if (Status st = sqlite::exec(db, m.sql); !st.is_ok()) {
      (void)sqlite::exec(db, "ROLLBACK");
      return st.with_context("migrate the database to version " + std::to_string(m.version) + " (" + m.what + ")");
    }
  }
  // PRAGMA takes no bound parameters; the number is ours.
  if (Status st = sqlite::exec(db, "PRAGMA user_version = " + std::to_string(newest)); !st.is_ok()) {
    (void)sqlite::exec(db, "ROLLBACK");
    return st;
  }
  return sqlite::exec(db, "COMMIT");
}

}  // namespace edt::control

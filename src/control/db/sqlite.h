// Thin helpers over SQLite's C API for the db module: a prepared statement
// that binds by position and reads columns, and exec() for SQL without rows.
// Internal to db/.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>

#include "edt/status.h"

namespace edt::control::sqlite {

// One prepared statement. The SQL is the program's own, so a statement that
// does not prepare is a bug (checked), not an error.
class Stmt {
 public:
  Stmt(sqlite3* db, const std::string& sql);
  ~Stmt();
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, const std::string& v);
  Stmt& bind(int i, int64_t v);
  Stmt& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
  Stmt& bind(int i, bool v) { return bind(i, static_cast<int64_t>(v)); }
  Stmt& bind(int i, uint64_t v) { return bind(i, static_cast<int64_t>(v)); }
  // True while there is a row.
  bool step();
  // Steps to the end: OK, or kIoError with SQLite's message.
  Status run();
  bool constraint_failed() const { return last_rc_ == SQLITE_CONSTRAINT; }
  std::string text(int i);
  int64_t i64(int i);

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int last_rc_ = SQLITE_OK;
};

// Runs SQL that returns no rows (several statements allowed).
Status exec(sqlite3* db, const std::string& sql);

}  // namespace edt::control::sqlite

#include "control/db/sqlite.h"

namespace edt::control::sqlite {

Stmt::Stmt(sqlite3* db, const std::string& sql) : db_(db) {
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK)
    check_failed(__FILE__, __LINE__, sql.c_str(), sqlite3_errmsg(db));
}

Stmt::~Stmt() { sqlite3_finalize(stmt_); }

Stmt& Stmt::bind(int i, const std::string& v) {
  sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return *this;
}

Stmt& Stmt::bind(int i, int64_t v) {
  sqlite3_bind_int64(stmt_, i, v);
  return *this;
}

bool Stmt::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  last_rc_ = rc;
  return false;
}

Status Stmt::run() {
  while (step()) {
  }
  if (last_rc_ != SQLITE_DONE) return Status(StatusCode::kIoError, std::string("sqlite: ") + sqlite3_errmsg(db_));
  return Status::ok();
}

std::string Stmt::text(int i) {
  auto* p = sqlite3_column_text(stmt_, i);
  return p ? reinterpret_cast<const char*>(p) : "";
}

int64_t Stmt::i64(int i) { return sqlite3_column_int64(stmt_, i); }

Status exec(sqlite3* db, const std::string& sql) {
  char* error = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    std::string message = error ? error : "unknown error";
    sqlite3_free(error);
    return Status(StatusCode::kIoError, "sqlite: " + message);
  }
  return Status::ok();
}

}  // namespace edt::control::sqlite

// The database's schema as a list of migrations. PRAGMA user_version holds
// the number of the last one applied: 0 for a new database (and for one
// made before migrations were numbered, whose tables version 1 leaves as
// they are, since it only creates what is missing).
//
// migrate() applies every migration newer than the database's version, in
// order, in one transaction: the database ends at the newest version or
// stays as it was. A database newer than this edtd knows is refused.
// A new migration is appended, never edited once released.
#pragma once

#include <sqlite3.h>

#include <vector>

#include "edt/status.h"

namespace edt::control {

struct Migration {
  int version;       // 1, 2, ...: its place in the list
  const char* what;  // one line, for errors
  const char* sql;
};

const std::vector<Migration>& migrations();

// The database's PRAGMA user_version.
int schema_version(sqlite3* db);

Status migrate(sqlite3* db);

}  // namespace edt::control

// The web console's files, served from a directory at /: GET of a path
// below it answers the file ("/" and directories: their index.html), with
// a Content-Type by extension. Paths with a ".." segment, hidden names or
// anything that is not a regular file below the directory answer nothing.
#pragma once

#include <optional>
#include <string>

#include "control/api/http.h"

namespace edt::control {

// The file at `path` (decoded, from the request) below `dir`, or nullopt.
std::optional<Reply> static_file(const std::string& dir, const std::string& path);

}  // namespace edt::control

// Running a program of the host from edtd, which has threads: the argv is
// made before fork, and the child only execs. The child's stdin is
// /dev/null, its signal mask empty, its descriptors past stderr closed.
#pragma once

#include <string>
#include <vector>

#include "edt/status.h"

namespace edt::control {

// Runs argv (argv[0] an absolute path), waits for it and returns what it
// printed, stdout and stderr together. An error names the command and holds
// that output; a program that cannot be executed says so, with `packages`
// (the Debian packages that bring it) when given.
Result<std::string> run_host_command(const std::vector<std::string>& argv, const std::string& packages = "");

}  // namespace edt::control

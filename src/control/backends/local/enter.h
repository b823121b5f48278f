// Entering a running container from the host, for a command edtd runs
// there (a job): `edtd enter-container <pid>[:<start time>] -- <argv...>`,
// where <pid> is the container's init and <start time> its start (field 22
// of /proc/<pid>/stat) as edtd recorded it. The init is pinned by a pidfd
// and must be a PID namespace's init (never a process of the host's own)
// that started then; its namespaces, root and cgroups are opened through
// its pinned /proc directory, so a pid that was reused in between names
// nothing (proc::PinnedProcess). The command gets the container's cgroups (its pids,
// memory and CPU bounds, cgroups.h), namespaces and root directory and the limits of sandbox_policy.h (the kept capabilities,
// no_new_privs, the seccomp filter), as a process started by the
// container's sshd would; it does not keep edtd's privileges, which
// nsenter(1) would.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "control/model/image_user.h"

namespace edt::control {

// enter-container's --user argument for `user`: "UID:GID[:G1,G2...]",
// and back (uid, gid and groups); nullopt for any other text, or an id
// past kContainerIds.
std::string user_ids(const ContainerUser& user);
std::optional<ContainerUser> parse_user_ids(std::string_view text);

// The first argument edtd's main() hands to enter_container_main().
inline constexpr const char* kEnterContainerCommand = "enter-container";

// argv: {"edtd", "enter-container", "<pid>[:<start time>]", ["--user", user_ids()], "--", program, args...}.
// With --user, the command runs as that user of the container (its image's
// User), with its groups, rather than as the container's root.
// Returns the command's exit code (128 + N for a signal N), or 125 with a
// message on stderr when the container cannot be entered.
int enter_container_main(int argc, char** argv);

}  // namespace edt::control

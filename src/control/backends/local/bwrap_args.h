// bubblewrap's argument list for a container: the sandbox's namespaces and
// limits, its assembled root (local_backend.h: the image's /usr, an /etc
// of links, the container's own writable dirs, the volumes; then the root
// remounted read-only), and the command it runs: sshd, after the Slurm
// daemons on a Slurm cluster, and in bridge mode only once eth0 is up.
//
// bwrap reads its info fd at 3 (where it writes the init's pid), the
// seccomp filter at 4, and in bridge mode its block fd at 5
// (sandbox_process.h's Spawn sets those). A pure function of its inputs
// but for what it reads of the image (which top directories are links) and
// which GPU devices and warm socket exist; any thread may call it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "control/backends/backend.h"
#include "control/backends/local/tool_bundle.h"

namespace edt::control {

// Where a container's pieces are on the host.
struct BwrapLayout {
  std::string dir;          // the container's directory (containers/<name>)
  std::string etc;          // its /etc of links (container_fs.h, etc_links)
  std::string cluster_dir;  // its cluster's directory (clusters/<cluster>)
  std::string warm_dir;     // the warm interpreter's socket directory; "": none
  bool own_network = false; // bridge mode: a network namespace of its own
  // edt's OpenSSH (tool_bundle.h), bound with the tool trees: sshd runs
  // from it; nullopt: the image's own /usr/sbin/sshd.
  std::optional<ToolBundle> tools = std::nullopt;
};

// `shared`: the tool tree and the volumes (with user namespaces, their
// sources as stage_sources() staged them), bound last.
std::vector<std::string> bwrap_args(const SandboxSpec& spec, const BwrapLayout& layout,
                                    const std::vector<SandboxMount>& shared);

}  // namespace edt::control

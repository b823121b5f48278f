// The limits every process of a container runs under, whichever way it came
// in (the sandbox's init and sshd, a job, a warm-started worker):
//
// - Capabilities: only kept_capabilities(), the ones sshd and a root
//   session need inside their own namespaces (change owners and modes, set
//   user and group ids, chroot for sshd's privilege separation, signal its
//   own processes). No CAP_SYS_ADMIN (mount), CAP_MKNOD, CAP_NET_ADMIN or
//   CAP_NET_RAW (the network is the host's), CAP_SYS_PTRACE, CAP_SYS_MODULE,
//   CAP_DAC_READ_SEARCH (open_by_handle_at), CAP_NET_BIND_SERVICE.
// - no_new_privs: a setuid binary or file capability grants nothing.
// - A seccomp filter (the list in sandbox_policy.cc, each with its reason)
//   that answers EPERM to what a training container has no use for and a
//   tenant could use against the host: mounts, device nodes, kernel modules
//   and kexec, bpf, the keyring, new namespaces (a new user namespace would
//   hand back every capability inside it), setns, perf and clock setting.
//   clone3 answers ENOSYS, so that the C library falls back to clone, whose
//   flags the filter can read.
//
// docs/security.md lists what each layer stops and what it does not.
#pragma once

#include <string>
#include <vector>

#include "edt/status.h"

namespace edt::control {

// bubblewrap's names for the capabilities a container keeps
// ("CAP_CHOWN", ...).
const std::vector<std::string>& kept_capabilities();

// The seccomp filter as a classic BPF program (struct sock_filter[]), what
// bubblewrap's --seccomp reads and prctl(PR_SET_SECCOMP) loads.
Result<std::string> seccomp_program();

// In the calling thread, for good: drops every capability but
// kept_capabilities() from all sets (the bounding set included), sets
// no_new_privs and loads the filter. For a process entering a running
// container (edt-enter); async-signal-safe only in the sense that it may
// follow a fork of a single-threaded process.
Status confine_self();

}  // namespace edt::control

// edtd's record of each sandbox it starts, and the decision which
// container a running sandbox is (local_backend.h, "What edtd believes").
//
// The record is containers/<name>/sandbox.json: the cluster and the
// container, written before the sandbox is spawned, then again with its
// init's pid and start time once bwrap names it. The container's directory
// is bound nowhere into the sandbox; the file is edtd's (its owner is
// checked), at most 4 KiB, and never read through a link. A record that is
// missing, not edtd's, or of the wrong shape reads as none.
//
// No state; any thread may call these (the caller orders writes of one
// container's record: LocalBackend::start is its one writer).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "control/backends/backend.h"

namespace edt::control {

// edtd's record of a sandbox it started (containers/<name>/sandbox.json).
struct SandboxRecord {
  std::string cluster;
  std::string container;
  SandboxRef ref;  // its init; pid 0: spawned, but not yet named by bwrap
};

// Writes `record` into the container directory `dir` (write, then rename).
Status write_record(const SandboxRecord& record, const std::string& dir);

// Every record under `containers_dir` (<data dir>/containers) whose
// container is the directory it is in, as edtd wrote it.
std::vector<SandboxRecord> read_records(const std::string& containers_dir);

// Which container the sandbox whose init is `ref` is, from what the kernel
// and edtd say of it, never from its label: the container of its cgroup
// (`in_cgroup`), whose record names no other init; or, in no cgroup of
// edtd's, the one record that names `ref` itself. None otherwise: that
// sandbox is not adopted.
std::optional<FoundSandbox> identify_sandbox(const SandboxRef& ref, const std::optional<std::string>& in_cgroup,
                                             const std::vector<SandboxRecord>& records);

}  // namespace edt::control

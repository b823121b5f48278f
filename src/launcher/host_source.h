// Where an elastic job's hosts come from, behind one interface, so that the
// elastic driver treats -H, a watched hostfile and a discovery script alike
// (and a scheduler's allocation, such as Slurm's, can be one more source).
//
//   FixedHosts       -H (or a hostfile read once): the same list every poll.
//   WatchedHostfile  --hostfile in elastic mode: re-read when it changes
//                    (inotify on its directory, so an atomic rename is seen
//                    at once) and once a second in case a change was missed
//                    (a file system without inotify, a bind mount replaced
//                    from outside).
//   DiscoveryScript  --host-discovery-script: run every discovery interval;
//                    it prints "host:slots" or "host" per line. A run that
//                    exits non-zero or outlasts its timeout is an error. By
//                    default the interval follows the script's own cost:
//                    20 times its last run, within [100 ms, 1 s], so that a
//                    cheap script sees a change within 0.1 s while no
//                    script takes more than about 5% of a core, and none is
//                    run less often than Horovod's fixed 1 s. After a failed
//                    run it waits the 1 s, as Horovod retries.
//
// A source is polled by its owner: poll() returns the hosts as they are now,
// or an error meaning "not known now" (the caller keeps its last list). The
// owner polls again after interval(), or at once when change_fd() (if any)
// is readable and take_change() says the change concerns the hosts.
// Not thread safe; the elastic driver's loop owns its source.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "edt/status.h"
#include "launcher/hostfile.h"
#include "launcher/worker_env.h"

namespace edt::launcher {

class HostSource {
 public:
  virtual ~HostSource() = default;
  virtual Result<std::vector<HostSlots>> poll() = 0;
  virtual std::chrono::milliseconds interval() const = 0;
  // A descriptor that becomes readable when the hosts may have changed; -1: none.
  virtual int change_fd() const { return -1; }
  // Consumes what made change_fd() readable; true if the hosts may differ now.
  virtual bool take_change() { return false; }
};

class FixedHosts final : public HostSource {
 public:
  explicit FixedHosts(std::vector<HostSlots> hosts) : hosts_(std::move(hosts)) {}
  Result<std::vector<HostSlots>> poll() override { return hosts_; }
  std::chrono::milliseconds interval() const override { return std::chrono::milliseconds(1000); }

 private:
  std::vector<HostSlots> hosts_;
};

class WatchedHostfile final : public HostSource {
 public:
  static constexpr std::chrono::milliseconds kPollInterval{1000};

  // Watches `path`'s directory; without inotify it is only polled.
  explicit WatchedHostfile(std::string path);
  ~WatchedHostfile() override;
  WatchedHostfile(const WatchedHostfile&) = delete;
  WatchedHostfile& operator=(const WatchedHostfile&) = delete;

  Result<std::vector<HostSlots>> poll() override { return read_hostfile(path_); }
  std::chrono::milliseconds interval() const override { return kPollInterval; }
  int change_fd() const override { return inotify_fd_; }
  bool take_change() override;

 private:
  std::string path_;
  int inotify_fd_ = -1;
};

struct DiscoveryScriptOptions {
  std::string script;                             // run with /bin/sh -c
  int slots_per_host = 1;                         // for hosts printed without slots
  std::chrono::milliseconds interval{0};          // between runs; 0: from the script's cost (above)
  std::chrono::milliseconds timeout{10000};       // a longer run is killed
  Environment env;                                // the script's environment
};

class DiscoveryScript final : public HostSource {
 public:
  static constexpr std::chrono::milliseconds kFastest{100}, kSlowest{1000};
  static constexpr int kCostFactor = 20;

  explicit DiscoveryScript(DiscoveryScriptOptions options) : options_(std::move(options)) {}
  Result<std::vector<HostSlots>> poll() override;
  std::chrono::milliseconds interval() const override;
  // How long the last run took (0 before the first).
  std::chrono::milliseconds last_run() const { return last_run_; }

 private:
  Result<std::vector<HostSlots>> run();

  DiscoveryScriptOptions options_;
  std::chrono::milliseconds last_run_{0};
  bool last_failed_ = false;
};

// Reads the hosts a discovery script prints: "host:slots" or "host" (then
// `slots_per_host` slots) per line; '#' comments and blank lines skipped.
Result<std::vector<HostSlots>> parse_discovered_hosts(const std::string& text, int slots_per_host);

}  // namespace edt::launcher

// WarmInterpreter: the host's warm Python interpreter (python/edt/_warm/),
// kept running by edtd for the containers of the local backend.
//
// It imports torch and edt.torch once, then forks Python workers on demand
// into the container that asks (edt-warm-run, which edtrun puts in front of
// a Python worker's command), so a worker that joins a job after a scale-up
// does not spend 1.5 s importing torch. One per host (about 250 MB), not one
// per container. Its socket directory is bound read-only into every
// container at /run/edt-warm.
//
// Its socket is a channel from every container to host root (its relays
// run as root until a worker has taken its client's identity), so it
// trusts the kernel only (docs/security.md, "Channels from a container to
// the host"): the client is the process of a pidfd the kernel made at
// connect() (SO_PEERPIDFD, Linux 6.5; on older kernels every request
// starts cold), read through /proc while that pidfd shows it running; a
// worker in another container of the cluster goes to the init that bwrap
// recorded in <containers_dir>/<name>/info.json (child-pid and
// pid-namespace, from --info-fd) and session.json (edtd's), which no
// container can write. It never tells a container a host pid.
//
// edtd's child, with PR_SET_PDEATHSIG: it ends with edtd (workers it started
// keep running) and is started again by the next edtd. keep() restarts it
// if it died, at most once a minute. Thread safe.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace edt::control {

struct WarmInterpreterOptions {
  bool enabled = false;
  std::string python = "/usr/bin/python3";
  std::string dir;                          // holds python.sock and log
  std::string containers_dir;               // edtd's containers: cross-container starts within a cluster
  std::map<std::string, std::string> env;   // PATH, LANG, PYTHONPATH: the containers' own
  std::string seccomp_path;                 // the containers' filter, loaded in their workers
};

class WarmInterpreter {
 public:
  explicit WarmInterpreter(WarmInterpreterOptions options);
  ~WarmInterpreter();  // stops it
  WarmInterpreter(const WarmInterpreter&) = delete;
  WarmInterpreter& operator=(const WarmInterpreter&) = delete;

  // Starts it if it is not running (and was not started in the last minute).
  void keep();
  // The directory to bind into containers; empty when turned off.
  std::string socket_dir() const { return options_.enabled ? options_.dir : std::string(); }

 private:
  void reap();
  void stop();

  WarmInterpreterOptions options_;
  std::mutex mu_;
  pid_t pid_ = 0;
  std::optional<std::chrono::steady_clock::time_point> last_start_;
};

}  // namespace edt::control

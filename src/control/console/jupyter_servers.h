// JupyterServers: one notebook server per cluster, in its launcher
// container, started when first asked for and reused while it runs.
//
// The server runs as the container's user (through Backend::exec, like a
// job), with the first volume's mount path as its root (the home, /root,
// without a volume), the cluster's environment (PATH with edtrun, the
// hostfile at /etc/mpi), JupyterLab where the image has `jupyter-lab` on
// that PATH (the default image has: edt's venv, edtd --venv, comes after
// edt's tools), else Jupyter Notebook (`jupyter-notebook`). JupyterLab asks
// the network for nothing (no extension search, news or update check). It listens on the launcher's
// own address, on a port edtd picks, under base URL /c/<cluster>/jupyter/.
//
// Who can reach it: containers share the host's network, so any process of
// any tenant can connect to that address and port. The server therefore
// takes only requests carrying its token, 32 random bytes that edtd makes
// for each start and passes to it in its environment (never in a URL or on
// a command line a container can read); only edtd's proxy (jupyter_proxy.h)
// sends it. A listener that another tenant put on the port first would make
// the server fail to bind and exit: a start counts as done only when the
// server itself has logged that it runs, and its process is alive.
//
// A server lasts as long as its container: it runs in the container's PID
// namespace, so it ends when the cluster is deleted; ensure() starts a new
// one after that, or after edtd restarted (the one before is ended first).
//
// Thread-safe: ensure() may be called from many request threads; starts of
// one cluster are serialised.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "control/backends/backend.h"
#include "control/model/cluster.h"
#include "control/model/error.h"

namespace edt::control {

struct JupyterEndpoint {
  std::string address;
  int port = 0;
  std::string token;
  std::string base_url;  // "/c/<cluster>/jupyter/"
  int port_retries = 0;   // other ports it may try after `port`: then it says which it took
};

class JupyterServers {
 public:
  static constexpr std::chrono::seconds kStartTimeout{90};

  // dir: where each server's log and exit code are kept; base_env: the
  // environment every job gets (JobRunner's).
  JupyterServers(Backend* backend, std::string dir, std::map<std::string, std::string> base_env);

  // The cluster's running server, started first if none runs in `launcher`
  // (a Running launcher's record); a conflict refusal, with the server's own
  // words, when it cannot start in that image.
  Result<JupyterEndpoint> ensure(const Cluster& cluster, const ContainerRecord& launcher);

  // The base URL of a cluster's server.
  static std::string base_url(const std::string& cluster) { return "/c/" + cluster + "/jupyter/"; }
  // The shell command that starts the server (for tests and the docs), its
  // files in `root` (a shell word: quoted, or "$HOME").
  static std::string command(const JupyterEndpoint& endpoint, const std::string& root);

 private:
  struct Running {
    JupyterEndpoint endpoint;
    SandboxRef container;
    SandboxRef process;
  };

  Result<JupyterEndpoint> start(const Cluster& cluster, const ContainerRecord& launcher);
  // Waits until the log says the server runs (true), or its process ended
  // or kStartTimeout passed (false).
  bool wait_until_serving(const std::string& log_path, const SandboxRef& process);
  std::mutex& start_lock(const std::string& cluster);

  Backend* backend_;
  std::string dir_;
  std::map<std::string, std::string> base_env_;
  std::mutex mu_;
  std::map<std::string, Running> running_;                      // guarded by mu_
  std::map<std::string, std::unique_ptr<std::mutex>> starting_;  // guarded by mu_
};

}  // namespace edt::control

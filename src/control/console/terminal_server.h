// TerminalServer: the console's terminal, a shell in a container over a
// WebSocket, on a small listener of its own next to the API's.
//
// A session is opened through the API (POST .../containers/{c}/terminal,
// which checks the bearer token and the cluster's owner) and gets a one-time
// id valid for kSessionTtl; the browser then connects to
// ws://HOST:port()/terminal/<id>. No token travels in a URL.
//
// Origin: a session accepts a WebSocket whose Origin header is one of the
// origins given at open_session (the console page that asked for it), so a
// page of another site cannot attach to it even with a leaked id (cross-site
// WebSocket hijacking); a mismatch is refused 403 and the session is spent.
// A request with no Origin header comes from no browser page and is taken.
//
// Each connection runs `ssh -tt` to the container on a pty, with the
// cluster's key: the same way in as `edt ssh`, so the shell is a login on
// the container's sshd, with its hostname, /etc/mpi and volumes. ssh checks
// the container's host key against the cluster's known_hosts
// (StrictHostKeyChecking=yes): a host certificate from the cluster's CA for
// the container's address, or no session. Frames:
// binary ones carry bytes both ways; a text frame from the browser is a
// control message, {"type":"resize","cols":C,"rows":R}.
//
// Thread-safe. One thread accepts; each connection gets a thread of its own,
// at most 256 at once (503 beyond); a handshake must arrive within 10 s.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "control/console/websocket.h"
#include "edt/status.h"

namespace edt::control {

struct TerminalTarget {
  std::string container;
  std::string address;  // of its sshd
  int ssh_port = 22;
  std::string user = "root";  // who the session logs in as
  std::string private_key;  // OpenSSH format
  std::string known_hosts;  // the cluster's known_hosts: its host CA (Backend::ssh_known_hosts)
};

class TerminalServer {
 public:
  static constexpr std::chrono::seconds kSessionTtl{30};

  // key_dir: where each session's private key and known_hosts are kept
  // (0600) while it lasts.
  explicit TerminalServer(std::string key_dir);
  ~TerminalServer();

  // Listens on host:port (0: any free port).
  Status start(const std::string& host, int port);
  void stop();
  int port() const { return port_; }

  // A one-time session id for a terminal in `target`, for a WebSocket from
  // one of `origins` ("http://host:port", compared exactly, case aside).
  std::string open_session(TerminalTarget target, std::vector<std::string> origins);

 private:
  struct Pending {
    TerminalTarget target;
    std::vector<std::string> origins;
    std::chrono::steady_clock::time_point expires;
  };

  void accept_loop();
  void serve(int fd);
  // After the handshake: ssh on a pty, its bytes to and from the socket.
  void run_terminal(int fd, const std::string& early_bytes, const TerminalTarget& target, const std::string& files);
  // Moves bytes both ways until either side ends; returns the close frame's
  // payload to send ("" when the connection is gone).
  std::string pump(int fd, int master, websocket::Reader& reader);
  // The session's target, spent, if it exists, has not expired, and takes
  // `origin` ("" when the request sent none).
  std::optional<TerminalTarget> take_session(const std::string& id, const std::string& origin);

  std::string key_dir_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;
  std::mutex mu_;
  std::map<std::string, Pending> pending_;  // guarded by mu_
  std::atomic<int> active_{0};
};

}  // namespace edt::control

// The client side of the warm start: asks the host's warm Python interpreter
// (python/edt/_warm/, a server on a Unix socket) to run a Python command
// as a worker forked from it, with torch already imported, instead of
// starting `python3` afresh.
//
// edt-warm-run (warm_run_main.cc) is what edtrun puts in front of a Python
// worker's command; it uses this module so:
//
//   WarmRequest request{argv, environment};
//   Result<WarmSession> session = warm_start(socket_path, request);
//   if (!session.is_ok()) -> run the command itself (the status says why)
//   else relay_until_exit(*session) -> the worker's exit status
//
// The worker gets this process's stdin, stdout and stderr (passed over the
// socket), its namespaces, root, working directory, credentials and limits
// (the server reads them from the kernel, not from the request). A request
// that names another container of the cluster (edtrun's remote workers in
// a platform cluster) gets that container's namespaces and root instead,
// which spares the worker an ssh connection; the server checks that the
// client runs in a container of the same cluster. Signals
// this process receives are relayed to the worker's process group; if this
// process dies, the server kills the worker.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "edt/status.h"
#include "launcher/worker_env.h"

namespace edt::launcher {

// Where edtd's warm interpreter serves inside a container.
inline constexpr const char* kWarmSocketInContainer = "/run/edt-warm/python.sock";

struct WarmRequest {
  std::vector<std::string> argv;  // python3 [-u] [-B] (script | -m module) args...
  std::vector<std::string> env;   // NAME=VALUE
  // Another container of this one's cluster to start the worker in (empty:
  // this one), the working directory there, and a line the worker prints
  // on stdout before the command runs. Its stdin is then /dev/null.
  std::string host;
  std::string cwd;
  std::string marker;
};

// A worker that the server started; `fd` is the connection to its relay.
struct WarmSession {
  int fd = -1;
  // In this process's PID namespace; 0 when it is not there (a worker in
  // another container). Never a host pid: the server does not say those.
  int worker_pid = 0;
};

// How a worker ended: an exit code, or the signal that killed it.
struct WorkerEnd {
  int code = 0;
  int signal = 0;
};

// True for a command that the warm interpreter may serve: its program is
// python, python3 or python3.N (by name; the server checks it is the same
// interpreter).
bool is_python_command(const std::vector<std::string>& argv);

// The socket to use: $EDT_WARM_SOCKET, or kWarmSocketInContainer. Empty if
// the warm start is turned off ($EDT_WARM_START is 0, off, no or false).
std::string warm_socket_path(const Environment& env);

// edt-warm-run in the directory of the running program (edtrun's), if it
// is there.
std::optional<std::string> warm_run_program();

// EDT_WARM_WORKER=JSON, which tells `edt-warm-run --on HOST -- SSH...` the
// worker to start on HOST; nothing if JSON cannot carry the environment
// (bytes that are not UTF-8) or it is too long for one variable: ssh then
// takes the worker as it is.
std::optional<std::string> warm_worker_variable(const std::vector<std::string>& command, const Environment& env,
                                                const std::string& cwd);

// Connects and sends the request with descriptors 0, 1 and 2; waits up to
// `timeout` for the answer. An error means "not started": no server, a full
// server, or the server's reason for declining (it says why).
Result<WarmSession> warm_start(const std::string& socket_path, const WarmRequest& request,
                               std::chrono::milliseconds timeout = std::chrono::seconds(10));

// Relays each signal read from `signal_fd` (a signalfd of the signals the
// caller blocked) to the worker's process group until the worker ends;
// returns how it ended. With `eof_fd` (>= 0), the end of input on it sends
// the worker SIGTERM, once (edtrun stops a remote worker so). An error if
// the server's relay went away without saying.
Result<WorkerEnd> relay_until_exit(const WarmSession& session, int signal_fd, int eof_fd = -1);

}  // namespace edt::launcher

// A child process of edtrun: a local worker, or the ssh client that carries
// a remote one.
//
// The child runs in its own process group (or session, see SpawnOptions) so
// that stopping it stops what it started too, with /dev/null (or a pipe) as
// stdin and pipes for stdout and stderr. It gets SIGTERM if edtrun dies without
// stopping it. spawn() returns only once the program is running: a command
// that cannot be executed is an error from spawn(), not an exit code.
//
// Not thread safe; the driver's event loop owns every Process.
#pragma once

#include <sys/types.h>

#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "edt/status.h"

namespace edt::launcher {

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH
  std::vector<std::string> env;   // "NAME=VALUE", the whole environment
  // Give the child a pipe as stdin that edtrun holds open; closing it
  // (close_stdin) is how a remote worker is told to stop.
  bool stdin_pipe = false;
  // Lead a session of its own (and so a process group): a local worker, as
  // horovodrun's and edt's remote workers (ssh.cc) do. Where the kernel
  // shares the CPU by session (autogroup, on by default), each rank then
  // gets a share of its own instead of one share among all the local ranks
  // (on a host shared with other sessions, 2 ranks ran about half as fast
  // as horovodrun's). Not for ssh: it asks for passphrases on the terminal.
  bool own_session = false;
};

// How a process ended: an exit code, or the signal that killed it.
struct ExitStatus {
  int code = 0;    // valid when signal == 0
  int signal = 0;

  bool success() const { return signal == 0 && code == 0; }
  // What a shell reports: the code, or 128 + the signal.
  int shell_code() const { return signal != 0 ? 128 + signal : code; }
  // "exited with code 3", "was killed by signal 9 (Killed)".
  std::string describe() const;
};

class Process {
 public:
  static Result<std::unique_ptr<Process>> spawn(const SpawnOptions& options);
  ~Process();  // closes the pipes; a process still running is killed (SIGKILL to its group)
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  // Read ends of the output pipes, non-blocking; -1 once closed.
  int stdout_fd() const { return stdout_fd_; }
  int stderr_fd() const { return stderr_fd_; }
  void close_stdout();
  void close_stderr();
  void close_stdin();

  // Sends `signal` to the child's process group, unless it was reaped.
  void signal_group(int signal);

  // Reaps the child if it has exited (never blocks). What the child left
  // running in its process group is killed first, while the exited child
  // still holds the group id, so no unrelated process can be hit.
  std::optional<ExitStatus> poll_exit();
  const std::optional<ExitStatus>& exit_status() const { return exit_status_; }

 private:
  Process() = default;

  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;
  std::optional<ExitStatus> exit_status_;
};

}  // namespace edt::launcher

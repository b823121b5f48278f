// edt-warm-run PROGRAM [ARGS...]: runs a Python command as a worker forked
// from the host's warm interpreter when one serves (launcher/warm_client.h),
// and otherwise runs it itself, as if edt-warm-run were not there. edtrun
// puts it in front of Python workers' commands; EDT_WARM_START=0 turns it
// off. Exits as the worker did (its code, or the signal that killed it).
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstring>

#include "common/log.h"
#include "launcher/warm_client.h"
#include "launcher/worker_env.h"

namespace {

using namespace edt;
using namespace edt::launcher;

constexpr int kRelayed[] = {SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGTERM, SIGWINCH};

[[noreturn]] void run_cold(char** command) {
  execvp(command[0], command);
  const int err = errno;
  log::error("cannot run '{}': {}", command[0], std::strerror(err));
  _exit(err == ENOENT ? 127 : 126);
}

// Dies as the worker died, so that whoever waits for this process sees the
// same status.
[[noreturn]] void end_like(const WorkerEnd& end) {
  if (end.signal == 0) _exit(end.code);
  signal(end.signal, SIG_DFL);
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_UNBLOCK, &all, nullptr);
  kill(getpid(), end.signal);
  _exit(128 + end.signal);
}

}  // namespace

int main(int argc, char** argv) {
  log::init("edt-warm-run");
  if (argc < 2) {
    log::error("usage: edt-warm-run PROGRAM [ARGS...]");
    return 2;
  }
  const std::vector<std::string> command(argv + 1, argv + argc);
  const Environment env = current_environment();
  const std::string socket = warm_socket_path(env);
  if (socket.empty() || !is_python_command(command) || access(socket.c_str(), F_OK) != 0) run_cold(argv + 1);

  // Signals that arrive from here on are relayed, none is lost.
  sigset_t relayed, old;
  sigemptyset(&relayed);
  for (int sig : kRelayed) sigaddset(&relayed, sig);
  sigprocmask(SIG_BLOCK, &relayed, &old);
  int signal_fd = signalfd(-1, &relayed, SFD_CLOEXEC | SFD_NONBLOCK);
  Result<WarmSession> session = signal_fd < 0 ? Result<WarmSession>(io_error("signalfd", errno))
                                              : warm_start(socket, {command, env_entries(env)});
  if (!session.is_ok()) {
    log::debug("starting {} itself: {}", command[0], session.status().message());
    if (signal_fd >= 0) close(signal_fd);
    sigprocmask(SIG_SETMASK, &old, nullptr);
    run_cold(argv + 1);
  }
  Result<WorkerEnd> end = relay_until_exit(*session, signal_fd);
  if (!end.is_ok()) {
    log::error("{}", end.status().message());
    return 255;
  }
  end_like(*end);
}

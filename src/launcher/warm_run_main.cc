// edt-warm-run PROGRAM [ARGS...]: runs a Python command as a worker forked
// from the host's warm interpreter when one serves (launcher/warm_client.h),
// and otherwise runs it itself, as if edt-warm-run were not there. edtrun
// puts it in front of Python workers' commands; EDT_WARM_START=0 turns it
// off. Exits as the worker did (its code, or the signal that killed it).
//
// edt-warm-run --on HOST -- SSH [ARGS...]: edtrun's remote worker on HOST,
// another container of this one's cluster: the worker (EDT_WARM_WORKER)
// is forked there and prints edtrun's started marker; if the server
// declines, the ssh command given runs instead. The end of stdin stops the
// worker (SIGTERM), as it stops one started over ssh.
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/log.h"
#include "launcher/ssh.h"
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

// edtrun's ssh command, once it is the one to run: only now asks ssh -G
// whether the configuration says how to check host keys.
[[noreturn]] void run_ssh(char** command) {
  std::vector<std::string> argv;
  for (char** a = command; *a != nullptr; ++a) argv.emplace_back(*a);
  argv = settle_host_key_checking(std::move(argv), env_entries(current_environment()));
  std::vector<char*> pointers;
  for (auto& a : argv) pointers.push_back(a.data());
  pointers.push_back(nullptr);
  run_cold(pointers.data());
}

[[noreturn]] void run_fallback(char** command, bool remote) {
  if (remote) run_ssh(command);
  run_cold(command);
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

// The worker of `edt-warm-run --on HOST -- SSH...`: EDT_WARM_WORKER, a JSON
// object {"argv", "env", "cwd"} that edtrun put there, taken out of this
// process's environment so that the fallback does not carry it.
std::optional<WarmRequest> remote_worker(const std::string& host) {
  const char* text = std::getenv("EDT_WARM_WORKER");
  auto parsed = nlohmann::json::parse(text ? text : "", nullptr, false);
  unsetenv("EDT_WARM_WORKER");
  try {
    WarmRequest request{parsed.at("argv"), parsed.at("env"), host, parsed.at("cwd"), std::string(kStartedMarker)};
    return request;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

int run(const WarmRequest& request, const std::string& socket, char** fallback, bool remote) {
  // Signals that arrive from here on are relayed, none is lost.
  sigset_t relayed, old;
  sigemptyset(&relayed);
  for (int sig : kRelayed) sigaddset(&relayed, sig);
  sigprocmask(SIG_BLOCK, &relayed, &old);
  int signal_fd = signalfd(-1, &relayed, SFD_CLOEXEC | SFD_NONBLOCK);
  Result<WarmSession> session =
      signal_fd < 0 ? Result<WarmSession>(io_error("signalfd", errno)) : warm_start(socket, request);
  if (!session.is_ok()) {
    log::debug("starting {} itself: {}", fallback[0], session.status().message());
    if (signal_fd >= 0) close(signal_fd);
    sigprocmask(SIG_SETMASK, &old, nullptr);
    run_fallback(fallback, remote);
  }
  Result<WorkerEnd> end = relay_until_exit(*session, signal_fd, request.host.empty() ? -1 : 0);
  if (!end.is_ok()) {
    log::error("{}", end.status().message());
    return 255;
  }
  end_like(*end);
}

}  // namespace

int main(int argc, char** argv) {
  log::init("edt-warm-run");
  const bool remote = argc >= 4 && std::strcmp(argv[1], "--on") == 0 && std::strcmp(argv[3], "--") == 0;
  if (argc < 2 || (remote && argc < 5)) {
    log::error("usage: edt-warm-run PROGRAM [ARGS...] | edt-warm-run --on HOST -- FALLBACK [ARGS...]");
    return 2;
  }
  char** fallback = remote ? argv + 4 : argv + 1;
  std::optional<WarmRequest> request = remote ? remote_worker(argv[2]) : std::nullopt;
  if (!remote) {
    request.emplace();
    request->argv.assign(argv + 1, argv + argc);
  }
  const Environment env = current_environment();
  const std::string socket = warm_socket_path(env);
  if (!request || socket.empty() || !is_python_command(request->argv) || access(socket.c_str(), F_OK) != 0)
    run_fallback(fallback, remote);
  if (!remote) request->env = env_entries(env);
  return run(*request, socket, fallback, remote);
}

// edt-local-launch: starts N ranks of a command on this machine with the
// EDT_* environment and a TCP store, for benchmarks and multi-process tests
// that must not depend on the edtrun launcher.
//
//   edt-local-launch -np 2 [--hosts a,b] -- command [args...]
//
// --hosts gives host identities, one per rank block of equal size (so
// "--hosts a,b" with -np 4 puts ranks 0-1 on a and 2-3 on b). Exits with the
// first non-zero exit status of a rank; on a failure the others are killed.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <vector>

#include "edt/tcp_store.h"

int main(int argc, char** argv) {
  int np = 1;
  std::string hosts_text;
  std::vector<std::string> command;
  CLI::App app{"edt-local-launch: run N local ranks with EDT_* set"};
  app.add_option("-n,--np", np, "number of ranks")->required()->check(CLI::PositiveNumber);
  app.add_option("--hosts", hosts_text, "comma-separated host identities, one per block of ranks");
  app.add_option("command", command, "command and arguments")->required();
  // mpirun's spelling: -np is one flag, not -n with value "p".
  std::vector<std::string> args(argv + 1, argv + argc);
  for (auto& a : args)
    if (a == "-np") a = "--np";
  std::reverse(args.begin(), args.end());
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  std::vector<std::string> hosts;
  std::stringstream in(hosts_text);
  for (std::string h; std::getline(in, h, ',');)
    if (!h.empty()) hosts.push_back(h);
  if (hosts.size() > size_t(np)) {
    std::fprintf(stderr, "edt-local-launch: %zu hosts for %d ranks\n", hosts.size(), np);
    return 2;
  }
  auto server = edt::TcpStoreServer::start({.host = "127.0.0.1", .port = 0});
  if (!server.is_ok()) {
    std::fprintf(stderr, "edt-local-launch: %s\n", server.status().to_string().c_str());
    return 1;
  }
  const std::string coordinator = "127.0.0.1:" + std::to_string((*server)->port());
  std::vector<pid_t> pids;
  for (int rank = 0; rank < np; ++rank) {
    pid_t pid = fork();
    if (pid == 0) {
      setenv("EDT_RANK", std::to_string(rank).c_str(), 1);
      setenv("EDT_SIZE", std::to_string(np).c_str(), 1);
      setenv("EDT_COORDINATOR", coordinator.c_str(), 1);
      if (!hosts.empty()) {
        size_t per = (size_t(np) + hosts.size() - 1) / hosts.size();
        setenv("EDT_HOSTNAME", hosts[size_t(rank) / per].c_str(), 1);
      }
      std::vector<char*> args;
      for (auto& a : command) args.push_back(a.data());
      args.push_back(nullptr);
      execvp(args[0], args.data());
      std::perror(("edt-local-launch: exec " + command[0]).c_str());
      _exit(127);
    }
    pids.push_back(pid);
  }
  int result = 0;
  for (size_t left = pids.size(); left > 0; --left) {
    int status = 0;
    pid_t done = wait(&status);
    if (done < 0) break;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code != 0 && result == 0) {
      result = code;
      for (pid_t p : pids)
        if (p != done) kill(p, SIGTERM);
    }
  }
  return result;
}

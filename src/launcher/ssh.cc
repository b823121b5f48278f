#include "launcher/ssh.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>

#include "launcher/process.h"

namespace edt::launcher {

std::string remote_worker_script(const std::string& cwd, const Environment& env, const std::vector<std::string>& command,
                                 std::chrono::seconds grace, bool warm) {
  std::string env_words;
  for (const auto& [name, value] : env) env_words += " " + shell_quote(name + "=" + value);
  std::string command_words;
  for (const auto& word : command) command_words += " " + shell_quote(word);
  const std::string program = shell_quote(command.front());
  const std::string where = "on $(hostname)";
  const std::string g = std::to_string(grace.count());
  // fd 3 keeps the ssh channel: an asynchronous list gets /dev/null as stdin,
  // but an explicit redirection from fd 3 is kept.
  return "exec 3<&0 </dev/null\n"
         "cd " + shell_quote(cwd) + " 2>/dev/null || { echo \"edtrun: directory \"" + shell_quote(cwd) + "\" does not exist " + where +
         "; run edtrun from a directory that exists on every host\" >&2; exit 127; }\n"
         + (env.count("PATH") ? "PATH=" + shell_quote(env.at("PATH")) + "\n" : std::string()) +
         "command -v " + program + " >/dev/null 2>&1 || { echo \"edtrun: command \"" + program + "\" not found " + where +
         " (PATH=$PATH); install it there or give its full path\" >&2; exit 127; }\n"
         + (warm ? "warm=; command -v edt-warm-run >/dev/null 2>&1 && warm=edt-warm-run\n" : "") +
         "echo '" + std::string(kStartedMarker) + "'\n"
         "setsid env" + env_words + (warm ? " $warm" : "") + command_words + " 3<&- &\n"
         "worker=$!\n"
         "setsid sh -c 'cat >/dev/null; kill -TERM -$1 2>/dev/null; sleep " + g +
         "; kill -KILL -$1 2>/dev/null' edtrun-watch \"$worker\" <&3 >/dev/null 2>&1 &\n"
         "watcher=$!\n"
         "exec 3<&-\n"
         "wait \"$worker\" 2>/dev/null\n"
         "status=$?\n"
         "kill -KILL -\"$worker\" -\"$watcher\" 2>/dev/null\n"
         "exit \"$status\"\n";
}

namespace {

// All of `fd` until end-of-file (it may be non-blocking).
std::string read_all(int fd) {
  std::string out;
  char buffer[4096];
  while (true) {
    ssize_t n = read(fd, buffer, sizeof buffer);
    if (n > 0) {
      out.append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      return out;
    } else {
      pollfd p{fd, POLLIN, 0};
      poll(&p, 1, -1);
    }
  }
}

// What `ssh -G ARGS...` (ARGS: options, then the host) says of StrictHostKeyChecking.
bool probe_host_key_checking(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  std::vector<std::string> argv = {"ssh", "-G"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto probe = Process::spawn({argv, env});
  if (!probe.is_ok()) return false;
  (*probe)->close_stderr();
  const std::string config = "\n" + read_all((*probe)->stdout_fd());
  const std::string key = "\nstricthostkeychecking ";
  const size_t at = config.find(key);
  if (at == std::string::npos) return false;
  const std::string value = config.substr(at + key.size(), config.find('\n', at + 1) - at - key.size());
  return value != "ask";
}

}  // namespace

bool host_key_checking_configured(const std::string& host, const SshOptions& options,
                                  const std::vector<std::string>& env) {
  std::vector<std::string> args;
  for (const auto& option : options.options) args.insert(args.end(), {"-o", option});
  if (options.port != 0) args.insert(args.end(), {"-p", std::to_string(options.port)});
  args.push_back(host);
  return probe_host_key_checking(args, env);
}

std::vector<std::string> settle_host_key_checking(std::vector<std::string> argv, const std::vector<std::string>& env) {
  const std::vector<std::string> ours = {"-o", std::string(kNoHostKeyChecking)};
  auto at = std::find_end(argv.begin(), argv.end(), ours.begin(), ours.end());
  if (argv.size() < 3 || at == argv.end()) return argv;
  std::vector<std::string> args(argv.begin() + 1, at);
  args.insert(args.end(), at + 2, argv.end() - 1);  // without ours and the remote command
  if (probe_host_key_checking(args, env)) argv.erase(at, at + 2);
  return argv;
}

std::vector<std::string> ssh_command(const std::string& host, const SshOptions& options, const std::string& script,
                                     bool host_keys_configured) {
  std::vector<std::string> argv = {"ssh", "-T", "-x", "-a"};
  // ssh keeps the first value it gets for an option, so the user's come
  // before edtrun's defaults and override them.
  for (const auto& option : options.options) argv.insert(argv.end(), {"-o", option});
  // Hosts of a training cluster are often recreated with new host keys (as
  // horovodrun assumes): unless the user's ssh configuration says how to
  // check them, they are not checked.
  if (!host_keys_configured) argv.insert(argv.end(), {"-o", std::string(kNoHostKeyChecking)});
  argv.insert(argv.end(), {
      "-o", "BatchMode=yes",
      // Keeps the "added to known hosts" warning out of worker output.
      "-o", "LogLevel=ERROR",
      "-o", "ConnectTimeout=" + std::to_string(options.connect_timeout.count()),
      // A host that vanishes is noticed within 30 s, and its workers count as failed.
      "-o", "ServerAliveInterval=10",
      "-o", "ServerAliveCountMax=3",
  });
  if (options.port != 0) argv.insert(argv.end(), {"-p", std::to_string(options.port)});
  if (!options.identity_file.empty()) argv.insert(argv.end(), {"-i", options.identity_file});
  argv.push_back(host);
  argv.push_back("exec /bin/sh -c " + shell_quote(script));
  return argv;
}

}  // namespace edt::launcher

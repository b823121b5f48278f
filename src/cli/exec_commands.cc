// edt ssh, edt exec and edt run: a shell or a command in a container;
// edt jupyter: the link to the cluster's notebook server.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "common/log.h"
#include "common/process.h"
#include "common/shell.h"
#include "edt_api/contract.h"

namespace edt::cli {
namespace {

using nlohmann::json;

// "tthvd-worker-3" -> "tthvd"; "tthvd-launcher" -> "tthvd".
std::string cluster_of(const std::string& container) {
  auto pos = container.rfind("-launcher");
  if (pos != std::string::npos && pos + 9 == container.size()) return container.substr(0, pos);
  pos = container.rfind("-worker-");
  if (pos != std::string::npos) return container.substr(0, pos);
  return "";
}

std::string join_command(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) {
    bool plain = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                                   "-_./=:,@%+") == std::string::npos;
    out += (out.empty() ? "" : " ") + (plain ? a : shell_quote(a));
  }
  return out;
}

// Runs a job, streams its output, and returns its exit code.
int run_job(const std::string& cluster, const std::string& container, const std::vector<std::string>& command) {
  if (command.empty()) return usage_error("no command given", "put the command after --, e.g. edt run tthvd -- hostname");
  namespace request = api::fields::JobRequest;
  namespace job_field = api::fields::Job;
  json body = {{key(request::command), join_command(command)}};
  if (!container.empty()) body[key(request::container)] = container;
  Client client(load_endpoint());
  json job;
  if (auto f = client.call("POST", "/clusters/" + cluster + "/jobs", &body, &job)) return fail(*f);
  const std::string id = std::to_string(job[key(api::fields::JobStarted::id)].get<int64_t>());
  if (auto f = client.stream("/jobs/" + id + "/log", [](const char* data, size_t n) {
        fwrite(data, 1, n, stdout);
        fflush(stdout);
      }))
    return fail(*f);
  json done;
  if (auto f = client.call("GET", "/jobs/" + id, nullptr, &done)) return fail(*f);
  const std::string message = done[key(job_field::message)];
  if (!message.empty()) log::error("job {}: {}", id, message);
  int code = done[key(job_field::exit_code)].get<int>();
  return code < 0 ? 1 : code;
}

// Runs the program argv[0] (ssh, xdg-open), then removes `files`; returns
// its exit code (127: it could not be run).
int run_program(std::vector<std::string> argv, const std::vector<std::string>& files) {
  const std::vector<char*> args = proc::c_strings(argv);  // before fork: the child only execs
  pid_t pid = fork();
  if (pid == 0) {
    execvp(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  for (const auto& f : files) unlink(f.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// Writes `content` to a new private file in /tmp named after `pattern`
// (mkstemp's, ending in XXXXXX); returns its path, or "" if it cannot.
std::string write_temp_file(std::string pattern, const std::string& content) {
  int fd = mkstemp(pattern.data());
  if (fd < 0) return "";
  const bool written = write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  close(fd);
  if (!written) unlink(pattern.c_str());
  return written ? pattern : "";
}

struct SshOptions {
  std::string name, container;
  std::vector<std::string> command;
};

int ssh_into(const SshOptions& o) {
  namespace access = api::fields::SshAccess;
  Client client(load_endpoint());
  json info;
  if (auto f = client.call("GET", "/clusters/" + o.name + "/ssh", nullptr, &info)) return fail(*f);
  const std::string container = o.container.empty() ? o.name + "-launcher" : o.container;
  std::string address;
  int port = info[key(access::port)].get<int>();
  for (const auto& c : info[key(access::containers)]) {
    if (c["name"] != container) continue;
    address = c["address"];
    if (c.contains("port")) port = c["port"].get<int>();  // its own sshd's port, where it has one
  }
  if (address.empty())
    return usage_error("cluster " + o.name + " has no container " + container, "see edt cluster get " + o.name);
  // The key, and the cluster's host CA that vouches for its containers'
  // host keys, in files only while ssh runs.
  const std::string key_path = write_temp_file("/tmp/edt-ssh-key-XXXXXX", info[key(access::private_key)]);
  const std::string hosts_path = write_temp_file("/tmp/edt-ssh-known-hosts-XXXXXX", info[key(access::known_hosts)]);
  if (key_path.empty() || hosts_path.empty()) {
    for (const auto& f : {key_path, hosts_path}) unlink(f.c_str());
    return usage_error("cannot write the session's key files in /tmp", "check that /tmp is writable and not full");
  }
  std::vector<std::string> argv = {"ssh", "-i", key_path, "-p", std::to_string(port),
                                   "-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=" + hosts_path,
                                   "-o", "GlobalKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
                                   // Its certificate names it; the address may be its node's.
                                   "-o", "HostKeyAlias=" + container,
                                   // "--": the destination is never read as an option.
                                   "--", info[key(access::user)].get<std::string>() + "@" + address};
  if (!o.command.empty()) argv.push_back(join_command(o.command));
  return run_program(argv, {key_path, hosts_path});
}

struct JupyterOptions {
  std::string name;
  bool open = false;
};

// Starts the cluster's notebook server if need be and prints its one-time
// login link (with --open, opens it in the desktop's browser too).
int jupyter(const JupyterOptions& o) {
  namespace session = api::fields::JupyterSession;
  const Endpoint endpoint = load_endpoint();
  Client client(endpoint);
  json info;
  const json body = json::object();
  if (auto f = client.call("POST", "/clusters/" + o.name + "/jupyter", &body, &info)) return fail(*f);
  std::string base = endpoint.api;
  while (!base.empty() && base.back() == '/') base.pop_back();
  const std::string url = base + info[key(session::url)].get<std::string>();
  std::printf("%s\n", url.c_str());
  std::fflush(stdout);
  log::info("the link works once, within {} s; it leaves a session cookie in the browser",
            info[key(session::expires_in)].get<int>());
  if (!o.open) return 0;
  if (run_program({"xdg-open", url}, {}) != 0)
    return usage_error("xdg-open could not open " + url, "open the link in a browser yourself");
  return 0;
}

int exec_in(const SshOptions& o) {
  std::string owner = cluster_of(o.container);
  if (owner.empty())
    return usage_error("'" + o.container + "' is not a container name",
                       "name it as NAME-launcher or NAME-worker-I (see edt cluster get NAME)");
  return run_job(owner, o.container, o.command);
}

}  // namespace

void add_exec_commands(CLI::App& app, Action* action) {
  auto ssh = std::make_shared<SshOptions>();
  auto* ssh_cmd = app.add_subcommand("ssh", "open a shell in a container (the launcher by default)");
  ssh_cmd->add_option("name", ssh->name)->required();
  ssh_cmd->add_option("container", ssh->container, "e.g. tthvd-worker-0");
  ssh_cmd->add_option("command", ssh->command, "a command to run instead of a shell");
  ssh_cmd->callback([ssh, action] { *action = [ssh] { return ssh_into(*ssh); }; });

  auto notebook = std::make_shared<JupyterOptions>();
  auto* jupyter_cmd = app.add_subcommand("jupyter", "print the link to Jupyter in the cluster's launcher (starts it)");
  jupyter_cmd->add_option("name", notebook->name)->required();
  jupyter_cmd->add_flag("--open", notebook->open, "open the link with xdg-open too");
  jupyter_cmd->callback([notebook, action] { *action = [notebook] { return jupyter(*notebook); }; });

  auto exec = std::make_shared<SshOptions>();
  auto* exec_cmd = app.add_subcommand("exec", "run a command in a container: edt exec CONTAINER -- CMD...");
  exec_cmd->add_option("container", exec->container)->required();
  exec_cmd->add_option("command", exec->command)->required();
  exec_cmd->callback([exec, action] { *action = [exec] { return exec_in(*exec); }; });

  auto run = std::make_shared<SshOptions>();
  auto* run_cmd = app.add_subcommand("run", "run a command in the launcher: edt run NAME -- CMD...");
  run_cmd->add_option("name", run->name)->required();
  run_cmd->add_option("command", run->command)->required();
  run_cmd->callback([run, action] { *action = [run] { return run_job(run->name, "", run->command); }; });
}

}  // namespace edt::cli

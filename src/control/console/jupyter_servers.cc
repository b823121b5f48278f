#include "control/console/jupyter_servers.h"

#include <poll.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "common/io.h"
#include "common/net.h"
#include "common/process.h"
#include "common/shell.h"
#include "control/console/random_hex.h"
#include "control/model/container_files.h"

namespace edt::control {

namespace fs = std::filesystem;

namespace {

// What the notebook server (Notebook 6 and Jupyter Server alike) logs once
// it listens.
constexpr std::string_view kServingLine = "is running at";

// JupyterLab asks the network for nothing: its extension manager only lists
// what is installed (its default searches PyPI), no news feed, no check for
// a newer JupyterLab.
constexpr std::string_view kLabOffline =
    " --LabApp.extension_manager=readonly --LabApp.news_url=None"
    " --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate";

// JupyterLab writes the server's token into its pages, for its scripts to
// send; through edtd's proxy they need none (it adds the token to every
// request it forwards, a session cookie authenticates the browser), and the
// token stays out of the page: the config empties it. It also turns off the
// prompt to fetch Jupyter's news (nothing is fetched: kLabOffline).
constexpr std::string_view kLabConfig =
    "cat > /tmp/.edt-jupyter-config.py <<'EOF'\n"
    "c.ServerApp.tornado_settings = {'page_config_hook': lambda handler, config: {**config, 'token': '',\n"
    "  'disabledExtensions': config.get('disabledExtensions', []) + ['@jupyterlab/apputils-extension:announcements']}}\n"
    "EOF\n";

// The last lines of a server's log, for an error message.
std::string log_tail(const std::string& path) {
  std::string text = io::read_file(path);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (text.empty()) return "(its log is empty)";
  size_t start = text.size();
  for (int lines = 0; lines < 3 && start != std::string::npos && start > 0; ++lines) start = text.rfind('\n', start - 1);
  return start == std::string::npos ? text : text.substr(start + 1);
}

// Where the server's files go, for the shell: the first volume, else the
// home of the user it runs as (the image's User, or root).
std::string root_dir(const ClusterSpec& spec) {
  return spec.mounts.empty() ? "\"$HOME\"" : shell_quote(spec.mounts.front().path);
}

}  // namespace

JupyterServers::JupyterServers(Backend* backend, std::string dir, std::map<std::string, std::string> base_env)
    : backend_(backend), dir_(std::move(dir)), base_env_(std::move(base_env)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
}

std::string JupyterServers::command(const JupyterEndpoint& e, const std::string& root) {
  // The pid file lets a later start end the server an earlier edtd started
  // (only if that pid is still a Jupyter server); `exec` keeps the pid.
  const std::string common = " --ip=" + e.address + " --port=" + std::to_string(e.port) + " --port-retries=" +
                             std::to_string(e.port_retries) + " --no-browser --allow-root --notebook-dir=" + root;
  // A terminal's shell is bash with the server's environment, a job's (edt's
  // tools and venv on PATH), rather than Jupyter's login shell, which gets
  // them back only from /etc/profile.d/edt.sh after /etc/profile's reset.
  const std::string shell = "_settings=\"{'shell_command': ['/bin/bash']}\"";
  return "f=/tmp/.edt-jupyter.pid\n"
         "if [ -s $f ] && p=$(cat $f) && grep -qa jupyter /proc/$p/cmdline 2>/dev/null; then kill $p; fi\n"
         "echo $$ > $f\n"
         "if command -v jupyter-lab >/dev/null; then\n" + std::string(kLabConfig) +
         "exec jupyter-lab --config=/tmp/.edt-jupyter-config.py" + common +
         " --ServerApp.base_url=" + shell_quote(e.base_url) + " --ServerApp.allow_remote_access=True --ServerApp.terminado" + shell +
         std::string(kLabOffline) + "\n"
         "elif command -v jupyter-notebook >/dev/null; then exec jupyter-notebook" + common +
         " --NotebookApp.base_url=" + shell_quote(e.base_url) + " --NotebookApp.allow_remote_access=True --NotebookApp.terminado" + shell + "\n"
         "else echo 'the image has neither jupyter-lab nor jupyter-notebook on its PATH' >&2; exit 127; fi\n";
}

std::mutex& JupyterServers::start_lock(const std::string& cluster) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = starting_[cluster];
  if (!slot) slot = std::make_unique<std::mutex>();
  return *slot;
}

Result<JupyterEndpoint> JupyterServers::ensure(const Cluster& cluster, const ContainerRecord& launcher) {
  std::lock_guard<std::mutex> starting(start_lock(cluster.spec.name));
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = running_.find(cluster.spec.name);
    if (it != running_.end() && it->second.container == launcher.sandbox && proc::alive(it->second.process))
      return it->second.endpoint;
    running_.erase(cluster.spec.name);
  }
  return start(cluster, launcher);
}

constexpr uint16_t kOwnNamespacePort = 8888;
constexpr int kNodePortRetries = 100;

// The port in the server's "is running at http://ADDRESS:PORT/..." line.
std::optional<int> serving_port(const std::string& log) {
  const size_t line = log.find(kServingLine);
  if (line == std::string::npos) return std::nullopt;
  const size_t scheme = log.find("://", line);
  const size_t colon = scheme == std::string::npos ? scheme : log.find(':', scheme + 3);
  if (colon == std::string::npos) return std::nullopt;
  int port = 0;
  auto [end, ec] = std::from_chars(log.data() + colon + 1, log.data() + log.size(), port);
  if (ec != std::errc() || port <= 0 || port > 65535 || end == log.data() + log.size() || *end != '/')
    return std::nullopt;
  return port;
}

Result<JupyterEndpoint> JupyterServers::start(const Cluster& cluster, const ContainerRecord& launcher) {
  const std::string& name = cluster.spec.name;
  // A 127.x address is in edtd's own network namespace (loopback mode), where
  // any port may be taken; any other is a launcher's own namespace on a
  // bridge (container_network.h), where a fixed port is the server's.
  // A launcher on its node's network (Slurm's --slurm-mode user) shares the
  // node's ports with all that runs there: the server tries ports from
  // kOwnNamespacePort on and says which it took.
  const bool own_namespace = !launcher.status.address.starts_with("127.");
  const SshEndpoint ssh = backend_->ssh_endpoint(launcher.status.name, launcher.status.address);
  auto port = own_namespace ? Result<uint16_t>(kOwnNamespacePort) : net::free_port(launcher.status.address);
  if (!port.is_ok()) return conflict("name", "no free port on " + launcher.status.address + ": " + port.status().message(),
                                     "retry; if it persists, see edtd's log");
  JupyterEndpoint endpoint{ssh.node_network ? ssh.address : launcher.status.address, *port, random_hex(32),
                           base_url(name), ssh.node_network ? kNodePortRetries : 0};
  ExecSpec exec;
  exec.container = launcher.status.name;
  exec.command = command(endpoint, root_dir(cluster.spec));
  exec.log_path = dir_ + "/" + name + ".log";
  exec.exit_path = dir_ + "/" + name + ".exit";
  std::error_code ec;
  fs::remove(exec.exit_path, ec);
  std::ofstream(exec.log_path, std::ios::trunc).flush();
  exec.env = container_env(cluster.spec, launcher.status, base_env_);
  exec.env["JUPYTER_TOKEN"] = endpoint.token;
  exec.env["SHELL"] = "/bin/bash";
  auto process = backend_->exec(launcher.sandbox, exec);
  if (!process.is_ok())
    return conflict("name", "Jupyter could not start in " + launcher.status.name + ": " + process.status().message(),
                    "wait until the launcher is Running");
  if (!wait_until_serving(exec.log_path, *process)) {
    return conflict("image",
                    "Jupyter did not start in " + launcher.status.name + " (image " + cluster.spec.image +
                        "): " + log_tail(exec.log_path),
                    "run make deps, which puts JupyterLab in edt's venv (the default image's, edtd --venv), or "
                    "use an image with jupyter-lab or jupyter-notebook on its PATH");
  }
  if (endpoint.port_retries > 0) endpoint.port = serving_port(io::read_file(exec.log_path)).value_or(endpoint.port);
  std::lock_guard<std::mutex> lock(mu_);
  running_[name] = Running{endpoint, launcher.sandbox, *process};
  return endpoint;
}

bool JupyterServers::wait_until_serving(const std::string& log_path, const SandboxRef& process) {
  const auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (io::read_file(log_path).find(kServingLine) != std::string::npos) return proc::alive(process);
    if (!proc::alive(process)) return false;
    ::poll(nullptr, 0, 50);  // the log has no event to wait on; look again
  }
  return false;
}

}  // namespace edt::control

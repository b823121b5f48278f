// edtd: the edt daemon. Serves the REST API, keeps the store, and runs the
// reconcile loop that makes containers match it. Containers outlive edtd; a
// restarted edtd re-adopts them from the store.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "common/net.h"
#include "common/units.h"
#include "control/api/server.h"
#include "control/console/console_routes.h"
#include "control/backends/local/local_backend.h"
#include "control/jobs/job_runner.h"
#include "control/reconcile/reconciler.h"
#include "control/store/store.h"

namespace edt::control {
namespace {

namespace fs = std::filesystem;

struct Flags {
  std::string data_dir = "/var/lib/edt";
  std::string listen = "127.0.0.1:7470";
  std::string gpus;
  std::string address_range = "127.77.0.0/16";
  int ssh_port = 2222;
  std::string grace = "10s";
  std::string web_dir;
  std::string terminal_listen;  // empty: the API's host, any free port
};

// "NVIDIA-P4=8,NVIDIA-T4=2" -> simulated GPUs.
Result<std::vector<Gpu>> parse_gpu_flag(const std::string& text) {
  std::vector<Gpu> gpus;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    auto eq = item.find('=');
    int count = 0;
    try {
      count = eq == std::string::npos ? 0 : std::stoi(item.substr(eq + 1));
    } catch (...) {
    }
    if (eq == 0 || eq == std::string::npos || count <= 0 || count > 1024)
      return invalid_argument("--gpus: '" + item + "' is not MODEL=COUNT; write e.g. --gpus NVIDIA-P4=8");
    for (int i = 0; i < count; ++i) gpus.push_back({static_cast<int>(gpus.size()), item.substr(0, eq), true, ""});
    start = end + 1;
  }
  return gpus;
}

// The GPUs nvidia-smi reports; none if it is missing or fails.
std::vector<Gpu> detect_gpus() {
  std::vector<Gpu> gpus;
  if (access("/usr/bin/nvidia-smi", X_OK) != 0) return gpus;
  FILE* p = popen("/usr/bin/nvidia-smi --query-gpu=index,name --format=csv,noheader 2>/dev/null", "r");
  if (!p) return gpus;
  std::array<char, 512> line;
  while (fgets(line.data(), line.size(), p)) {
    std::string text(line.data());
    auto comma = text.find(',');
    if (comma == std::string::npos) continue;
    std::string model = text.substr(comma + 1);
    while (!model.empty() && (model.front() == ' ')) model.erase(0, 1);
    while (!model.empty() && (model.back() == '\n' || model.back() == ' ')) model.pop_back();
    for (auto& c : model)
      if (c == ' ') c = '-';
    gpus.push_back({std::atoi(text.c_str()), model, false, ""});
  }
  pclose(p);
  return gpus;
}

// Where this edtd's own files are: the tools and the Python package that
// containers get, and the web console. An edtd run from the build tree uses
// the build and source trees; any other finds them relative to its own
// executable (<prefix>/bin/edtd), so an installed tree or package works
// wherever it was put, without flags.
struct Layout {
  std::vector<std::string> tool_binds;  // bound read-only into containers
  std::vector<std::string> tool_path;
  std::string python_path;
  std::string web_dir;  // empty: no console was built
};

Layout find_layout() {
  Layout layout;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  const std::string source_dir = EDT_SOURCE_DIR, binary_dir = EDT_BINARY_DIR;
  if (self.string().starts_with(binary_dir + "/")) {
    layout.tool_binds.push_back(source_dir);
    if (!binary_dir.starts_with(source_dir + "/")) layout.tool_binds.push_back(binary_dir);
    for (const char* sub : {"/src/launcher", "/bench", "/src/cli", "/src/control"})
      layout.tool_path.push_back(binary_dir + sub);
    layout.python_path = binary_dir + "/python";  // the package with its built extension
    if (fs::exists(binary_dir + "/web/dist/index.html")) layout.web_dir = binary_dir + "/web/dist";
    return layout;
  }
  const std::string prefix =
      ec ? std::string(EDT_INSTALL_PREFIX) : fs::weakly_canonical(self.parent_path() / EDT_BIN_TO_PREFIX).string();
  // /usr is in every container already (the image's), and Debian's python3
  // searches /usr/lib/python3/dist-packages; any other prefix is bound in
  // and named on PYTHONPATH.
  if (prefix != "/usr" && !prefix.starts_with("/usr/")) layout.tool_binds.push_back(prefix);
  if (prefix != "/usr") layout.python_path = prefix + "/" + EDT_PYTHON_INSTALL_DIR;
  layout.tool_path.push_back(prefix + "/" + EDT_INSTALL_BINDIR);
  const std::string console = prefix + "/" + EDT_INSTALL_DATADIR + "/edt/web";
  if (fs::exists(console + "/index.html")) layout.web_dir = console;
  return layout;
}

Status ensure_admin(ControlStore* store, const std::string& data_dir) {
  for (const auto& user : store->users())
    if (user.admin) return Status::ok();
  EDT_RETURN_IF_ERROR(store->create_user("admin", true));
  const std::string token = new_token();
  EDT_RETURN_IF_ERROR(store->add_token("admin", hash_token(token)));
  const std::string path = data_dir + "/admin.token";
  {
    std::ofstream out(path, std::ios::trunc);
    out << token << "\n";
    if (!out) return io_error("write " + path, errno);
  }
  ::chmod(path.c_str(), 0600);
  fprintf(stderr, "edtd: made the admin token; it is in %s\n", path.c_str());
  return Status::ok();
}

// A HOST:PORT flag; a port of 0 (any free one) only where allow_any_port.
Result<net::HostPort> parse_listen_flag(const std::string& flag, const std::string& text, const std::string& example,
                                        bool allow_any_port) {
  auto parsed = net::parse_host_port(text, allow_any_port);
  if (!parsed.is_ok())
    return invalid_argument(flag + " '" + text + "' is not HOST:PORT; write e.g. " + flag + " " + example);
  return parsed;
}

// Everything the flags say, checked. Nothing is created until all of them
// are good, so a bad flag leaves no data dir, store or token behind.
struct Settings {
  AddressRange range;
  std::chrono::milliseconds grace{};
  net::HostPort listen;
  net::HostPort terminal_listen;
  std::vector<Gpu> gpus;
  bool simulated_gpus = false;
  Layout layout;
};

Result<Settings> check_flags(const Flags& flags) {
  Settings settings;
  auto range = AddressRange::parse(flags.address_range);
  if (!range.is_ok()) return range.status().with_context("--address-range");
  settings.range = *range;
  auto grace = parse_duration(flags.grace);
  if (!grace.is_ok()) return grace.status().with_context("--grace");
  settings.grace = *grace;
  EDT_ASSIGN_OR_RETURN(settings.listen, parse_listen_flag("--listen", flags.listen, "127.0.0.1:7470", false));
  settings.terminal_listen = {settings.listen.host, 0};
  if (!flags.terminal_listen.empty()) {
    EDT_ASSIGN_OR_RETURN(settings.terminal_listen,
                         parse_listen_flag("--terminal-listen", flags.terminal_listen, "127.0.0.1:7471", true));
  }
  if (flags.ssh_port < 1 || flags.ssh_port > 65535)
    return invalid_argument("--ssh-port " + std::to_string(flags.ssh_port) +
                            " is not a port; write e.g. --ssh-port 2222");
  if (!flags.gpus.empty()) {
    EDT_ASSIGN_OR_RETURN(settings.gpus, parse_gpu_flag(flags.gpus));
    settings.simulated_gpus = true;
  }
  std::error_code ec;
  if (fs::exists(flags.data_dir, ec) && !fs::is_directory(flags.data_dir, ec))
    return invalid_argument("--data-dir " + flags.data_dir + " exists and is not a directory; give a directory");
  settings.layout = find_layout();
  if (!flags.web_dir.empty()) {
    if (!fs::exists(flags.web_dir + "/index.html", ec))
      return invalid_argument("--web-dir " + flags.web_dir +
                              " holds no index.html; give the console's built files (the build puts them in "
                              "build/web/dist, an install in <prefix>/share/edt/web)");
    settings.layout.web_dir = flags.web_dir;
  }
  return settings;
}

int run(const Flags& flags) {
  auto fail = [](const Status& st) {
    fprintf(stderr, "edtd: %s\n", st.message().c_str());
    return 1;
  };
  auto checked = check_flags(flags);
  if (!checked.is_ok()) return fail(checked.status());
  const Settings& settings = *checked;
  const auto& [host, port] = settings.listen;
  const std::vector<Gpu> gpus = settings.simulated_gpus ? settings.gpus : detect_gpus();

  std::error_code ec;
  fs::create_directories(flags.data_dir, ec);
  if (ec) return fail(Status(StatusCode::kIoError, "--data-dir " + flags.data_dir + ": " + ec.message()));
  ::chmod(flags.data_dir.c_str(), 0700);
  auto opened = ControlStore::open(flags.data_dir + "/edtd.db");
  if (!opened.is_ok()) return fail(opened.status());
  std::unique_ptr<ControlStore> store = std::move(opened).value();
  if (Status st = ensure_admin(store.get(), flags.data_dir); !st.is_ok()) return fail(st);
  if (Status st = store->put_image({"edt", "/", {"horovod"}, true}); !st.is_ok()) return fail(st);
  if (Status st = store->set_gpus(gpus); !st.is_ok()) return fail(st);

  LocalBackendOptions backend_options;
  backend_options.data_dir = flags.data_dir;
  backend_options.ssh_port = flags.ssh_port;
  backend_options.tool_binds = settings.layout.tool_binds;
  backend_options.tool_path = settings.layout.tool_path;
  LocalBackend backend(backend_options);
  std::map<std::string, std::string> base_env = {{"PATH", backend.container_path()}, {"LANG", "C.UTF-8"}};
  if (!settings.layout.python_path.empty()) base_env["PYTHONPATH"] = settings.layout.python_path;

  JobRunner jobs(store.get(), &backend, flags.data_dir, base_env);
  ReconcilerOptions reconciler_options;
  reconciler_options.grace = settings.grace;
  reconciler_options.base_env = base_env;
  reconciler_options.on_resync = [&jobs] { jobs.refresh_running(); };
  Reconciler reconciler(store.get(), &backend, reconciler_options);

  ApiServerOptions api_options;
  api_options.store = store.get();
  api_options.backend = &backend;
  api_options.reconciler = &reconciler;
  api_options.jobs = &jobs;
  api_options.addresses = settings.range;
  api_options.data_dir = flags.data_dir;
  api_options.web_dir = settings.layout.web_dir;
  fs::create_directories(flags.data_dir + "/terminals", ec);
  TerminalServer terminals(flags.data_dir + "/terminals");
  if (Status st = terminals.start(settings.terminal_listen.host, settings.terminal_listen.port); !st.is_ok())
    return fail(st);
  api_options.extend_routes = [&](httplib::Server& server) {
    install_console_routes(server, {flags.data_dir, store.get(), &backend, &jobs, &terminals});
  };
  ApiServer api(api_options);

  // Signals are taken by sigwait below, not by whichever thread they hit.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  if (Status st = api.start(host, port); !st.is_ok()) return fail(st);
  reconciler.start();
  fprintf(stderr, "edtd: serving http://%s:%d/api/v1 (data in %s, %zu GPUs%s; console %s)\n", host.c_str(), port,
          flags.data_dir.c_str(), gpus.size(), settings.simulated_gpus ? ", simulated" : "",
          api_options.web_dir.empty() ? "not built" : api_options.web_dir.c_str());
  int sig = 0;
  sigwait(&signals, &sig);
  fprintf(stderr, "edtd: stopping on signal %d; containers keep running\n", sig);
  api.stop();
  reconciler.stop();
  return 0;
}

}  // namespace
}  // namespace edt::control

int main(int argc, char** argv) {
  edt::control::Flags flags;
  CLI::App app{"edtd: the edt daemon (REST API, store, reconcile loop)"};
  app.add_option("--data-dir", flags.data_dir, "where the store, keys, containers and volumes live")->capture_default_str();
  app.add_option("--listen", flags.listen, "HOST:PORT of the API")->capture_default_str();
  app.add_option("--gpus", flags.gpus, "declare simulated GPUs, MODEL=COUNT[,MODEL=COUNT...] (default: nvidia-smi)");
  app.add_option("--address-range", flags.address_range, "addresses given to containers, inside 127.0.0.0/8")
      ->capture_default_str();
  app.add_option("--ssh-port", flags.ssh_port, "port of sshd on each container's address")->capture_default_str();
  app.add_option("--grace", flags.grace, "SIGTERM to SIGKILL when a container goes")->capture_default_str();
  app.add_option("--web-dir", flags.web_dir,
                 "the web console's built files, served at / (default: <prefix>/share/edt/web, or the build tree's)");
  app.add_option("--terminal-listen", flags.terminal_listen,
                 "HOST:PORT of the console's terminal WebSockets (default: the API's host, any free port)");
  CLI11_PARSE(app, argc, argv);
  return edt::control::run(flags);
}

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

// Where edt's own tools are, so containers can run them: the build tree
// when edtd runs from it, else the install prefix.
void find_tools(LocalBackendOptions* options, std::string* python_path) {
  std::error_code ec;
  const std::string self = fs::read_symlink("/proc/self/exe", ec).string();
  const std::string binary_dir = EDT_BINARY_DIR;
  if (self.compare(0, binary_dir.size() + 1, binary_dir + "/") == 0) {
    options->tool_binds.push_back(EDT_SOURCE_DIR);
    if (binary_dir.compare(0, std::string(EDT_SOURCE_DIR).size() + 1, std::string(EDT_SOURCE_DIR) + "/") != 0)
      options->tool_binds.push_back(binary_dir);
    for (const char* sub : {"/src/launcher", "/bench", "/src/cli", "/src/control"})
      options->tool_path.push_back(binary_dir + sub);
    *python_path = binary_dir + "/python";  // the package with its built extension
    return;
  }
  const std::string prefix = EDT_INSTALL_PREFIX;
  if (prefix.compare(0, 5, "/usr/") != 0 && prefix != "/usr") options->tool_binds.push_back(prefix);
  options->tool_path.push_back(prefix + "/bin");
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

int run(const Flags& flags) {
  auto fail = [](const Status& st) {
    fprintf(stderr, "edtd: %s\n", st.message().c_str());
    return 1;
  };
  auto range = AddressRange::parse(flags.address_range);
  if (!range.is_ok()) return fail(range.status().with_context("--address-range"));
  auto grace = parse_duration(flags.grace);
  if (!grace.is_ok()) return fail(grace.status().with_context("--grace"));
  auto colon = flags.listen.rfind(':');
  if (colon == std::string::npos) return fail(invalid_argument("--listen '" + flags.listen + "' is not HOST:PORT"));
  const std::string host = flags.listen.substr(0, colon);
  const int port = std::atoi(flags.listen.substr(colon + 1).c_str());

  std::error_code ec;
  fs::create_directories(flags.data_dir, ec);
  if (ec) return fail(Status(StatusCode::kIoError, "--data-dir " + flags.data_dir + ": " + ec.message()));
  ::chmod(flags.data_dir.c_str(), 0700);
  auto opened = ControlStore::open(flags.data_dir + "/edtd.db");
  if (!opened.is_ok()) return fail(opened.status());
  std::unique_ptr<ControlStore> store = std::move(opened).value();
  if (Status st = ensure_admin(store.get(), flags.data_dir); !st.is_ok()) return fail(st);
  if (Status st = store->put_image({"edt", "/", {"horovod"}, true}); !st.is_ok()) return fail(st);
  std::vector<Gpu> gpus;
  if (!flags.gpus.empty()) {
    auto parsed = parse_gpu_flag(flags.gpus);
    if (!parsed.is_ok()) return fail(parsed.status());
    gpus = *parsed;
  } else {
    gpus = detect_gpus();
  }
  if (Status st = store->set_gpus(gpus); !st.is_ok()) return fail(st);

  LocalBackendOptions backend_options;
  backend_options.data_dir = flags.data_dir;
  backend_options.ssh_port = flags.ssh_port;
  std::string python_path;
  find_tools(&backend_options, &python_path);
  LocalBackend backend(backend_options);
  std::map<std::string, std::string> base_env = {{"PATH", backend.container_path()}, {"LANG", "C.UTF-8"}};
  if (!python_path.empty()) base_env["PYTHONPATH"] = python_path;

  JobRunner jobs(store.get(), &backend, flags.data_dir, base_env);
  ReconcilerOptions reconciler_options;
  reconciler_options.grace = *grace;
  reconciler_options.base_env = base_env;
  reconciler_options.on_resync = [&jobs] { jobs.refresh_running(); };
  Reconciler reconciler(store.get(), &backend, reconciler_options);

  ApiServerOptions api_options;
  api_options.store = store.get();
  api_options.backend = &backend;
  api_options.reconciler = &reconciler;
  api_options.jobs = &jobs;
  api_options.addresses = *range;
  api_options.data_dir = flags.data_dir;
  api_options.web_dir = flags.web_dir;
  // From the build tree, the console built there is served unless told otherwise.
  const std::string built_console = std::string(EDT_BINARY_DIR) + "/web/dist";
  if (api_options.web_dir.empty() && !backend_options.tool_binds.empty() && fs::exists(built_console + "/index.html"))
    api_options.web_dir = built_console;
  if (!api_options.web_dir.empty() && !fs::is_directory(api_options.web_dir))
    return fail(invalid_argument("--web-dir " + api_options.web_dir + " is not a directory"));
  std::string terminal_host = host;
  int terminal_port = 0;
  if (!flags.terminal_listen.empty()) {
    auto at = flags.terminal_listen.rfind(':');
    if (at == std::string::npos)
      return fail(invalid_argument("--terminal-listen '" + flags.terminal_listen + "' is not HOST:PORT"));
    terminal_host = flags.terminal_listen.substr(0, at);
    terminal_port = std::atoi(flags.terminal_listen.substr(at + 1).c_str());
  }
  fs::create_directories(flags.data_dir + "/terminals", ec);
  TerminalServer terminals(flags.data_dir + "/terminals");
  if (Status st = terminals.start(terminal_host, terminal_port); !st.is_ok()) return fail(st);
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
  fprintf(stderr, "edtd: serving http://%s:%d/api/v1 (data in %s, %zu GPUs%s)\n", host.c_str(), port,
          flags.data_dir.c_str(), gpus.size(), !flags.gpus.empty() ? ", simulated" : "");
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
  app.add_option("--web-dir", flags.web_dir, "the web console's built files, served at / (default: the build tree's)");
  app.add_option("--terminal-listen", flags.terminal_listen,
                 "HOST:PORT of the console's terminal WebSockets (default: the API's host, any free port)");
  CLI11_PARSE(app, argc, argv);
  return edt::control::run(flags);
}

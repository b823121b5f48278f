// edtd: the edt daemon. Serves the REST API, keeps the database, and runs
// the reconcile loop that makes containers match it. Containers outlive edtd; a
// restarted edtd re-adopts them from the store, and by their label those it
// started but had not recorded (docs/platform.md, "Crash safety").
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string_view>
#include <utility>

#include "backend_factory.h"
#include "common/log.h"
#include "control/api/server.h"
#include "control/backends/fault_points.h"
#include "control/backends/local/container_log.h"
#include "control/backends/local/disk_quota.h"
#include "control/backends/local/enter.h"
#include "control/backends/local/local_backend.h"
#include "control/backends/slurm/slurm_node.h"
#include "control/console/console_routes.h"
#include "control/db/database.h"
#include "control/jobs/job_runner.h"
#include "control/reconcile/reconciler.h"
#include "control/service/service.h"
#include "edtd_flags.h"
#include "image/store.h"
#include "gpu_detect.h"

namespace edt::control {
namespace {

namespace fs = std::filesystem;

// Makes the admin when there is none, with its token in DATA_DIR/admin.token.
// --registry-ca-file and --registry-mirror REGISTRY=URL, as pulls use them.
Result<image::RegistryOptions> registry_options(const Flags& flags) {
  image::RegistryOptions out;
  out.ca_file = flags.registry_ca_file;
  for (const std::string& m : flags.registry_mirrors) {
    const auto eq = m.find('=');
    const std::string url = eq == std::string::npos ? "" : m.substr(eq + 1);
    if (eq == 0 || (url.rfind("https://", 0) != 0 && url.rfind("http://", 0) != 0) ||
        url.find_first_of("?#@ ") != std::string::npos) {
      return invalid_argument("--registry-mirror '" + m + "': write REGISTRY=URL, e.g. docker.io=https://mirror:5000");
    }
    out.mirrors[m.substr(0, eq)] = url.back() == '/' ? url.substr(0, url.size() - 1) : url;
  }
  return out;
}

Status ensure_admin(Service& service, const std::string& data_dir) {
  EDT_ASSIGN_OR_RETURN(std::optional<std::string> token, service.ensure_admin());
  if (!token) return Status::ok();
  const std::string path = data_dir + "/admin.token";
  {
    std::ofstream out(path, std::ios::trunc);
    out << *token << "\n";
    if (!out) return io_error("write " + path, errno);
  }
  ::chmod(path.c_str(), 0600);
  log::info("made the admin token; it is in {}", path);
  return Status::ok();
}

int fail(const Status& st) {
  log::error("{}", st.message());
  return 1;
}

// Makes the data dir, in its mode (data_dir_mode), and opens the database in it.
Result<std::unique_ptr<Database>> open_database(const Flags& flags, const Settings& settings) {
  std::error_code ec;
  fs::create_directories(flags.data_dir, ec);
  if (ec) return Status(StatusCode::kIoError, "--data-dir " + flags.data_dir + ": " + ec.message());
  ::chmod(flags.data_dir.c_str(), data_dir_mode(settings.first_subordinate_id));
  EDT_ASSIGN_OR_RETURN(std::unique_ptr<Database> db, Database::open(flags.data_dir + "/edtd.db"));
  // SQLite makes its -wal and -shm files with the database's mode.
  ::chmod((flags.data_dir + "/edtd.db").c_str(), 0600);
  return db;
}

// Blocks SIGTERM and SIGINT in every thread (sigwait takes them) and
// ignores SIGPIPE; returns the set to wait for. Called before edtd starts
// any thread: a thread made earlier would keep them unblocked, and a signal
// the kernel hands to it ends edtd with the default action, without its
// stop. A SIGTERM that comes while edtd starts waits for the sigwait. Every
// child edtd starts resets its mask (spawn_detached, run_host_command, the
// job log's and the terminal's forks).
sigset_t block_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  return signals;
}

// Each managed volume's bound (--volume-size), or none with a warning where
// bounded disks cannot be made; none under Slurm, whose nodes would not see
// a loop mount of the gateway's.
DiskBound volume_disk(const Settings& settings) {
  if (settings.volume_size == 0 || settings.slurm) return {};
  if (std::string why = bounded_disks_unavailable(); !why.empty()) {
    log::warn("--volume-size {}: volumes are plain directories with no bound on their bytes, since {}",
              settings.volume_size, why);
    return {};
  }
  return {settings.volume_size, 0, true};
}

// edtd's parts, made in dependency order; serves until one of `signals`.
int serve(const Flags& flags, const Settings& settings, const sigset_t& signals) {
  const auto& [host, port] = settings.listen;
  std::vector<Gpu> gpus = settings.simulated_gpus ? settings.gpus : detect_gpus();
  if (settings.slurm && !settings.simulated_gpus) {
    auto found = slurm_gpus(flags.slurm_partition);
    if (!found.is_ok()) return fail(found.status());
    gpus = *found;
  }
  auto opened = open_database(flags, settings);
  if (!opened.is_ok()) return fail(opened.status());
  std::unique_ptr<Database> db = std::move(opened).value();

  std::map<std::string, std::string> base_env = {{"PATH", LocalBackend::container_path(settings.layout.tool_path)},
                                                 {"LANG", "C.UTF-8"}};
  if (!settings.layout.python_path.empty()) base_env["PYTHONPATH"] = settings.layout.python_path;
  const std::unique_ptr<LocalBackend> owned = make_backend(flags, settings, base_env);
  LocalBackend& backend = *owned;
  JobRunner jobs(db.get(), &backend, flags.data_dir, base_env, {"", settings.job_log_limit});
  ReconcilerOptions reconciler_options;
  reconciler_options.grace = settings.grace;
  reconciler_options.base_env = base_env;
  reconciler_options.on_resync = [&jobs] { jobs.refresh_running(); };
  reconciler_options.addresses = settings.range;
  Reconciler reconciler(db.get(), &backend, reconciler_options);
  // Managed volumes live where the containers' nodes see them.
  const std::string volumes_under = settings.slurm ? flags.slurm_shared_dir : flags.data_dir;
  const std::string& image_store = settings.image_store;
  if (auto store = image::Store::open(image_store); !store.is_ok()) return fail(store.status());
  auto registry = registry_options(flags);
  if (!registry.is_ok()) return fail(registry.status());
  Service service(db.get(), {settings.range, volumes_under, [&reconciler](const std::string& c) { reconciler.enqueue(c); },
                             volume_disk(settings), &jobs, &backend, image_store, *registry});
  if (Status st = service.remount_volumes(); !st.is_ok()) return fail(st);
  if (Status st = service.set_inventory({"edt", "/", {"horovod", "deepspeed", "megatron", "slurm"}, true}, gpus); !st.is_ok()) return fail(st);
  if (Status st = ensure_admin(service, flags.data_dir); !st.is_ok()) return fail(st);

  std::error_code ec;
  fs::create_directories(flags.data_dir + "/terminals", ec);
  ::chmod((flags.data_dir + "/terminals").c_str(), 0700);
  TerminalServer terminals(flags.data_dir + "/terminals");
  if (Status st = terminals.start(settings.terminal_listen.host, settings.terminal_listen.port); !st.is_ok())
    return fail(st);
  ApiServerOptions api_options;
  api_options.service = &service;
  api_options.reconciler = &reconciler;
  api_options.web_dir = settings.layout.web_dir;
  JupyterServers jupyter_servers(&backend, flags.data_dir + "/jupyter", base_env);
  JupyterProxy jupyter(jupyter_proxy_options(&service, &jupyter_servers));
  api_options.extra_routes = console_routes({{&service, &reconciler}, &terminals, &jupyter});
  api_options.prefix_handlers = {{JupyterProxy::kPrefix, [&jupyter](Request& request) { return jupyter.handle(request); }}};
  api_options.session_token = [&jupyter](const Request& request) { return jupyter.session_token(request); };
  ApiServer api(std::move(api_options));

  if (Status st = api.start(host, port); !st.is_ok()) return fail(st);
  reconciler.start();
  log::info("serving http://{}:{}/api/v1 (data in {}, {} GPUs{}; console {})", host, port, flags.data_dir, gpus.size(),
            settings.simulated_gpus ? ", simulated" : "",
            settings.layout.web_dir.empty() ? "not built" : settings.layout.web_dir);
  int sig = 0;
  sigwait(&signals, &sig);
  log::info("stopping on signal {}; containers keep running", sig);
  api.stop();
  reconciler.stop();
  return 0;
}

int run(const Flags& flags) {
  if (flags.fault_points) {
    std::fputs(fault_points_table().c_str(), stdout);
    return 0;
  }
  const sigset_t signals = block_signals();
  log::init("edtd");
  auto checked = check_flags(flags);
  if (!checked.is_ok()) return fail(checked.status());
  log::init("edtd", checked->log_level.value_or(log::level()), checked->log_format);
  return serve(flags, *checked, signals);
}

}  // namespace
}  // namespace edt::control

int main(int argc, char** argv) {
  // A job's way into its container (local_backend.h): before anything else.
  // It ends by _exit: it sees the container's /proc, where it is not listed
  // (it stays in edtd's PID namespace), so exit handlers that look for the
  // process's threads there (LeakSanitizer's, in a sanitizer build) wait
  // forever; and it has nothing to flush.
  if (argc > 1 && std::string_view(argv[1]) == edt::control::kEnterContainerCommand)
    _exit(edt::control::enter_container_main(argc, argv));
  // The helpers edtd starts as its own program: a container's log writer
  // (container_log.h, which holds nothing of edtd's), a job's (job_log.h),
  // and a container's Slurm job on its node (slurm_node.h).
  using Main = int (*)(int, char**);
  constexpr std::pair<std::string_view, Main> kHelpers[] = {
      {edt::control::kContainerLogCommand, edt::control::container_log_main},
      {edt::control::kJobLogCommand, edt::control::job_log_main},
      {edt::control::kSlurmNodeCommand, edt::control::slurm_node_main}};
  for (const auto& [command, helper_main] : kHelpers)
    if (argc > 1 && std::string_view(argv[1]) == command) return helper_main(argc, argv);
  edt::control::Flags flags;
  CLI::App app{"edtd: the edt daemon (REST API, store, reconcile loop)"};
  edt::control::add_flags(app, flags);
  CLI11_PARSE(app, argc, argv);
  flags.network_given = app.count("--network") + app.count("--outbound") > 0;
  return edt::control::run(flags);
}

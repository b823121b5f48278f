#include "launcher/static_driver.h"

#include <signal.h>

#include "common/log.h"
#include "common/net.h"

namespace edt::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// Deadlines are checked after every wakeup; this bounds how late.
constexpr std::chrono::milliseconds kTick{100};

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  return text;
}

std::string name_of(const SlotInfo& slot) { return "rank " + std::to_string(slot.rank) + " on host " + slot.host; }

}  // namespace

StaticDriver::StaticDriver(JobOptions options) : options_(std::move(options)) {}

StaticDriver::~StaticDriver() = default;

Status StaticDriver::start_rendezvous() {
  EDT_ASSIGN_OR_RETURN(store_, TcpStoreServer::start(TcpStoreServerOptions{}));
  bool rank0_local = !remote(slots_.front());
  // torch.distributed's own store binds it later, on rank 0's host (this
  // one when rank 0 is local): a port outside the ephemeral range, which no
  // connect() takes in the meantime.
  auto master_port = net::free_port("0.0.0.0");
  if (!master_port.is_ok()) return master_port.status().with_context("cannot find a free TCP port for MASTER_PORT");
  // torchrun (the usual worker of --per-host) hands node 0's --master_addr
  // on to the processes of every node, so there each host is told one
  // address they all reach: this machine's toward a remote host.
  std::string shared_master;
  if (rank0_local && !options_.node_slots.empty()) {
    for (const auto& slot : slots_) {
      if (!remote(slot)) continue;
      EDT_ASSIGN_OR_RETURN(shared_master, address_toward(slot.host));
      break;
    }
  }
  for (const auto& slot : slots_) {
    if (rendezvous_.count(slot.host)) continue;
    std::string here = "127.0.0.1";
    if (remote(slot)) {
      EDT_ASSIGN_OR_RETURN(here, address_toward(slot.host));
    }
    Rendezvous r;
    r.coordinator = net::format_host_port(here, store_->port());
    r.master_addr = !rank0_local ? slots_.front().host : shared_master.empty() ? here : shared_master;
    r.master_port = *master_port;
    rendezvous_[slot.host] = r;
  }
  log::debug("store listening on port {}, MASTER_PORT {}", store_->port(), *master_port);
  return Status::ok();
}

Status StaticDriver::launch(const SlotInfo& slot) {
  WorkerEnvironmentInputs inputs;
  inputs.launcher_env = &options_.launcher_env;
  inputs.exports = &options_.exports;
  inputs.remote = remote(slot);
  if (!options_.node_slots.empty()) inputs.node_slots = &options_.node_slots;
  WorkerSpec spec{slot.rank, name_of(slot), slot.host, inputs.remote,
                  worker_environment(slot, rendezvous_.at(slot.host), inputs)};
  log::debug("{}{}, EDT_COORDINATOR={} MASTER_ADDR={}", spec.name, spec.remote ? ": ssh " + slot.host : ": local",
             spec.env.at("EDT_COORDINATOR"), spec.env.at("MASTER_ADDR"));
  auto pid = supervisor_->spawn(spec);
  if (!pid.is_ok()) return pid.status().with_context("cannot start " + spec.name);
  return Status::ok();
}

Result<int> StaticDriver::run() {
  if (options_.command.empty()) {
    return invalid_argument("no command given; put the program to run after the options, e.g. edtrun -np 2 python3 train.py");
  }
  EDT_ASSIGN_OR_RETURN(slots_, assign_slots(options_.hosts, options_.np, options_.hosts_source));
  if (!options_.output_dir.empty()) {
    EDT_ASSIGN_OR_RETURN(output_, directory_output(options_.output_dir, options_.np));
  } else {
    output_ = terminal_output(options_.prefix_timestamp);
  }
  EDT_ASSIGN_OR_RETURN(supervisor_, Supervisor::create(supervisor_options(options_, output_.get())));
  EDT_RETURN_IF_ERROR(start_rendezvous());
  start_deadline_ = Clock::now() + options_.start_timeout;
  for (const auto& slot : slots_) {
    Status launched = launch(slot);
    if (!launched.is_ok()) {
      fail(launched.code() == StatusCode::kNotFound ? 127 : 1, launched.message());
      break;
    }
  }
  while (!supervisor_->empty()) {
    handle(supervisor_->wait(kTick));
    if (!stopping_) check_start_deadline();
  }
  return exit_code_;
}

void StaticDriver::handle(const SupervisorEvents& events) {
  for (int sig : events.signals) on_signal(sig);
  for (const auto& exit : events.exits) on_exit(exit);
}

void StaticDriver::on_signal(int sig) {
  if (stopping_) {
    log::info("got {} again; killing every worker now", strsignal(sig));
    supervisor_->kill_all();
    return;
  }
  if (!failed_) {
    failed_ = true;
    exit_code_ = 128 + sig;
  }
  stopping_ = true;
  log::info("got signal {} ({}); stopping every worker", sig, strsignal(sig));
  supervisor_->stop_all();
}

void StaticDriver::on_exit(const WorkerExit& exit) {
  const SlotInfo& slot = slots_.at(static_cast<size_t>(exit.tag));
  const ExitStatus& status = exit.status;
  if (status.success() || exit.stopped || failed_) {
    log::debug("{} {}", name_of(slot), status.describe());
    return;
  }
  if (remote(slot) && !exit.started) {
    on_failed_start(slot, exit);
    return;
  }
  std::string hint;
  if (status.signal == 0 && status.code == 127) hint = " (127: a command was not found)";
  if (status.signal == 0 && status.code == 255 && remote(slot)) hint = " (255: possibly the ssh connection failed)";
  fail(status.shell_code(), name_of(slot) + " " + status.describe() + hint);
}

// A remote worker whose wrapper never printed the marker: ssh could not
// connect, or the wrapper found no directory or command.
void StaticDriver::on_failed_start(const SlotInfo& slot, const WorkerExit& exit) {
  std::string ssh_error = trimmed(exit.early_stderr);
  if (exit.status.code == 255) {
    fail(1, "cannot reach host " + slot.host + " over ssh for rank " + std::to_string(slot.rank) + ": " +
                (ssh_error.empty() ? "ssh exited with code 255" : ssh_error) +
                "; check that the host is up, runs sshd and accepts the key (-p/--ssh-port, -i/--ssh-identity-file)");
  } else {
    fail(exit.status.shell_code(), name_of(slot) + " could not start: " +
                                       (ssh_error.empty() ? "the remote shell " + exit.status.describe() : ssh_error));
  }
}

void StaticDriver::fail(int exit_code, const std::string& message) {
  if (failed_) return;
  failed_ = true;
  exit_code_ = exit_code;
  int others = supervisor_->running_count();
  if (others > 0) {
    log::error("{}; stopping the other {} {}", message, others, others == 1 ? "worker" : "workers");
  } else {
    log::error("{}", message);
  }
  if (stopping_) return;
  stopping_ = true;
  supervisor_->stop_all();
}

void StaticDriver::check_start_deadline() {
  if (Clock::now() < start_deadline_) return;
  for (const auto& slot : slots_) {
    if (!supervisor_->running(slot.rank) || supervisor_->started(slot.rank)) continue;
    std::string ssh_error = trimmed(supervisor_->early_stderr(slot.rank));
    auto seconds = std::chrono::duration_cast<std::chrono::milliseconds>(options_.start_timeout).count() / 1000.0;
    fail(1, fmt::format("host {} did not start rank {} within the start timeout of {:g} s{}; check that the host is up "
                        "and reachable by ssh, or raise --start-timeout",
                        slot.host, slot.rank, seconds,
                        ssh_error.empty() ? " (ssh printed nothing)" : " (ssh: " + ssh_error + ")"));
    return;
  }
}

}  // namespace edt::launcher

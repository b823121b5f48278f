// edt cluster create|list|get|scale|delete, and edt hostfile.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "common/log.h"
#include "common/units.h"
#include "edt_api/contract.h"

namespace edt::cli {
namespace {

using nlohmann::json;
namespace spec = api::fields::ClusterSpec;
namespace cluster_field = api::fields::Cluster;
namespace status_field = api::fields::ClusterStatus;
namespace container_field = api::fields::Container;

std::vector<std::string> framework_choices() {
  return {api::limits::Framework::values.begin(), api::limits::Framework::values.end()};
}

// Checks a size's unit (--shm, --memory) is one the API reads; "" when it is.
std::string check_size_unit(const std::string& text) {
  size_t digits = text.find_first_not_of("0123456789.");
  std::string unit = digits == std::string::npos ? "" : text.substr(digits);
  for (auto& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& u : api::limits::ShmSize::units)
    if (u.suffix == unit) return "";
  return "'" + text + "' has an unknown size unit; use K, M, G or T (binary, e.g. 512M, 1Gi)";
}

// Checks --drain-timeout is a duration the API reads; "" when it is.
std::string check_drain_timeout(const std::string& text) {
  size_t digits = text.find_first_not_of("0123456789.");
  const std::string unit = digits == std::string::npos ? "" : text.substr(digits);
  bool known = false;
  for (const auto& u : api::limits::DrainTimeout::units) known = known || u.suffix == unit;
  if (!known || digits == 0) return "'" + text + "' is not a duration; write e.g. 60s, 500ms or 2m";
  auto ms = parse_duration(text);
  if (!ms.is_ok() || ms->count() > api::limits::DrainTimeout::maximum_ms)
    return "'" + text + "' is longer than " + std::to_string(api::limits::DrainTimeout::maximum_ms / 1000) + "s";
  return "";
}

std::string drain_help() {
  return "how long a container leaving on scale-down may wait for the edtrun workers in it to leave the job "
         "before it is stopped (default " +
         std::to_string(api::limits::DrainTimeout::default_ms / 1000) + "s, at most " +
         std::to_string(api::limits::DrainTimeout::maximum_ms / 1000) + "s; 0 stops it at once)";
}

// Containers in a phase, as " (N Draining)" when there are any.
std::string phase_count(const json& cluster, const std::string& phase) {
  int n = 0;
  for (const auto& c : cluster[key(cluster_field::status)][key(status_field::containers)])
    n += c[key(container_field::phase)] == phase ? 1 : 0;
  return n ? ", " + std::to_string(n) + " " + phase : "";
}

std::string running_count(const json& cluster) {
  int running = 0, total = 0;
  for (const auto& c : cluster[key(cluster_field::status)][key(status_field::containers)]) {
    total++;
    running += c[key(container_field::phase)] == "Running" ? 1 : 0;
  }
  return std::to_string(running) + "/" + std::to_string(total);
}

// Polls the cluster until it is Running (or gone, when `gone` is set),
// logging each change of phase. Fails on Failed, on a scale to `containers`
// (when not 0) that failed and went back, or after five minutes.
int wait_for(Client& client, const std::string& name, bool gone, int containers = 0) {
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + std::chrono::minutes(5);
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    json cluster;
    if (auto f = client.call("GET", "/clusters/" + name, nullptr, &cluster)) {
      if (gone && f->status == 404) {
        log::info("{}: deleted", name);
        return 0;
      }
      return fail(*f);
    }
    const json& status = cluster[key(cluster_field::status)];
    const std::string phase = status[key(status_field::phase)];
    const std::string line =
        phase + ", " + running_count(cluster) + " containers Running" + phase_count(cluster, "Draining");
    if (line != last) {
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      log::info("{}: {} ({:.1f}s)", name, line, seconds);
      last = line;
    }
    if (phase == "Failed") {
      log::error("cluster {} failed: {}", name, status[key(status_field::message)].get<std::string>());
      return 1;
    }
    if (!gone && phase == "Running" && containers && cluster[key(cluster_field::containers)] != containers) {
      log::error("cluster {} is Running with {} containers, not {}: {}", name,
                 cluster[key(cluster_field::containers)].get<int>(), containers,
                 status[key(status_field::message)].get<std::string>());
      return 1;
    }
    if (!gone && phase == "Running") return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  log::error("gave up waiting for {} after 5 minutes", name);
  return 1;
}

// "4" or, elastic, "4 (2..8)".
std::string size_text(const json& c) {
  std::string text = std::to_string(c[key(cluster_field::containers)].get<int>());
  const int min = c.value(key(cluster_field::min_containers), 0), max = c.value(key(cluster_field::max_containers), 0);
  if (max > min) text += " (" + std::to_string(min) + ".." + std::to_string(max) + ")";
  return text;
}

// A queued request as "#1 for 3 containers" (with its reason when `reason`);
// "-" when the cluster waits for nothing.
std::string queue_text(const json& c, bool reason) {
  const json& status = c[key(cluster_field::status)];
  if (!status.contains(key(status_field::queued)) || status[key(status_field::queued)].is_null()) return "-";
  namespace queued = api::fields::QueuedRequest;
  const json& q = status[key(status_field::queued)];
  std::string text = "#" + std::to_string(q[key(queued::position)].get<int>()) + " for " +
                     std::to_string(q[key(queued::containers)].get<int>()) + " containers";
  if (reason) text += ": " + q[key(queued::reason)].get<std::string>();
  return text;
}

// The scheduler's view of a cluster: its team, bounds, priority, queue.
void print_scheduling(const json& c) {
  const std::string team = c.value(key(cluster_field::team), "");
  printf("team:       %s\n", team.empty() ? "none" : team.c_str());
  const int min = c.value(key(cluster_field::min_containers), 0), max = c.value(key(cluster_field::max_containers), 0);
  if (max > min)
    printf("elastic:    %d to %d containers (the scheduler grows it into idle GPUs; borrowed ones drain back)\n",
           min, max);
  printf("priority:   %d\n", c.value(key(cluster_field::priority), 0));
  const std::string queued = queue_text(c, true);
  if (queued != "-") printf("queued:     %s (cancel: edt cluster delete, or scale again)\n", queued.c_str());
}

void print_cluster(const json& c) {
  const json& status = c[key(cluster_field::status)];
  auto text = [](const json& v) { return v.get<std::string>(); };
  printf("name:       %s\nowner:      %s\nframework:  %s\nimage:      %s\nphase:      %s\nmessage:    %s\n",
         text(c[key(cluster_field::name)]).c_str(), text(c[key(cluster_field::owner)]).c_str(),
         text(c[key(cluster_field::framework)]).c_str(), text(c[key(cluster_field::image)]).c_str(),
         text(status[key(status_field::phase)]).c_str(), text(status[key(status_field::message)]).c_str());
  print_scheduling(c);
  printf("shm:        %s\n", text(c[key(cluster_field::shm)]).c_str());
  const json& memory = c[key(cluster_field::memory)];
  printf("memory:     %s\n", memory.is_null() ? "no bound" : (text(memory) + " per container").c_str());
  const json& cpus = c[key(cluster_field::cpus)];
  printf("cpus:       %s\n", cpus.is_null() ? "no bound" : (text(cpus) + " per container").c_str());
  printf("drain:      %s (a container leaving on scale-down waits at most this for its edtrun workers)\n",
         text(c[key(cluster_field::drain_timeout)]).c_str());
  if (text(c[key(cluster_field::framework)]) == "slurm")
    printf("slurm:      every container is a node (slurmctld in the launcher); a container leaving on scale-down "
           "leaves Slurm at once: its node goes DOWN (batch jobs on it are requeued, steps on it end) and is "
           "deleted\n");
  const json& gpu = c[key(cluster_field::gpu)];
  if (!gpu.is_null())
    printf("gpu:        %d x %s per container\n", gpu[key(api::fields::GpuRequest::count)].get<int>(),
           text(gpu[key(api::fields::GpuRequest::model)]).c_str());
  if (c.contains(key(cluster_field::megatron)) && c[key(cluster_field::megatron)].is_object()) {
    const json& m = c[key(cluster_field::megatron)];
    auto size = [&m](std::string_view field) { return m.contains(key(field)) ? m[key(field)].get<int>() : 1; };
    printf("megatron:   tensor parallel %d x pipeline parallel %d\n",
           size(api::fields::MegatronParallel::tensor_parallel), size(api::fields::MegatronParallel::pipeline_parallel));
  }
  for (const auto& m : c[key(cluster_field::mounts)])
    printf("mount:      %s at %s%s\n", text(m[key(api::fields::Mount::volume)]).c_str(),
           text(m[key(api::fields::Mount::path)]).c_str(), m[key(api::fields::Mount::read_only)].get<bool>() ? " (read-only)" : "");
  printf("\n");
  const json& containers = status[key(status_field::containers)];
  // Containers placed by Slurm: their node and job, and why one waits.
  const bool placed = std::any_of(containers.begin(), containers.end(),
                                  [](const json& k) { return k.contains(key(container_field::slurm_job)); });
  std::vector<std::vector<std::string>> rows = {{"CONTAINER", "ROLE", "PHASE", "ADDRESS", "GPUS"}};
  if (placed) rows[0].insert(rows[0].end(), {"NODE", "SLURM JOB", "MESSAGE"});
  for (const auto& k : containers) {
    rows.push_back({k[key(container_field::name)], k[key(container_field::role)], k[key(container_field::phase)],
                    k[key(container_field::address)], k[key(container_field::gpus)].dump()});
    if (placed)
      rows.back().insert(rows.back().end(), {k.value(key(container_field::node), ""),
                                             std::to_string(k.value(key(container_field::slurm_job), int64_t{0})),
                                             k.value(key(container_field::message), "")});
  }
  print_table(rows);
}

struct CreateOptions {
  std::string name, framework = std::string(api::limits::Framework::values[0]), image, gpu, shm, memory, cpus, drain_timeout, output;
  int containers = 0;
  int min_containers = 0, max_containers = 0, priority = -1;  // 0 (priority -1): not given
  int tensor_parallel = 0, pipeline_parallel = 0;  // 0: not given
  bool wait = false;
  std::vector<std::string> mounts, env;
};

// "MODEL[:COUNT]" as the API's gpu object.
bool gpu_request(const std::string& flag, json* out) {
  auto colon = flag.rfind(':');
  int count = 1;
  try {
    if (colon != std::string::npos) count = std::stoi(flag.substr(colon + 1));
  } catch (...) {
    return false;
  }
  *out = {{key(api::fields::GpuRequest::model), flag.substr(0, colon)}, {key(api::fields::GpuRequest::count), count}};
  return true;
}

// "VOLUME[:PATH][:ro]" as the API's mount object.
json mount_request(const std::string& flag) {
  auto first = flag.find(':');
  json mount = {{key(api::fields::Mount::volume), flag.substr(0, first)}};
  if (first == std::string::npos) return mount;
  std::string rest = flag.substr(first + 1);
  if (rest.size() >= 3 && rest.compare(rest.size() - 3, 3, ":ro") == 0) {
    mount[key(api::fields::Mount::read_only)] = true;
    rest.resize(rest.size() - 3);
  }
  if (!rest.empty()) mount[key(api::fields::Mount::path)] = rest;
  return mount;
}

// The create request of the flags, or a usage error's exit code.
int create_request(const CreateOptions& o, json* body) {
  *body = {{key(spec::name), o.name}, {key(spec::framework), o.framework}, {key(spec::containers), o.containers}};
  if (!o.image.empty()) (*body)[key(spec::image)] = o.image;
  if (!o.shm.empty()) (*body)[key(spec::shm)] = o.shm;
  if (!o.memory.empty()) (*body)[key(spec::memory)] = o.memory;
  if (!o.cpus.empty()) (*body)[key(spec::cpus)] = o.cpus;
  if (!o.drain_timeout.empty()) (*body)[key(spec::drain_timeout)] = o.drain_timeout;
  if (o.min_containers > 0) (*body)[key(spec::min_containers)] = o.min_containers;
  if (o.max_containers > 0) (*body)[key(spec::max_containers)] = o.max_containers;
  if (o.priority >= 0) (*body)[key(spec::priority)] = o.priority;
  // edtd checks them against the framework and the GPUs, naming the field.
  if (o.tensor_parallel > 0)
    (*body)[key(spec::megatron)][key(api::fields::MegatronParallel::tensor_parallel)] = o.tensor_parallel;
  if (o.pipeline_parallel > 0)
    (*body)[key(spec::megatron)][key(api::fields::MegatronParallel::pipeline_parallel)] = o.pipeline_parallel;
  if (!o.gpu.empty() && !gpu_request(o.gpu, &(*body)[key(spec::gpu)]))
    return usage_error("--gpu '" + o.gpu + "' is not MODEL:COUNT", "write e.g. --gpu NVIDIA-P4:1");
  (*body)[key(spec::mounts)] = json::array();
  for (const auto& m : o.mounts) (*body)[key(spec::mounts)].push_back(mount_request(m));
  for (const auto& e : o.env) {
    auto eq = e.find('=');
    if (eq == std::string::npos) return usage_error("--env '" + e + "' is not KEY=VALUE", "write e.g. --env NCCL_DEBUG=INFO");
    (*body)[key(spec::env)][e.substr(0, eq)] = e.substr(eq + 1);
  }
  return 0;
}

int create_cluster(const CreateOptions& o) {
  json body;
  if (int code = create_request(o, &body)) return code;
  Client client(load_endpoint());
  json created;
  if (auto f = client.call("POST", "/clusters", &body, &created)) return fail(*f);
  if (o.wait && wait_for(client, o.name, false) != 0) return 1;
  if (o.output == "json") {
    json now;
    if (auto f = client.call("GET", "/clusters/" + o.name, nullptr, &now)) return fail(*f);
    printf("%s\n", now.dump(2).c_str());
  } else {
    const std::string queued = queue_text(created, true);
    printf("cluster %s created%s\n", o.name.c_str(), queued == "-" ? "" : ("; queued " + queued).c_str());
  }
  return 0;
}

// --min, --max, --priority (docs/scheduling.md).
void add_scheduling_options(CLI::App* cmd, CreateOptions* o) {
  namespace limits = api::limits;
  const std::string count = " (" + std::to_string(limits::ContainerCount::minimum) + " to " +
                            std::to_string(limits::ContainerCount::maximum) + ")";
  cmd->add_option("--min", o->min_containers,
                  "elastic: the fewest containers it runs with, never taken from it once placed (default: "
                  "--containers)" + count)
      ->check(CLI::Range(static_cast<int>(limits::ContainerCount::minimum),
                         static_cast<int>(limits::ContainerCount::maximum)));
  cmd->add_option("--max", o->max_containers,
                  "elastic: the most containers the scheduler grows it to in idle GPUs within its team's "
                  "borrowing limit; borrowed ones drain back at their job's next commit" + count)
      ->check(CLI::Range(static_cast<int>(limits::ContainerCount::minimum),
                         static_cast<int>(limits::ContainerCount::maximum)));
  cmd->add_option("--priority", o->priority,
                  "orders the queue for GPUs, higher first (" + std::to_string(limits::Priority::minimum) + " to " +
                      std::to_string(limits::Priority::maximum) + ", default 0)")
      ->check(CLI::Range(static_cast<int>(limits::Priority::minimum), static_cast<int>(limits::Priority::maximum)));
}

void add_create(CLI::App* cluster, Action* action) {
  auto o = std::make_shared<CreateOptions>();
  namespace limits = api::limits;
  auto* cmd = cluster->add_subcommand("create", "create a cluster");
  cmd->add_option("name", o->name, "the cluster's name (a DNS label of at most " +
                                       std::to_string(limits::ClusterName::max_length) + " characters)")->required();
  cmd->add_option("--framework", o->framework, join_choices(framework_choices()))
      ->check(CLI::IsMember(framework_choices()))
      ->capture_default_str();
  cmd->add_option("--containers", o->containers,
                  "how many (" + std::to_string(limits::ContainerCount::minimum) + " to " +
                      std::to_string(limits::ContainerCount::maximum) + ": a launcher and workers)")->required();
  cmd->add_option("--image", o->image, "image (default: edt)");
  cmd->add_option("--gpu", o->gpu, "MODEL:COUNT GPUs per container (COUNT up to " +
                                       std::to_string(limits::GpuCount::maximum) + ")");
  cmd->add_option("--shm", o->shm, "size of /dev/shm, e.g. 1Gi (" + format_size(limits::ShmSize::minimum_bytes) +
                                       " to " + format_size(limits::ShmSize::maximum_bytes) + ")")
      ->check(check_size_unit);
  cmd->add_option("--memory", o->memory,
                  "the most memory each container may use, processes and /dev/shm together, e.g. 8Gi (at least " +
                      format_size(limits::MemoryLimit::minimum_bytes) + " and " + format_size(limits::MemoryLimit::headroom_bytes) + " over --shm; default: no bound)")
      ->check(check_size_unit);
  cmd->add_option("--cpus", o->cpus,
                  "the most CPU time each container may use, in CPUs with at most 3 decimals, e.g. 1.5 (" +
                      std::to_string(limits::CpuLimit::minimum_millicpus) + " thousandths of a CPU to " +
                      std::to_string(limits::CpuLimit::maximum_millicpus / 1000) + "; default: no bound)");
  cmd->add_option("--drain-timeout", o->drain_timeout, drain_help())->check(check_drain_timeout);
  const std::string parallel = " (megatron: the cluster's GPUs must divide by tensor x pipeline; 1 to " +
                               std::to_string(limits::ParallelSize::maximum) + ")";
  cmd->add_option("--tensor-parallel", o->tensor_parallel, "Megatron-LM's tensor-model-parallel size" + parallel)
      ->check(CLI::Range(1, static_cast<int>(limits::ParallelSize::maximum)));
  cmd->add_option("--pipeline-parallel", o->pipeline_parallel, "Megatron-LM's pipeline-model-parallel size" + parallel)
      ->check(CLI::Range(1, static_cast<int>(limits::ParallelSize::maximum)));
  add_scheduling_options(cmd, o.get());
  cmd->add_option("--mount", o->mounts, "VOLUME:PATH[:ro] (PATH may be empty: /root/VOLUME)");
  cmd->add_option("--env", o->env, "KEY=VALUE in every container");
  cmd->add_flag("--wait", o->wait, "wait until every container is Running");
  add_output_option(cmd, &o->output);
  cmd->callback([o, action] { *action = [o] { return create_cluster(*o); }; });
}

struct NameOptions {
  std::string name, output, drain_timeout;
  std::string type, since;  // events' filters
  int containers = 0;
  bool wait = false;
};

int list_clusters(const std::string& output) {
  Client client(load_endpoint());
  json out;
  if (auto f = client.call("GET", "/clusters", nullptr, &out)) return fail(*f);
  const json& clusters = out[key(api::fields::ClusterList::clusters)];
  if (print_json_if_asked(output, clusters)) return 0;
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "FRAMEWORK", "CONTAINERS", "RUNNING", "PHASE", "QUEUE", "OWNER"}};
  for (const auto& c : clusters)
    rows.push_back({c[key(cluster_field::name)], c[key(cluster_field::framework)], size_text(c), running_count(c),
                    c[key(cluster_field::status)][key(status_field::phase)], queue_text(c, false),
                    c[key(cluster_field::owner)]});
  print_table(rows);
  return 0;
}

int get_cluster(const NameOptions& o) {
  Client client(load_endpoint());
  json out;
  if (auto f = client.call("GET", "/clusters/" + o.name, nullptr, &out)) return fail(*f);
  if (print_json_if_asked(o.output, out)) return 0;
  print_cluster(out);
  return 0;
}

int list_events(const NameOptions& o) {
  Client client(load_endpoint());
  json out;
  std::string query;
  if (!o.type.empty()) query += "&type=" + query_value(o.type);
  if (!o.since.empty()) query += "&since=" + query_value(o.since);
  if (!query.empty()) query[0] = '?';
  if (auto f = client.call("GET", "/clusters/" + o.name + "/events" + query, nullptr, &out)) return fail(*f);
  const json& events = out[key(api::fields::EventList::events)];
  if (print_json_if_asked(o.output, events)) return 0;
  std::vector<std::vector<std::string>> rows = {{"TIME", "TYPE", "MESSAGE"}};
  for (const auto& e : events)
    rows.push_back({e[key(api::fields::Event::time)], e[key(api::fields::Event::type)],
                    e[key(api::fields::Event::message)]});
  print_table(rows);
  return 0;
}

int scale_cluster(const NameOptions& o) {
  Client client(load_endpoint());
  json body = {{key(api::fields::Scale::containers), o.containers}};
  if (!o.drain_timeout.empty()) body[key(api::fields::Scale::drain_timeout)] = o.drain_timeout;
  json scaled;
  if (auto f = client.call("PATCH", "/clusters/" + o.name, &body, &scaled)) return fail(*f);
  if (o.wait) return wait_for(client, o.name, false, o.containers);
  const std::string queued = queue_text(scaled, true);
  printf("cluster %s scaling to %d containers%s\n", o.name.c_str(), o.containers,
         queued == "-" ? "" : ("; queued " + queued).c_str());
  return 0;
}

int delete_cluster(const NameOptions& o) {
  Client client(load_endpoint());
  if (auto f = client.call("DELETE", "/clusters/" + o.name, nullptr, nullptr)) return fail(*f);
  if (o.wait) return wait_for(client, o.name, true);
  printf("cluster %s is being deleted\n", o.name.c_str());
  return 0;
}

int print_hostfile(const NameOptions& o) {
  Client client(load_endpoint());
  std::string text;
  if (auto f = client.get_text("/clusters/" + o.name + "/hostfile", &text)) return fail(*f);
  printf("%s", text.c_str());
  return 0;
}

// Adds a subcommand NAME that runs `run` with its own NameOptions.
CLI::App* add_named(CLI::App* parent, const std::string& name, const std::string& help, Action* action,
                    int (*run)(const NameOptions&), std::shared_ptr<NameOptions> o) {
  auto* cmd = parent->add_subcommand(name, help);
  cmd->add_option("name", o->name)->required();
  cmd->callback([o, action, run] { *action = [o, run] { return run(*o); }; });
  return cmd;
}

}  // namespace

void add_cluster_commands(CLI::App& app, Action* action) {
  auto* cluster = app.add_subcommand("cluster", "create, list, get, scale and delete clusters; their events");
  cluster->require_subcommand(1);
  add_create(cluster, action);

  auto list_output = std::make_shared<std::string>();
  auto* list = cluster->add_subcommand("list", "list your clusters");
  add_output_option(list, list_output.get());
  list->callback([list_output, action] { *action = [list_output] { return list_clusters(*list_output); }; });

  auto get = std::make_shared<NameOptions>();
  add_output_option(add_named(cluster, "get", "show a cluster and its containers", action, get_cluster, get), &get->output);

  auto events = std::make_shared<NameOptions>();
  auto* events_cmd = add_named(cluster, "events", "what happened to a cluster (scales, drains, failures), oldest first",
                               action, list_events, events);
  add_output_option(events_cmd, &events->output);
  events_cmd->add_option("--type", events->type, "only events of this type (Created, Scaling, Running, Failed, ...)");
  events_cmd->add_option("--since", events->since, "only events at or after this UTC time, e.g. 2026-12-01T10:00:00Z");

  auto scale = std::make_shared<NameOptions>();
  auto* scale_cmd = add_named(cluster, "scale", "change how many containers a cluster has", action, scale_cluster, scale);
  scale_cmd->add_option("--containers", scale->containers,
                        "the new count (" + std::to_string(api::limits::ContainerCount::minimum) + " to " +
                            std::to_string(api::limits::ContainerCount::maximum) + ")")->required();
  scale_cmd->add_option("--drain-timeout", scale->drain_timeout, drain_help() + "; the cluster keeps it")
      ->check(check_drain_timeout);
  scale_cmd->add_flag("--wait", scale->wait, "wait until every container is Running (leaving ones drained and gone)");

  auto remove = std::make_shared<NameOptions>();
  add_named(cluster, "delete", "delete a cluster and everything it holds", action, delete_cluster, remove)
      ->add_flag("--wait", remove->wait, "wait until it is gone");

  add_named(&app, "hostfile", "print a cluster's hostfile", action, print_hostfile, std::make_shared<NameOptions>());
}

}  // namespace edt::cli

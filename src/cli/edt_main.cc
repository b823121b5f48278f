// edt: the command line client of edtd. Tables for people, -o json for
// scripts; refusals print what was wrong, where and what to do, and exit 1.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cli/client.h"

namespace edt::cli {
namespace {

using nlohmann::json;

int fail(const ApiFailure& f) {
  fprintf(stderr, "%s\n", f.to_string().c_str());
  return 1;
}

int usage_error(const std::string& message, const std::string& fix) {
  fprintf(stderr, "edt: %s\n  fix: %s\n", message.c_str(), fix.c_str());
  return 2;
}

// Prints rows as columns, the first row as the header.
void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], row[i].size());
    }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i)
      line += i + 1 == row.size() ? row[i] : row[i] + std::string(width[i] - row[i].size() + 2, ' ');
    printf("%s\n", line.c_str());
  }
}

std::string running_count(const json& cluster) {
  int running = 0, total = 0;
  for (const auto& c : cluster["status"]["containers"]) {
    total++;
    running += c["phase"] == "Running" ? 1 : 0;
  }
  return std::to_string(running) + "/" + std::to_string(total);
}

// Polls the cluster until it is Running (or gone, when `gone` is set),
// printing each change of phase. Fails on Failed or after the timeout.
int wait_for(Client& client, const std::string& name, bool gone) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  std::string last;
  auto started = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() < deadline) {
    json cluster;
    if (auto f = client.call("GET", "/clusters/" + name, nullptr, &cluster)) {
      if (gone && f->status == 404) {
        fprintf(stderr, "%s: deleted\n", name.c_str());
        return 0;
      }
      return fail(*f);
    }
    std::string phase = cluster["status"]["phase"];
    std::string line = phase + ", " + running_count(cluster) + " containers Running";
    if (line != last) {
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      fprintf(stderr, "%s: %s (%.1fs)\n", name.c_str(), line.c_str(), seconds);
      last = line;
    }
    if (phase == "Failed") {
      fprintf(stderr, "edt: cluster %s failed: %s\n", name.c_str(), cluster["status"]["message"].get<std::string>().c_str());
      return 1;
    }
    if (!gone && phase == "Running") return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  fprintf(stderr, "edt: gave up waiting for %s after 5 minutes\n", name.c_str());
  return 1;
}

void print_cluster(const json& c) {
  printf("name:       %s\nowner:      %s\nframework:  %s\nimage:      %s\nphase:      %s\nmessage:    %s\n",
         c["name"].get<std::string>().c_str(), c["owner"].get<std::string>().c_str(),
         c["framework"].get<std::string>().c_str(), c["image"].get<std::string>().c_str(),
         c["status"]["phase"].get<std::string>().c_str(), c["status"]["message"].get<std::string>().c_str());
  printf("shm:        %s\n", c["shm"].get<std::string>().c_str());
  if (!c["gpu"].is_null())
    printf("gpu:        %d x %s per container\n", c["gpu"]["count"].get<int>(), c["gpu"]["model"].get<std::string>().c_str());
  for (const auto& m : c["mounts"])
    printf("mount:      %s at %s%s\n", m["volume"].get<std::string>().c_str(), m["path"].get<std::string>().c_str(),
           m["read_only"].get<bool>() ? " (read-only)" : "");
  printf("\n");
  std::vector<std::vector<std::string>> rows = {{"CONTAINER", "ROLE", "PHASE", "ADDRESS", "GPUS"}};
  for (const auto& k : c["status"]["containers"])
    rows.push_back({k["name"], k["role"], k["phase"], k["address"], k["gpus"].dump()});
  print_table(rows);
}

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
    std::string quoted = a;
    if (!plain) {
      quoted = "'";
      for (char c : a) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
      quoted += "'";
    }
    out += (out.empty() ? "" : " ") + quoted;
  }
  return out;
}

// Runs a job, streams its output, and returns its exit code.
int run_job(Client& client, const std::string& cluster, const std::string& container,
            const std::vector<std::string>& command) {
  if (command.empty()) return usage_error("no command given", "put the command after --, e.g. edt run tthvd -- hostname");
  json body = {{"command", join_command(command)}};
  if (!container.empty()) body["container"] = container;
  json job;
  if (auto f = client.call("POST", "/clusters/" + cluster + "/jobs", &body, &job)) return fail(*f);
  const std::string id = std::to_string(job["id"].get<int64_t>());
  if (auto f = client.stream("/jobs/" + id + "/log", [](const char* data, size_t n) {
        fwrite(data, 1, n, stdout);
        fflush(stdout);
      }))
    return fail(*f);
  json done;
  if (auto f = client.call("GET", "/jobs/" + id, nullptr, &done)) return fail(*f);
  if (!done["message"].get<std::string>().empty())
    fprintf(stderr, "edt: job %s: %s\n", id.c_str(), done["message"].get<std::string>().c_str());
  int code = done["exit_code"].get<int>();
  return code < 0 ? 1 : code;
}

int ssh_into(Client& client, const std::string& cluster, std::string container, const std::vector<std::string>& command) {
  json info;
  if (auto f = client.call("GET", "/clusters/" + cluster + "/ssh", nullptr, &info)) return fail(*f);
  if (container.empty()) container = cluster + "-launcher";
  std::string address;
  for (const auto& c : info["containers"])
    if (c["name"] == container) address = c["address"];
  if (address.empty())
    return usage_error("cluster " + cluster + " has no container " + container, "see edt cluster get " + cluster);
  char key_path[] = "/tmp/edt-ssh-key-XXXXXX";
  int fd = mkstemp(key_path);
  if (fd < 0) return usage_error("cannot write a key file in /tmp", "check /tmp");
  std::string key = info["private_key"];
  (void)!write(fd, key.data(), key.size());
  close(fd);
  std::vector<std::string> argv = {"ssh", "-i", key_path, "-p", std::to_string(info["port"].get<int>()),
                                   "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                                   "-o", "LogLevel=ERROR", "root@" + address};
  if (!command.empty()) argv.push_back(join_command(command));
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execvp("ssh", args.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  unlink(key_path);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"edt: distributed-training clusters (talks to edtd; EDT_API and EDT_TOKEN say where and who)"};
  app.require_subcommand(1);
  std::string output;
  auto add_output = [&output](CLI::App* cmd) {
    cmd->add_option("-o,--output", output, "json for scripts")->check(CLI::IsMember({"json", "table"}));
  };
  std::function<int(Client&)> action;

  // login
  auto* login = app.add_subcommand("login", "save the API address and token in " + config_path());
  std::string login_api = "http://127.0.0.1:7470", login_token;
  login->add_option("--api", login_api, "edtd's address")->capture_default_str();
  login->add_option("--token", login_token, "your token")->required();

  // cluster
  auto* cluster = app.add_subcommand("cluster", "create, list, get, scale and delete clusters");
  cluster->require_subcommand(1);
  std::string name, framework = "horovod", image, gpu, shm;
  int containers = 0;
  bool wait = false;
  std::vector<std::string> mounts, env;
  auto* create = cluster->add_subcommand("create", "create a cluster");
  create->add_option("name", name, "the cluster's name (a DNS label)")->required();
  create->add_option("--framework", framework, "horovod, deepspeed, megatron or slurm")->capture_default_str();
  create->add_option("--containers", containers, "how many (>= 2: a launcher and workers)")->required();
  create->add_option("--image", image, "image (default: edt)");
  create->add_option("--gpu", gpu, "MODEL:COUNT GPUs per container");
  create->add_option("--shm", shm, "size of /dev/shm, e.g. 1Gi");
  create->add_option("--mount", mounts, "VOLUME:PATH[:ro] (PATH may be empty: /root/VOLUME)");
  create->add_option("--env", env, "KEY=VALUE in every container");
  create->add_flag("--wait", wait, "wait until every container is Running");
  add_output(create);
  auto* list = cluster->add_subcommand("list", "list your clusters");
  add_output(list);
  auto* get = cluster->add_subcommand("get", "show a cluster and its containers");
  get->add_option("name", name)->required();
  add_output(get);
  auto* scale = cluster->add_subcommand("scale", "change how many containers a cluster has");
  scale->add_option("name", name)->required();
  scale->add_option("--containers", containers, "the new count (>= 2)")->required();
  scale->add_flag("--wait", wait, "wait until every container is Running");
  auto* remove = cluster->add_subcommand("delete", "delete a cluster and everything it holds");
  remove->add_option("name", name)->required();
  remove->add_flag("--wait", wait, "wait until it is gone");

  auto* hostfile = app.add_subcommand("hostfile", "print a cluster's hostfile");
  hostfile->add_option("name", name)->required();
  std::string container;
  std::vector<std::string> command;
  auto* ssh = app.add_subcommand("ssh", "open a shell in a container (the launcher by default)");
  ssh->add_option("name", name)->required();
  ssh->add_option("container", container, "e.g. tthvd-worker-0");
  ssh->add_option("command", command, "a command to run instead of a shell");
  auto* exec = app.add_subcommand("exec", "run a command in a container: edt exec CONTAINER -- CMD...");
  exec->add_option("container", container)->required();
  exec->add_option("command", command)->required();
  auto* run = app.add_subcommand("run", "run a command in the launcher: edt run NAME -- CMD...");
  run->add_option("name", name)->required();
  run->add_option("command", command)->required();

  auto* volume = app.add_subcommand("volume", "storage volumes");
  volume->require_subcommand(1);
  std::string host_path;
  auto* volume_create = volume->add_subcommand("create", "create a volume");
  volume_create->add_option("name", name)->required();
  volume_create->add_option("--host-path", host_path, "register an existing host directory (admin)");
  auto* volume_list = volume->add_subcommand("list", "list volumes");
  add_output(volume_list);
  auto* volume_delete = volume->add_subcommand("delete", "delete a volume no cluster mounts");
  volume_delete->add_option("name", name)->required();

  auto* image_cmd = app.add_subcommand("image", "images");
  image_cmd->require_subcommand(1);
  auto* image_list = image_cmd->add_subcommand("list", "list images and their frameworks");
  add_output(image_list);
  auto* gpu_cmd = app.add_subcommand("gpu", "GPUs");
  gpu_cmd->require_subcommand(1);
  auto* gpu_list = gpu_cmd->add_subcommand("list", "list the GPU inventory");
  add_output(gpu_list);
  auto* user_cmd = app.add_subcommand("user", "users (admin)");
  user_cmd->require_subcommand(1);
  auto* user_create = user_cmd->add_subcommand("create", "create a user; prints their token");
  user_create->add_option("name", name)->required();

  CLI11_PARSE(app, argc, argv);

  if (login->parsed()) {
    std::filesystem::create_directories(std::filesystem::path(config_path()).parent_path());
    {
      std::ofstream out(config_path(), std::ios::trunc);
      out << json{{"api", login_api}, {"token", login_token}}.dump(2) << "\n";
    }
    chmod(config_path().c_str(), 0600);
    Client client({login_api, login_token});
    json me;
    if (auto f = client.call("GET", "/whoami", nullptr, &me)) return fail(*f);
    printf("logged in to %s as %s\n", login_api.c_str(), me["name"].get<std::string>().c_str());
    return 0;
  }

  Client client(load_endpoint());
  const bool as_json = output == "json";
  if (create->parsed()) {
    json body = {{"name", name}, {"framework", framework}, {"containers", containers}};
    if (!image.empty()) body["image"] = image;
    if (!shm.empty()) body["shm"] = shm;
    if (!gpu.empty()) {
      auto colon = gpu.rfind(':');
      int count = 1;
      try {
        if (colon != std::string::npos) count = std::stoi(gpu.substr(colon + 1));
      } catch (...) {
        return usage_error("--gpu '" + gpu + "' is not MODEL:COUNT", "write e.g. --gpu NVIDIA-P4:1");
      }
      body["gpu"] = {{"model", gpu.substr(0, colon)}, {"count", count}};
    }
    body["mounts"] = json::array();
    for (const auto& m : mounts) {
      auto first = m.find(':');
      json mount = {{"volume", m.substr(0, first)}};
      if (first != std::string::npos) {
        std::string rest = m.substr(first + 1);
        if (rest.size() >= 3 && rest.compare(rest.size() - 3, 3, ":ro") == 0) {
          mount["read_only"] = true;
          rest.resize(rest.size() - 3);
        }
        if (!rest.empty()) mount["path"] = rest;
      }
      body["mounts"].push_back(mount);
    }
    for (const auto& e : env) {
      auto eq = e.find('=');
      if (eq == std::string::npos) return usage_error("--env '" + e + "' is not KEY=VALUE", "write e.g. --env NCCL_DEBUG=INFO");
      body["env"][e.substr(0, eq)] = e.substr(eq + 1);
    }
    json created;
    if (auto f = client.call("POST", "/clusters", &body, &created)) return fail(*f);
    if (wait && wait_for(client, name, false) != 0) return 1;
    if (as_json) {
      json now;
      if (auto f = client.call("GET", "/clusters/" + name, nullptr, &now)) return fail(*f);
      printf("%s\n", now.dump(2).c_str());
    } else {
      printf("cluster %s created\n", name.c_str());
    }
    return 0;
  }
  if (list->parsed()) {
    json out;
    if (auto f = client.call("GET", "/clusters", nullptr, &out)) return fail(*f);
    if (as_json) return printf("%s\n", out["clusters"].dump(2).c_str()), 0;
    std::vector<std::vector<std::string>> rows = {{"NAME", "FRAMEWORK", "CONTAINERS", "RUNNING", "PHASE", "OWNER"}};
    for (const auto& c : out["clusters"])
      rows.push_back({c["name"], c["framework"], std::to_string(c["containers"].get<int>()), running_count(c),
                      c["status"]["phase"], c["owner"]});
    print_table(rows);
    return 0;
  }
  if (get->parsed()) {
    json out;
    if (auto f = client.call("GET", "/clusters/" + name, nullptr, &out)) return fail(*f);
    if (as_json) return printf("%s\n", out.dump(2).c_str()), 0;
    print_cluster(out);
    return 0;
  }
  if (scale->parsed()) {
    json body = {{"containers", containers}};
    if (auto f = client.call("PATCH", "/clusters/" + name, &body, nullptr)) return fail(*f);
    if (wait) return wait_for(client, name, false);
    printf("cluster %s scaling to %d containers\n", name.c_str(), containers);
    return 0;
  }
  if (remove->parsed()) {
    if (auto f = client.call("DELETE", "/clusters/" + name, nullptr, nullptr)) return fail(*f);
    if (wait) return wait_for(client, name, true);
    printf("cluster %s is being deleted\n", name.c_str());
    return 0;
  }
  if (hostfile->parsed()) {
    std::string text;
    if (auto f = client.get_text("/clusters/" + name + "/hostfile", &text)) return fail(*f);
    printf("%s", text.c_str());
    return 0;
  }
  if (ssh->parsed()) return ssh_into(client, name, container, command);
  if (exec->parsed()) {
    std::string owner = cluster_of(container);
    if (owner.empty())
      return usage_error("'" + container + "' is not a container name",
                         "name it as NAME-launcher or NAME-worker-I (see edt cluster get NAME)");
    return run_job(client, owner, container, command);
  }
  if (run->parsed()) return run_job(client, name, "", command);
  if (volume_create->parsed()) {
    json body = {{"name", name}};
    if (!host_path.empty()) body["host_path"] = host_path;
    json out;
    if (auto f = client.call("POST", "/volumes", &body, &out)) return fail(*f);
    printf("volume %s created at %s\n", name.c_str(), out["host_path"].get<std::string>().c_str());
    return 0;
  }
  if (volume_list->parsed()) {
    json out;
    if (auto f = client.call("GET", "/volumes", nullptr, &out)) return fail(*f);
    if (as_json) return printf("%s\n", out["volumes"].dump(2).c_str()), 0;
    std::vector<std::vector<std::string>> rows = {{"NAME", "OWNER", "HOST PATH"}};
    for (const auto& v : out["volumes"]) rows.push_back({v["name"], v["owner"], v["host_path"]});
    print_table(rows);
    return 0;
  }
  if (volume_delete->parsed()) {
    if (auto f = client.call("DELETE", "/volumes/" + name, nullptr, nullptr)) return fail(*f);
    printf("volume %s deleted\n", name.c_str());
    return 0;
  }
  if (image_list->parsed()) {
    json out;
    if (auto f = client.call("GET", "/images", nullptr, &out)) return fail(*f);
    if (as_json) return printf("%s\n", out["images"].dump(2).c_str()), 0;
    std::vector<std::vector<std::string>> rows = {{"NAME", "FRAMEWORKS", "ROOT"}};
    for (const auto& i : out["images"]) {
      std::string frameworks;
      for (const auto& f : i["frameworks"]) frameworks += (frameworks.empty() ? "" : ",") + f.get<std::string>();
      rows.push_back({i["name"], frameworks, i["root"]});
    }
    print_table(rows);
    return 0;
  }
  if (gpu_list->parsed()) {
    json out;
    if (auto f = client.call("GET", "/gpus", nullptr, &out)) return fail(*f);
    if (as_json) return printf("%s\n", out["gpus"].dump(2).c_str()), 0;
    std::vector<std::vector<std::string>> rows = {{"INDEX", "MODEL", "SIMULATED", "HELD BY"}};
    for (const auto& g : out["gpus"])
      rows.push_back({std::to_string(g["index"].get<int>()), g["model"], g["simulated"].get<bool>() ? "yes" : "no",
                      g["holder"]});
    print_table(rows);
    return 0;
  }
  if (user_create->parsed()) {
    json body = {{"name", name}}, out;
    if (auto f = client.call("POST", "/users", &body, &out)) return fail(*f);
    printf("%s\n", out["token"].get<std::string>().c_str());
    return 0;
  }
  return 0;
}

}  // namespace edt::cli

int main(int argc, char** argv) { return edt::cli::main(argc, argv); }

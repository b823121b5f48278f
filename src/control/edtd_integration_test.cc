// End-to-end tests of edtd: a real daemon, real bubblewrap sandboxes, the
// real edt CLI. Each test starts its own edtd on a free port with its own
// data dir and its own block of 127.x addresses. Needs root (namespaces).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "common/net.h"
#include "image/test_images.h"

namespace edt::control {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Output {
  int code = -1;
  std::string text;
};

// Runs a shell command; returns its exit code and its stdout+stderr.
Output sh(const std::string& command) {
  Output out;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), p)) > 0) out.text.append(buffer, n);
  int status = pclose(p);
  out.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

class Edtd : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u) << "these tests need root for namespaces";
    const int id = getpid();
    dir_ = "/tmp/edtd-it-" + std::to_string(id);
    fs::remove_all(dir_);
    port_ = edt::net::free_port("127.0.0.1").value();
    ssh_port_ = edt::net::free_port("0.0.0.0").value();
    prefix_ = "127." + std::to_string(100 + id % 100) + "." + std::to_string((id / 100) % 250) + ".";
    api_ = "http://127.0.0.1:" + std::to_string(port_);
    start_edtd();
    std::ifstream in(dir_ + "/admin.token");
    in >> token_;
    ASSERT_FALSE(token_.empty());
    env_ = "EDT_API=" + api_ + " EDT_TOKEN=" + token_ + " " + EDT_CLI + " ";
  }

  void TearDown() override {
    // Whatever a failed test left: delete its clusters and volumes, then
    // stop edtd; then the disks still mounted under its data dir.
    if (pid_ > 0) {
      json clusters = get("/api/v1/clusters");
      for (const auto& c : clusters["clusters"]) sh(env_ + "cluster delete --wait " + c["name"].get<std::string>());
      delete_volumes();
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    for (const auto& point : mounts_under(dir_)) ::umount2(point.c_str(), MNT_DETACH);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void delete_volumes() {
    const json volumes = get("/api/v1/volumes");  // kept: a range-for over a temporary's member dangles
    for (const auto& v : volumes["volumes"]) {
      Output deleted = sh(env_ + "volume delete " + v["name"].get<std::string>());
      EXPECT_EQ(deleted.code, 0) << deleted.text;
    }
  }

  // The mount points below `dir` (the disks of containers and volumes), deepest first.
  static std::vector<std::string> mounts_under(const std::string& dir) {
    std::ifstream mounts("/proc/self/mountinfo");
    std::vector<std::string> out;
    for (std::string line; std::getline(mounts, line);) {
      std::istringstream fields(line);
      std::string id, parent, device, root, point;
      fields >> id >> parent >> device >> root >> point;
      if (point.rfind(dir + "/", 0) == 0) out.push_back(point);
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
    return out;
  }

  void start_edtd() {
    pid_ = fork();
    if (pid_ == 0) {
      fs::create_directories(dir_);
      int log = open((dir_ + "/edtd.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      dup2(log, 2);
      std::string listen = "127.0.0.1:" + std::to_string(port_), range = prefix_ + "0/24",
                  ssh = std::to_string(ssh_port_);
      const std::string web = dir_ + "/web";
      fs::create_directories(web);
      std::ofstream(web + "/index.html") << "<title>edt console</title>\n";
      execl(EDTD_PATH, "edtd", "--data-dir", dir_.c_str(), "--listen", listen.c_str(), "--network", "loopback",
            "--address-range", range.c_str(), "--ssh-port", ssh.c_str(), "--gpus", "NVIDIA-P4=4", "--grace", "2s", "--web-dir",
            web.c_str(), nullptr);
      _exit(127);
    }
    for (int i = 0; i < 100; ++i) {
      httplib::Client c(api_);
      if (c.Get("/healthz")) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "edtd did not come up";
  }

  httplib::Headers auth(const std::string& token) { return {{"Authorization", "Bearer " + token}}; }
  json get(const std::string& path) {
    httplib::Client c(api_);
    auto r = c.Get(path.c_str(), auth(token_));
    return r ? json::parse(r->body, nullptr, false) : json();
  }
  // A request; returns the status and the parsed body.
  std::pair<int, json> request(const std::string& method, const std::string& path, const std::string& body,
                               const std::string& token) {
    httplib::Client c(api_);
    httplib::Headers h = token.empty() ? httplib::Headers{} : auth(token);
    httplib::Result r = method == "POST"    ? c.Post(path.c_str(), h, body, "application/json")
                        : method == "PATCH" ? c.Patch(path.c_str(), h, body, "application/json")
                        : method == "DELETE" ? c.Delete(path.c_str(), h)
                                             : c.Get(path.c_str(), h);
    if (!r) return {0, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  Output edt(const std::string& args) { return sh(env_ + args); }

  // Processes whose command line mentions the data dir (sandboxes, sshd,
  // jobs), but edtd's own child, the warm interpreter it keeps while it
  // runs, and that one's relays waiting for a client.
  std::vector<std::string> processes_of_data_dir() {
    std::vector<std::string> out;
    for (const auto& entry : fs::directory_iterator("/proc")) {
      const std::string name = entry.path().filename();
      if (!std::isdigit(static_cast<unsigned char>(name[0])) || std::stoi(name) == pid_) continue;
      std::ifstream in(entry.path() / "cmdline");
      std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::ifstream stat(entry.path() / "stat");
      std::string st((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
      if (st.find(") Z") != std::string::npos) continue;  // a reaped-later zombie holds nothing
      if (cmdline.find("edt._warm") != std::string::npos &&
          (parent_of(st) == pid_ || parent_of(read_stat(parent_of(st))) == pid_))
        continue;
      if (cmdline.find(dir_ + "/") != std::string::npos) out.push_back(name + ": " + cmdline);
    }
    return out;
  }
  static std::string read_stat(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  static pid_t parent_of(const std::string& stat) {
    if (stat.rfind(')') == std::string::npos) return 0;
    std::istringstream rest(stat.substr(stat.rfind(')') + 2));
    std::string state;
    pid_t parent = 0;
    rest >> state >> parent;
    return parent;
  }
  // The bubblewrap processes of this test's containers (live, not zombies).
  std::vector<std::string> sandbox_processes() {
    std::vector<std::string> out;
    for (const auto& p : processes_of_data_dir())
      if (p.find(": /usr/bin/bwrap") != std::string::npos) out.push_back(p.substr(0, p.find(':')));
    std::sort(out.begin(), out.end());
    return out;
  }
  // Listening TCP sockets on this test's addresses.
  int listeners_on_range() {
    Output o = sh("ss -Hltn");
    int n = 0;
    for (const auto& line : lines(o.text)) n += line.find(prefix_) != std::string::npos ? 1 : 0;
    return n;
  }
  void expect_nothing_left() {
    EXPECT_TRUE(processes_of_data_dir().empty()) << processes_of_data_dir()[0];
    EXPECT_EQ(listeners_on_range(), 0);
    EXPECT_TRUE(fs::is_empty(dir_ + "/containers")) << "container files left";
    EXPECT_TRUE(!fs::exists(dir_ + "/clusters") || fs::is_empty(dir_ + "/clusters")) << "cluster files left";
    // The volumes' disks go with the volumes; nothing else is mounted there.
    delete_volumes();
    EXPECT_TRUE(mounts_under(dir_).empty()) << "a mount is left: " << mounts_under(dir_)[0];
    json gpus = get("/api/v1/gpus");
    for (const auto& g : gpus["gpus"]) EXPECT_EQ(g["holder"], "");
  }

  std::string dir_, prefix_, api_, token_, env_;
  int port_ = 0, ssh_port_ = 0;
  pid_t pid_ = -1;
};

TEST_F(Edtd, CreateScaleMpirunScaleDownDelete) {
  ASSERT_EQ(edt("volume create data").code, 0);
  std::ofstream(dir_ + "/volumes/data/hello.txt") << "from the host\n";
  Output created = edt("cluster create tthvd --framework horovod --containers 2 --gpu NVIDIA-P4:1 --shm 128M "
                       "--memory 2Gi --cpus 1.5 --mount data: --wait");
  ASSERT_EQ(created.code, 0) << created.text;

  json c = get("/api/v1/clusters/tthvd");
  ASSERT_EQ(c["status"]["phase"], "Running") << c.dump();
  EXPECT_EQ(c["memory"], "2 GiB");
  EXPECT_EQ(c["cpus"], "1.5");
  std::set<std::string> addresses;
  for (const auto& k : c["status"]["containers"]) {
    EXPECT_EQ(k["phase"], "Running");
    addresses.insert(k["address"].get<std::string>());
    EXPECT_EQ(k["address"].get<std::string>().rfind(prefix_, 0), 0u);
  }
  EXPECT_EQ(addresses.size(), 2u);
  const std::string hostfile2 = "tthvd-launcher slots=1\ntthvd-worker-0 slots=1\n";
  std::map<std::string, std::string> gpus;  // CUDA_VISIBLE_DEVICES by container
  for (const std::string name : {"tthvd-launcher", "tthvd-worker-0"}) {
    Output o = edt("exec " + name + " -- sh -c 'hostname; cat /etc/mpi/hostfile; "
                   "echo $CUDA_VISIBLE_DEVICES $EDT_HOST_GPUS $(ls /dev/nvidia*); "
                   "df -m /dev/shm | tail -1; cat /root/data/hello.txt; touch /usr/x 2>/dev/null || echo ro'");
    ASSERT_EQ(o.code, 0) << o.text;
    auto l = lines(o.text);
    ASSERT_GE(l.size(), 7u) << o.text;
    EXPECT_EQ(l[0], name);
    EXPECT_EQ(l[1] + "\n" + l[2] + "\n", hostfile2);
    // CUDA numbers its one GPU 0, whichever of the host's it is; the
    // host's index is EDT_HOST_GPUS and its device file's name.
    EXPECT_TRUE(l[3] == "0 0 /dev/nvidia0" || l[3] == "0 1 /dev/nvidia1") << l[3];
    gpus[name] = l[3].substr(0, 1);
    EXPECT_NE(l[4].find(" 128 "), std::string::npos) << l[4];
    EXPECT_EQ(l[5], "from the host");
    EXPECT_EQ(l[6], "ro");
  }
  // Containers reach each other by name over SSH, from their own address.
  Output ssh = edt("run tthvd -- ssh tthvd-worker-0 'hostname; echo $SSH_CLIENT'");
  ASSERT_EQ(ssh.code, 0) << ssh.text;
  EXPECT_EQ(lines(ssh.text)[0], "tthvd-worker-0");
  EXPECT_EQ(lines(ssh.text)[1].rfind(c["status"]["containers"][0]["address"].get<std::string>() + " ", 0), 0u);

  // edt's own tools of the running edtd (here: its build tree) are on the PATH inside,
  // and Python finds edt.torch with its built extension.
  Output tools = edt("run tthvd -- sh -c 'command -v edt; python3 -c \"import edt._edt, edt.torch; print(1)\"'");
  ASSERT_EQ(tools.code, 0) << tools.text;
  EXPECT_EQ(lines(tools.text)[0], EDT_CLI);
  EXPECT_EQ(lines(tools.text)[1], "1");
  // A job runs in the container's cgroups too (its pids, memory and CPU bounds).
  Output cgroup = edt("run tthvd -- sh -c 'diff /proc/self/cgroup /proc/1/cgroup && "
                      "grep -qE \":(cpu|cpu,cpuacct|cpuacct,cpu|):/edt-\" /proc/self/cgroup && "
                      "grep -c :/edt- /proc/self/cgroup'");
  ASSERT_EQ(cgroup.code, 0) << cgroup.text;
  EXPECT_NE(lines(cgroup.text).at(0), "0") << cgroup.text;

  // A Python worker started through edt-warm-run (as edtrun starts them) is
  // forked from edtd's warm interpreter into this container: torch is
  // already imported, and it runs in the container's PID namespace and file
  // system, in its cgroups (those of the container's init, edtd's
  // edt-<key> ones). `import horovod.torch` works in the container as well.
  std::ofstream(dir_ + "/volumes/data/warm.py")
      << "import os, sys\ncg = lambda p: open('/proc/%s/cgroup' % p).read()\n"
         "print('torch' in sys.modules, os.getpid() < 1000, open('/etc/hostname').read().strip(),\n"
         "      cg('self') == cg(1) and '/edt-' in cg(1))\n";
  std::ofstream(dir_ + "/volumes/data/hvd.py") << "import horovod.torch as hvd\nprint(hvd.__name__)\n";
  Output warm = edt("run tthvd -- sh -c 'cd /root/data; i=0; while [ ! -S /run/edt-warm/python.sock ] && "
                    "[ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; edt-warm-run python3 warm.py; python3 hvd.py'");
  ASSERT_EQ(warm.code, 0) << warm.text;
  ASSERT_EQ(lines(warm.text).size(), 2u) << warm.text;
  EXPECT_EQ(lines(warm.text)[0], "True True tthvd-launcher True") << "not forked warm into the container";
  EXPECT_EQ(lines(warm.text)[1], "horovod.torch");
  // edtrun's worker in the other container is forked there too, without
  // ssh: in that container's PID namespace and directory, with its session
  // environment (its GPU).
  std::ofstream(dir_ + "/volumes/data/remote.py")
      << "import os, sys\nprint('torch' in sys.modules, os.getpid() < 1000, open('/etc/hostname').read().strip(), "
         "os.getcwd(), 'SSH_CONNECTION' in os.environ, os.environ.get('CUDA_VISIBLE_DEVICES'))\n";
  Output remote = edt("run tthvd -- sh -c 'cd /root/data; edtrun -np 2 --hostfile /etc/mpi/hostfile python3 remote.py'");
  ASSERT_EQ(remote.code, 0) << remote.text;
  EXPECT_NE(remote.text.find("True True tthvd-worker-0 /root/data False " + gpus["tthvd-worker-0"]), std::string::npos)
      << remote.text;

  // edt ssh logs in with the cluster's key, to the launcher or a named container.
  Output from_host = edt("ssh tthvd tthvd-worker-0 hostname");
  EXPECT_EQ(from_host.code, 0) << from_host.text;
  EXPECT_EQ(from_host.text, "tthvd-worker-0\n");

  Output scaled = edt("cluster scale tthvd --containers 4 --wait");
  ASSERT_EQ(scaled.code, 0) << scaled.text;
  EXPECT_EQ(lines(edt("hostfile tthvd").text).size(), 4u);
  Output mpi = edt("run tthvd -- mpirun --allow-run-as-root --hostfile /etc/mpi/hostfile -np 4 hostname");
  ASSERT_EQ(mpi.code, 0) << mpi.text;
  // mpirun's own warnings start with "[host:pid]"; the hostnames are the rest.
  std::vector<std::string> names;
  for (const auto& line : lines(mpi.text))
    if (line[0] != '[') names.push_back(line);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()),
            (std::set<std::string>{"tthvd-launcher", "tthvd-worker-0", "tthvd-worker-1", "tthvd-worker-2"}))
      << mpi.text;
  // libedt across the containers: edtrun reaches the workers over SSH, the
  // probe forms a communicator and allreduces rank+1 (1+2+3+4 = 10).
  Output probe = edt("run tthvd -- edtrun -np 4 --hostfile /etc/mpi/hostfile edtrun-probe");
  ASSERT_EQ(probe.code, 0) << probe.text;
  std::set<std::string> probe_hosts;
  for (const auto& line : lines(probe.text)) {
    auto at = line.find("<stdout>: rank ");
    if (at == std::string::npos) continue;
    EXPECT_NE(line.find(" sum 10"), std::string::npos) << line;
    auto host = line.find(" host ") + 6;
    probe_hosts.insert(line.substr(host, line.find(' ', host) - host));
  }
  EXPECT_EQ(probe_hosts, (std::set<std::string>{"tthvd-launcher", "tthvd-worker-0", "tthvd-worker-1", "tthvd-worker-2"}))
      << probe.text;
  Output bench = edt("run tthvd -- edtrun -np 4 --hostfile /etc/mpi/hostfile edt-bench allreduce --min-bytes 4 "
                     "--max-bytes 64K --check");
  EXPECT_EQ(bench.code, 0) << bench.text;

  Output discover = edt("exec tthvd-worker-2 -- /etc/mpi/discover_hosts.sh");
  EXPECT_EQ(lines(discover.text).size(), 4u) << discover.text;

  ASSERT_EQ(edt("cluster scale tthvd --containers 2 --wait").code, 0);
  EXPECT_EQ(edt("exec tthvd-launcher -- cat /etc/mpi/hostfile").text, hostfile2);
  EXPECT_EQ(get("/api/v1/clusters/tthvd")["status"]["containers"].size(), 2u);
  EXPECT_FALSE(fs::exists(dir_ + "/containers/tthvd-worker-2"));
  EXPECT_NE(edt("exec tthvd-worker-2 -- true").code, 0);

  Output deleted = edt("cluster delete tthvd --wait");
  ASSERT_EQ(deleted.code, 0) << deleted.text;
  EXPECT_EQ(get("/api/v1/clusters")["clusters"].size(), 0u);
  expect_nothing_left();
}

// What `ssh-keygen -L` says of the host certificate that the sshd on
// address:port presents ("" if it presents none).
std::string host_certificate(const std::string& address, int port, const std::string& dir) {
  const std::string file = dir + "/scanned-" + address + ".pub";
  // With -c, ssh-keyscan prints each certificate as a public key file's line.
  sh("ssh-keyscan -c -p " + std::to_string(port) + " " + address + " 2>/dev/null | grep -- -cert-v01@ > " + file);
  Output cert = sh("ssh-keygen -L -f " + file);
  return cert.code == 0 ? cert.text : "";
}

// The value after `label` on its line of `text`.
std::string field(const std::string& text, const std::string& label) {
  const size_t at = text.find(label);
  if (at == std::string::npos) return "";
  const size_t begin = at + label.size();
  return text.substr(begin, text.find_first_of(" \n", begin) - begin);
}

// Each container's sshd presents a host key of its own, certified by the
// cluster's CA for its name and address; the clients in the containers, edt
// ssh and edtrun check it, and refuse a host key the CA did not sign.
TEST_F(Edtd, SshHostKeysAreCheckedAgainstTheClusterCa) {
  ASSERT_EQ(edt("cluster create hk --containers 2 --wait").code, 0);
  json c = get("/api/v1/clusters/hk");
  const std::string ca = field(sh("ssh-keygen -lf " + dir_ + "/clusters/hk/ssh/host_ca.pub").text, " ");
  ASSERT_EQ(ca.rfind("SHA256:", 0), 0u) << ca;
  std::set<std::string> keys;
  for (const auto& k : c["status"]["containers"]) {
    const std::string name = k["name"], address = k["address"];
    const std::string cert = host_certificate(address, ssh_port_, dir_);
    ASSERT_NE(cert.find("host certificate"), std::string::npos) << name << ": " << cert;
    EXPECT_EQ(field(cert, "Signing CA: ED25519 "), ca) << cert;
    EXPECT_NE(cert.find("\n                " + name + "\n                " + address + "\n"), std::string::npos) << cert;
    keys.insert(field(cert, "Public key: ED25519-CERT "));
    EXPECT_EQ(sh("stat -c %a " + dir_ + "/containers/" + name + "/conf/host_ed25519").text, "600\n");
  }
  EXPECT_EQ(keys.size(), 2u) << "two containers present the same host key";
  // The clients in the containers check host keys against the CA: by name and by address.
  const std::string worker = c["status"]["containers"][1]["address"];
  Output config = edt("run hk -- sh -c 'ssh -G hk-worker-0 | grep -e ^stricthostkeychecking -e ^userknownhostsfile'");
  EXPECT_EQ(config.text, "stricthostkeychecking true\nuserknownhostsfile /etc/mpi/known_hosts\n");
  Output by_name = edt("run hk -- ssh hk-worker-0 hostname");
  EXPECT_EQ(by_name.text, "hk-worker-0\n");
  Output by_address = edt("exec hk-worker-0 -- ssh " + c["status"]["containers"][0]["address"].get<std::string>() + " hostname");
  EXPECT_EQ(by_address.text, "hk-launcher\n");
  json access = get("/api/v1/clusters/hk/ssh");
  EXPECT_EQ(access["known_hosts"], edt("exec hk-worker-0 -- cat /etc/mpi/known_hosts").text);
  EXPECT_EQ(access["known_hosts"].get<std::string>().rfind("@cert-authority * ssh-ed25519 ", 0), 0u);

  // Two impostors on hk-worker-0's address: a self-made host key, and one
  // certified by a CA of their own.
  const int plain = edt::net::free_port("0.0.0.0").value(), other_ca = edt::net::free_port("0.0.0.0").value();
  const std::string impostors =
      "cd /tmp && ssh-keygen -q -t ed25519 -N \"\" -f rogue && ssh-keygen -q -t ed25519 -N \"\" -f rogue_ca && "
      "ssh-keygen -q -t ed25519 -N \"\" -f rogue2 && ssh-keygen -q -s rogue_ca -I x -h -n hk-worker-0," + worker +
      " rogue2.pub && for p in " + std::to_string(plain) + ":rogue " + std::to_string(other_ca) + ":rogue2; do "
      "/usr/sbin/sshd -f /dev/null -o ListenAddress=" + worker + ":${p%:*} -o HostKey=/tmp/${p#*:} "
      "-o HostCertificate=/tmp/${p#*:}-cert.pub -o PidFile=/tmp/${p#*:}.pid -o UsePAM=no -E /tmp/${p#*:}.log "
      "</dev/null >/dev/null 2>&1; done; for f in rogue rogue2; do i=0; "
      "until grep -q \"Server listening\" /tmp/$f.log 2>/dev/null || [ $i -ge 600 ]; do sleep 0.05; i=$((i+1)); done; "
      "grep \"Server listening\" /tmp/$f.log || { echo \"$f did not start; its log:\"; cat /tmp/$f.log; }; done";
  Output started = edt("exec hk-worker-0 -- sh -c '" + impostors + "'");
  ASSERT_EQ(lines(started.text).size(), 2u) << started.text;
  for (int port : {plain, other_ca}) {
    const std::string p = std::to_string(port);
    Output in_cluster = edt("run hk -- ssh -p " + p + " hk-worker-0 true");
    EXPECT_EQ(in_cluster.code, 255);
    EXPECT_NE(in_cluster.text.find("Host key verification failed"), std::string::npos) << in_cluster.text;
    Output by_ip = edt("run hk -- ssh -p " + p + " " + worker + " true");
    EXPECT_NE(by_ip.text.find("Host key verification failed"), std::string::npos) << by_ip.text;
    Output launcher = edt("run hk -- edtrun -np 1 -H hk-worker-0:1 -p " + p + " hostname");
    EXPECT_NE(launcher.code, 0);
    EXPECT_NE(launcher.text.find("Host key verification failed"), std::string::npos) << launcher.text;
    // From the host, with what the API gives (as edt ssh and the terminal use it).
    std::ofstream(dir_ + "/known_hosts") << access["known_hosts"].get<std::string>();
    std::ofstream(dir_ + "/key") << access["private_key"].get<std::string>();
    fs::permissions(dir_ + "/key", fs::perms::owner_read | fs::perms::owner_write);
    const std::string host_ssh = "ssh -i " + dir_ + "/key -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile=" +
                                 dir_ + "/known_hosts -o GlobalKnownHostsFile=/dev/null -p ";
    EXPECT_NE(sh(host_ssh + p + " root@" + worker + " true").text.find("Host key verification failed"), std::string::npos);
    EXPECT_EQ(sh(host_ssh + std::to_string(ssh_port_) + " root@" + worker + " hostname").text, "hk-worker-0\n");
  }
  edt("exec hk-worker-0 -- sh -c 'kill $(cat /tmp/rogue.pid /tmp/rogue2.pid)'");
  ASSERT_EQ(edt("cluster delete hk --wait").code, 0);
  expect_nothing_left();
}

TEST_F(Edtd, ClustersAndJobsSurviveSigkill) {
  ASSERT_EQ(edt("cluster create keep --containers 2 --wait").code, 0);
  auto [status, job] = request("POST", "/api/v1/clusters/keep/jobs", R"({"command": "echo begun; sleep 3; echo survived"})", token_);
  ASSERT_EQ(status, 201) << job.dump();
  json before = get("/api/v1/clusters/keep");
  auto sandboxes = sandbox_processes();
  ASSERT_EQ(sandboxes.size(), 4u);  // per container: bwrap outside and its init inside

  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(sandbox_processes(), sandboxes) << "containers died with edtd";
  start_edtd();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(sandbox_processes(), sandboxes) << "containers were restarted, not re-adopted";

  json after = get("/api/v1/clusters/keep");
  EXPECT_EQ(after["status"]["phase"], "Running");
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(after["status"]["containers"][i]["phase"], "Running");
    // The same sandboxes, re-adopted: not restarted.
    EXPECT_EQ(after["status"]["containers"][i]["started_at"], before["status"]["containers"][i]["started_at"]);
    EXPECT_EQ(after["status"]["containers"][i]["message"], "");
  }
  Output log = edt("run keep -- true");
  EXPECT_EQ(log.code, 0) << log.text;
  const std::string id = std::to_string(job["id"].get<int64_t>());
  httplib::Client c(api_);
  auto streamed = c.Get(("/api/v1/jobs/" + id + "/log").c_str(), auth(token_));
  ASSERT_TRUE(streamed);
  EXPECT_EQ(streamed->body, "begun\nsurvived\n");
  json done = get("/api/v1/jobs/" + id);
  EXPECT_EQ(done["state"], "Succeeded");
  EXPECT_EQ(done["exit_code"], 0);
  EXPECT_EQ(edt("run keep -- exit 7").code, 7);
  ASSERT_EQ(edt("cluster delete keep --wait").code, 0);
  expect_nothing_left();
}

TEST_F(Edtd, FailedCreateLeavesNothingBehind) {
  // Something else holds the SSH port on the first address edtd gives out.
  int blocker = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(ssh_port_));
  inet_pton(AF_INET, (prefix_ + "1").c_str(), &addr.sin_addr);
  ASSERT_EQ(bind(blocker, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(blocker, 1), 0);
  Output o = edt("cluster create broken --containers 2 --gpu NVIDIA-P4:2 --wait");
  close(blocker);
  EXPECT_NE(o.code, 0);
  EXPECT_NE(o.text.find("failed"), std::string::npos) << o.text;
  json c = get("/api/v1/clusters/broken");
  EXPECT_EQ(c["status"]["phase"], "Failed");
  for (int i = 0; i < 100 && !c["status"]["containers"].empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    c = get("/api/v1/clusters/broken");
  }
  EXPECT_TRUE(c["status"]["containers"].empty()) << c.dump();
  for (int i = 0; i < 40 && fs::exists(dir_ + "/clusters/broken"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  expect_nothing_left();
  Output deleted = edt("cluster delete broken --wait");
  EXPECT_EQ(deleted.code, 0) << deleted.text;
}

TEST_F(Edtd, EveryBadInputIsRefusedAndChangesNothing) {
  ASSERT_EQ(edt("cluster create mine --containers 2 --gpu NVIDIA-P4:1 --wait").code, 0);
  ASSERT_EQ(edt("volume create vol").code, 0);
  auto [made, bob] = request("POST", "/api/v1/users", R"({"name": "bob"})", token_);
  ASSERT_EQ(made, 201);
  const std::string bob_token = bob["token"];
  ASSERT_EQ(request("POST", "/api/v1/images", R"({"name": "hvd", "root": "/", "frameworks": ["horovod"]})", token_).first,
            201);
  json before = get("/api/v1/clusters");

  struct Case {
    std::string method, path, body;
    int status;
    std::string field;
  };
  const std::string base = R"("framework": "horovod", "containers": 2)";
  std::vector<Case> cases = {
      {"POST", "/api/v1/clusters", R"({"name": "a", "framework": "horovod", "containers": 1})", 422, "containers"},
      {"POST", "/api/v1/clusters", R"({"name": "Bad_Name", )" + base + "}", 422, "name"},
      {"POST", "/api/v1/clusters", R"({"name": "mine", )" + base + "}", 409, "name"},
      {"POST", "/api/v1/clusters", R"({"name": "a", "framework": "caffe", "containers": 2})", 422, "framework"},
      {"POST", "/api/v1/clusters", R"({"name": "a", "image": "nope", )" + base + "}", 422, "image"},
      {"POST", "/api/v1/clusters", R"({"name": "a", "image": "hvd", "framework": "deepspeed", "containers": 2})", 422, "image"},
      {"POST", "/api/v1/clusters", R"({"name": "a", "mounts": [{"volume": "nope"}], )" + base + "}", 422, "mounts[0].volume"},
      {"POST", "/api/v1/clusters", R"({"name": "a", "gpu": {"model": "H100", "count": 1}, )" + base + "}", 422, "gpu.model"},
      // More GPUs than the machine has (4) is refused; fewer than are free would queue.
      {"POST", "/api/v1/clusters", R"({"name": "a", "gpu": {"model": "NVIDIA-P4", "count": 3}, )" + base + "}", 409, "gpu.count"},
      {"POST", "/api/v1/clusters", R"({"name": "a", "shm": "lots", )" + base + "}", 422, "shm"},
      {"POST", "/api/v1/clusters", R"({"name": "a", "drain_timeout": "60q", )" + base + "}", 422, "drain_timeout"},
      {"POST", "/api/v1/clusters", R"({"name": "a", "drain_timeout": -1, )" + base + "}", 422, "drain_timeout"},
      {"POST", "/api/v1/clusters", R"({"name": "a", "drain_timeout": "2h", )" + base + "}", 422, "drain_timeout"},
      {"POST", "/api/v1/clusters", R"({"name": "a", "mounts": [{"volume": "vol", "path": "data"}], )" + base + "}", 422, "mounts[0].path"},
      {"POST", "/api/v1/clusters", R"({"name": "a", "mounts": [{"volume": "vol", "path": "/root/../etc"}], )" + base + "}", 422, "mounts[0].path"},
      {"POST", "/api/v1/clusters", R"({"name": "a", "mounts": [{"volume": "vol", "path": "/usr/lib"}], )" + base + "}", 422, "mounts[0].path"},
      {"POST", "/api/v1/clusters", R"({"name": "a", )", 400, ""},
      {"POST", "/api/v1/clusters", "{\"name\": \"a\", \"env\": {\"X\": \"" + std::string(1100000, 'x') + "\"}}", 413, ""},
      {"PATCH", "/api/v1/clusters/mine", R"({"containers": 5})", 409, "gpu.count"},
      {"PATCH", "/api/v1/clusters/mine", R"({"containers": 1})", 422, "containers"},
      {"PATCH", "/api/v1/clusters/mine", R"({"framework": "slurm"})", 422, "framework"},
      {"PATCH", "/api/v1/clusters/mine", R"({"containers": 2, "drain_timeout": "-5s"})", 422, "drain_timeout"},
      {"PATCH", "/api/v1/clusters/none", R"({"containers": 3})", 404, "name"},
  };
  for (const auto& k : cases) {
    auto [status, body] = request(k.method, k.path, k.body, token_);
    EXPECT_EQ(status, k.status) << k.body.substr(0, 200) << " -> " << body.dump();
    ASSERT_TRUE(body.is_object() && body.contains("error")) << k.body.substr(0, 200);
    EXPECT_EQ(body["error"]["field"], k.field) << body.dump();
    EXPECT_FALSE(body["error"]["message"].get<std::string>().empty());
    EXPECT_FALSE(body["error"]["fix"].get<std::string>().empty());
  }
  // Tokens and ownership.
  EXPECT_EQ(request("GET", "/api/v1/clusters", "", "").first, 401);
  EXPECT_EQ(request("GET", "/api/v1/clusters", "", "edt_wrong").first, 401);
  EXPECT_EQ(request("GET", "/api/v1/clusters/mine", "", bob_token).first, 404);  // as if it did not exist
  EXPECT_EQ(request("DELETE", "/api/v1/clusters/mine", "", bob_token).first, 404);
  EXPECT_EQ(request("PATCH", "/api/v1/clusters/mine", R"({"containers": 3})", bob_token).first, 404);
  EXPECT_EQ(request("POST", "/api/v1/clusters/mine/jobs", R"({"command": "id"})", bob_token).first, 404);
  EXPECT_EQ(request("POST", "/api/v1/users", R"({"name": "eve"})", bob_token).first, 403);
  EXPECT_EQ(request("GET", "/api/v1/clusters", "", bob_token).second["clusters"].size(), 0u);
  EXPECT_EQ(request("GET", "/healthz", "", "").first, 200);

  // The CLI prints the refusal and exits non-zero.
  Output cli = edt("cluster create x --containers 1");
  EXPECT_EQ(cli.code, 1);
  EXPECT_NE(cli.text.find("refused (422): containers: containers is 1, fewer than 2"), std::string::npos) << cli.text;
  EXPECT_NE(cli.text.find("fix: "), std::string::npos);

  json after = get("/api/v1/clusters");
  EXPECT_EQ(after, before);
  EXPECT_EQ(get("/api/v1/gpus")["gpus"].size(), 4u);
  int held = 0;
  json gpus = get("/api/v1/gpus");
  for (const auto& g : gpus["gpus"]) held += g["holder"] == "" ? 0 : 1;
  EXPECT_EQ(held, 2);
}

// The token lifecycle from the CLI: a user makes, lists and revokes their
// own tokens, cannot touch another's; the admin deletes the user.
TEST_F(Edtd, TokensAndUsersThroughTheCli) {
  auto token_in = [](const std::string& text) {
    for (const auto& line : lines(text))
      if (line.rfind("edt_", 0) == 0) return line;
    return std::string();
  };
  const std::string carol = token_in(edt("user create carol").text);
  ASSERT_FALSE(carol.empty());
  const std::string as_carol = "EDT_API=" + api_ + " EDT_TOKEN=" + carol + " " + EDT_CLI + " ";
  Output made = sh(as_carol + "token create --expires-in 90d --description 'ci runner'");
  ASSERT_EQ(made.code, 0) << made.text;
  const std::string ci = token_in(made.text);
  EXPECT_NE(made.text.find("token 3 of carol, expires "), std::string::npos) << made.text;
  Output listed = sh(as_carol + "token list");
  EXPECT_NE(listed.text.find("ci runner"), std::string::npos) << listed.text;
  EXPECT_NE(listed.text.find("valid"), std::string::npos) << listed.text;
  json tokens = json::parse(sh(as_carol + "token list -o json").text, nullptr, false);
  ASSERT_TRUE(tokens.is_array() && tokens.size() == 2) << tokens.dump();
  EXPECT_GT(tokens[1]["expires_at"].get<int64_t>(), tokens[1]["created_at"].get<int64_t>() + 89 * 86400);

  Output theirs = sh(as_carol + "token list --user admin");
  EXPECT_EQ(theirs.code, 1);
  EXPECT_NE(theirs.text.find("refused (403)"), std::string::npos) << theirs.text;
  EXPECT_EQ(sh(as_carol + "token revoke 1 --user admin").code, 1);
  EXPECT_EQ(sh(as_carol + "token create --expires-in 5y").code, 1);

  const std::string id = std::to_string(tokens[1]["id"].get<int64_t>());
  EXPECT_EQ(request("GET", "/api/v1/whoami", "", ci).first, 200);
  Output revoked = sh(as_carol + "token revoke " + id);
  EXPECT_EQ(revoked.code, 0) << revoked.text;
  EXPECT_EQ(request("GET", "/api/v1/whoami", "", ci).first, 401);

  EXPECT_NE(edt("user list").text.find("carol"), std::string::npos);
  Output deleted = edt("user delete carol");
  EXPECT_EQ(deleted.code, 0) << deleted.text;
  EXPECT_EQ(request("GET", "/api/v1/whoami", "", carol).first, 401);
  EXPECT_EQ(edt("user list").text.find("carol"), std::string::npos);
  EXPECT_EQ(edt("user delete admin").code, 1);
}

TEST_F(Edtd, AFileIsUploadedIntoAVolumeThroughTheCli) {
  ASSERT_EQ(edt("volume create up").code, 0);
  const std::string local = dir_ + "/upload-every-byte.bin";
  std::string bytes;
  for (int i = 0; i < 1024; ++i) bytes += static_cast<char>(i % 256);
  std::ofstream(local, std::ios::binary) << bytes;
  Output sent = edt("volume upload up " + local + " --as 'in/every byte.bin'");
  ASSERT_EQ(sent.code, 0) << sent.text;
  EXPECT_NE(sent.text.find("to volume up as in/every byte.bin (1024 bytes)"), std::string::npos) << sent.text;
  std::ifstream in(dir_ + "/volumes/up/in/every byte.bin", std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), bytes);
  ASSERT_EQ(edt("volume upload up " + local).code, 0);  // under its own name
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/volumes/up/upload-every-byte.bin"));
  Output escape = edt("volume upload up " + local + " --as ../escape.bin");
  EXPECT_EQ(escape.code, 1);
  EXPECT_NE(escape.text.find("refused (400): path: the file's path '../escape.bin' has a '..' segment"),
            std::string::npos) << escape.text;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/volumes/escape.bin"));
  Output missing = edt("volume upload up " + dir_ + "/no-such-file");
  EXPECT_EQ(missing.code, 2) << missing.text;
  EXPECT_NE(missing.text.find("is not a readable file"), std::string::npos) << missing.text;
  std::filesystem::remove(local);
  ASSERT_EQ(edt("volume delete up").code, 0);
}

TEST_F(Edtd, FrameworkExtrasMetricsAndOpenApi) {
  auto [st, img] = request("POST", "/api/v1/images", R"({"name": "ds", "root": "/", "frameworks": ["deepspeed", "megatron"]})", token_);
  ASSERT_EQ(st, 201) << img.dump();
  ASSERT_EQ(edt("cluster create ds --framework deepspeed --image ds --containers 2 --wait").code, 0);
  EXPECT_EQ(edt("exec ds-worker-0 -- cat /job/hostfile").text, "ds-launcher slots=1\nds-worker-0 slots=1\n");
  EXPECT_EQ(edt("exec ds-launcher -- sh -c 'cat /job/hostnames; echo $PDSH_RCMD_TYPE $WCOLL'").text,
            "ds-launcher\nds-worker-0\nssh /job/hostnames\n");
  ASSERT_EQ(edt("cluster create mg --framework megatron --image ds --containers 3 --env FOO=bar --wait").code, 0);
  EXPECT_EQ(edt("exec mg-worker-1 -- sh -c 'echo $MASTER_ADDR $MASTER_PORT $NODE_RANK $GPUS_PER_NODE "
                "$CUDA_DEVICE_MAX_CONNECTIONS $FOO'").text,
            "mg-launcher 6000 2 1 1 bar\n");
  httplib::Client c(api_);
  auto metrics = c.Get("/api/v1/metrics", auth(token_));
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("edt_clusters{phase=\"Running\"} 2"), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find("edt_containers{phase=\"Running\"} 5"), std::string::npos) << metrics->body;
  ASSERT_EQ(edt("cluster scale mg --containers 2 --wait").code, 0);
  std::vector<std::string> types;
  json events = get("/api/v1/clusters/mg/events");
  for (const auto& e : events["events"]) {
    types.push_back(e["type"]);
    EXPECT_EQ(e["time"].get<std::string>().size(), 24u) << e.dump();  // 2026-01-01T00:00:00.000Z
  }
  // The leaving container had no edtrun worker: drained at once.
  EXPECT_EQ(types, (std::vector<std::string>{"Created", "Running", "Scaling", "Drained", "Running"})) << events.dump();
  EXPECT_NE(events["events"][2]["message"].get<std::string>().find("mg-worker-1 leaves the hostfile and drains"),
            std::string::npos) << events.dump();
  // The CLI's filters: one type; since the Scaling event's time.
  json scaling = json::parse(edt("cluster events mg --type Scaling -o json").text, nullptr, false);
  ASSERT_TRUE(scaling.is_array() && scaling.size() == 1) << scaling.dump();
  EXPECT_EQ(scaling[0], events["events"][2]);
  const std::string since = events["events"][2]["time"];
  json recent = json::parse(edt("cluster events mg --since " + since + " -o json").text, nullptr, false);
  ASSERT_TRUE(recent.is_array() && recent.size() == 3) << recent.dump();
  EXPECT_EQ(recent[0]["type"], "Scaling");
  Output bad = edt("cluster events mg --type scaling");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.text.find("refused (400): type: 'scaling' is not an event type"), std::string::npos) << bad.text;
  // The web console's files are served at /, the API still under /api/v1.
  auto page = c.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->body, "<title>edt console</title>\n");
  auto doc = c.Get("/api/v1/openapi.json");
  ASSERT_TRUE(doc);
  json openapi = json::parse(doc->body);
  EXPECT_EQ(openapi["openapi"], "3.0.3");
  EXPECT_TRUE(openapi["paths"].contains("/clusters/{name}"));
  ASSERT_EQ(edt("cluster delete ds --wait").code, 0);
  ASSERT_EQ(edt("cluster delete mg --wait").code, 0);
  expect_nothing_left();
}

// Every flag is checked before edtd makes anything: a refused start leaves
// no data dir, store or token behind, and says which flag and what to write.
TEST(EdtdFlags, BadFlagsAreRefusedBeforeAnythingIsMade) {
  const std::string dir = "/tmp/edtd-flags-" + std::to_string(getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir + "/a-file") << "not a directory\n";
  const std::string data = dir + "/data";
  // Good --backend slurm flags up to the ones under test.
  const std::string slurm = "--backend slurm --slurm-partition p --slurm-shared-dir /s --address-range 198.18.190.128/25";
  struct Case {
    std::string flags, says;
  };
  const std::vector<Case> cases = {
      {"--web-dir " + dir + "/no-console", "--web-dir " + dir + "/no-console holds no index.html"},
      {"--web-dir " + dir, "holds no index.html"},
      {"--listen 127.0.0.1", "--listen '127.0.0.1' is not HOST:PORT"},
      {"--listen 127.0.0.1:http", "is not HOST:PORT"},
      {"--listen 127.0.0.1:70000", "is not HOST:PORT"},
      {"--terminal-listen localhost", "--terminal-listen 'localhost' is not HOST:PORT"},
      {"--ssh-port 0", "--ssh-port 0 is not a port"},
      {"--gpus NVIDIA-P4", "--gpus: 'NVIDIA-P4' is not MODEL=COUNT"},
      {"--grace soon", "--grace"},
      {"--network loopback --address-range 10.0.0.0/8", "--address-range"},
      {"--address-range 127.1.0.0/16", "--address-range"},  // the default network is a bridge
      {"--network wifi", "--network 'wifi' is not a network mode"},
      {"--outbound sometimes", "--outbound 'sometimes' is not nat or none"},
      {"--network loopback --outbound none", "--outbound needs a bridge"},
      {"--log-level loud", "--log-level 'loud' is not a level"},
      {"--log-format xml", "--log-format 'xml' is not text or json"},
      {"--backend kubernetes", "--backend 'kubernetes' is not local or slurm"},
      {"--backend slurm --network loopback", "--network and --outbound are the local backend's"},
      {"--backend slurm", "--backend slurm needs --slurm-partition"},
      {"--backend slurm --slurm-partition p", "needs --slurm-shared-dir"},
      {"--backend slurm --slurm-partition p --slurm-shared-dir shared", "needs --slurm-shared-dir, an absolute"},
      {"--backend slurm --slurm-partition p --slurm-shared-dir /s", "needs --address-range"},
      {"--backend slurm --slurm-partition p --slurm-shared-dir /s --address-range 127.1.0.0/16", "--address-range"},
      {slurm + " --slurm-interface an-interface-name", "--slurm-interface 'an-interface-name' is not"},
      {slurm + " --slurm-gateway router", "--slurm-gateway 'router' is not an IPv4 address"},
      {"--image-store images", "--image-store images is not an absolute path"},
      {slurm + " --image-store /srv/images", "--image-store /srv/images is not under --slurm-shared-dir /s"},
  };
  for (const auto& c : cases) {
    Output o = sh(std::string(EDTD_PATH) + " --data-dir " + data + " " + c.flags);
    EXPECT_NE(o.code, 0) << c.flags;
    EXPECT_NE(o.text.find(c.says), std::string::npos) << c.flags << ": " << o.text;
    EXPECT_FALSE(fs::exists(data)) << c.flags << " made the data dir";
  }
  Output file = sh(std::string(EDTD_PATH) + " --data-dir " + dir + "/a-file");
  EXPECT_NE(file.code, 0);
  EXPECT_NE(file.text.find("exists and is not a directory"), std::string::npos) << file.text;
  fs::remove_all(dir);
}

// A tiny image of the host's own programs: sshd, bash, sh, env and cat with the
// libraries ldd finds, the host's /etc/passwd and /etc/group, the links of
// a merged /usr, and /work (make_config's WorkingDir; its Env's PATH is
// /usr/bin:/bin), as one layer of an OCI layout at `dir`.
void write_tiny_image(const std::string& dir) {
  namespace it = edt::image::testing;
  std::vector<it::TarEntry> entries = {it::dir("work"), it::file("work/marker", "in the image\n"), it::dir("etc")};
  std::set<std::string> dirs, done;
  auto add_file = [&](const std::string& path) {
    // The name as the loader or PATH asks for it, in its directory's real place.
    const std::string at = fs::canonical(fs::path(path).parent_path()).string() + "/" + fs::path(path).filename().string();
    if (!done.insert(at).second) return;
    for (fs::path d = fs::path(at).parent_path(); d != "/"; d = d.parent_path()) dirs.insert(d.string().substr(1));
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    entries.push_back(it::file(at.substr(1), bytes, 0755));
  };
  for (const char* program : {"/usr/sbin/sshd", "/bin/bash", "/bin/sh", "/usr/bin/env", "/usr/bin/cat"}) {
    add_file(program);
    for (const auto& line : lines(sh(std::string("ldd ") + program).text)) {
      std::istringstream words(line);
      std::vector<std::string> w{std::istream_iterator<std::string>(words), {}};
      for (const auto& word : w)
        if (!word.empty() && word[0] == '/') add_file(word);
    }
  }
  for (const char* file : {"/etc/passwd", "/etc/group", "/etc/nsswitch.conf"}) add_file(file);
  for (const auto& d : dirs) entries.insert(entries.begin(), it::dir(d));
  for (const char* top : {"bin", "sbin", "lib", "lib64"})
    if (fs::is_symlink(std::string("/") + top))
      entries.push_back(it::symlink(top, fs::read_symlink(std::string("/") + top).string()));
  std::vector<it::Layer> layers = {it::make_layer(entries)};
  it::write_oci_layout(dir, layers, "tiny");
}

TEST_F(Edtd, AnImportedImagesContainersGetItsEnvAndWorkingDir) {
  edt::image::testing::ScratchDir src("edt-it-image");
  write_tiny_image(src.path() + "/tiny");
  Output imported = edt("image import " + src.path() + "/tiny --name tiny");
  ASSERT_EQ(imported.code, 0) << imported.text;
  Output listed = edt("image list");
  EXPECT_NE(listed.text.find(src.path() + "/tiny"), std::string::npos) << listed.text;
  Output created = edt("cluster create tiny --image tiny --containers 2 --wait");
  ASSERT_EQ(created.code, 0) << created.text << sh("tail -20 " + dir_ + "/edtd.log").text;
  // Jobs start in the image's WorkingDir, with its PATH after edt's own directories.
  Output seen = edt("exec tiny-worker-0 -- sh -c 'pwd; cat marker; echo \"$PATH\"'");
  ASSERT_EQ(seen.code, 0) << seen.text;
  auto got = lines(seen.text);
  ASSERT_EQ(got.size(), 3u) << seen.text;
  EXPECT_EQ(got[0], "/work");
  EXPECT_EQ(got[1], "in the image");
  EXPECT_TRUE(got[2].ends_with(":/usr/bin:/bin") && got[2].find("/usr/local/sbin") == std::string::npos) << got[2];
  // The image's root is read-only in the container.
  EXPECT_NE(edt("exec tiny-launcher -- sh -c 'echo x > /work/new'").code, 0);
  Output in_use = edt("image rm tiny");
  EXPECT_NE(in_use.code, 0);
  EXPECT_NE(in_use.text.find("used by cluster tiny"), std::string::npos) << in_use.text;
  ASSERT_EQ(edt("cluster delete --wait tiny").code, 0);
  Output removed = edt("image rm tiny");
  ASSERT_EQ(removed.code, 0) << removed.text;
  EXPECT_EQ(edt::image::testing::count_entries(dir_ + "/images/roots/sha256"), 0u);
}

}  // namespace
}  // namespace edt::control

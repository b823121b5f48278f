#include "control/backends/local/cgroups.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <thread>
#include <fstream>
#include <sstream>
#include <ctime>
#include <string>
#include <vector>

namespace edt::control {
namespace {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST(CgroupsTest, TheKeyOfADataDirIsStableAndShort) {
  EXPECT_EQ(cgroup_key("/var/lib/edt"), cgroup_key("/var/lib/edt"));
  EXPECT_NE(cgroup_key("/var/lib/edt"), cgroup_key("/var/lib/edt2"));
  EXPECT_EQ(cgroup_key("/var/lib/edt").size(), 12u);
}

TEST(CgroupsTest, AMachineWithoutTheControllersSaysWhich) {
  const fs::path root = fs::temp_directory_path() / ("edt-cgroups-test-" + std::to_string(getpid()));
  fs::create_directories(root / "memory");
  std::ofstream(root / "memory" / "cgroup.procs") << "";
  ContainerCgroups cgroups(root.string(), "k");
  EXPECT_EQ(cgroups.unavailable({}), "");
  EXPECT_NE(cgroups.unavailable({16, 0}).find("no writable cgroup v1 pids hierarchy"), std::string::npos);
  EXPECT_EQ(cgroups.unavailable({0, 1 << 30}), "");
  EXPECT_NE(cgroups.unavailable({0, 0, 1500}).find("no writable cgroup v1 cpu hierarchy"), std::string::npos);
  EXPECT_FALSE(cgroups.make("c", {0, 1 << 30, 1500}).is_ok());
  EXPECT_FALSE(fs::exists(root / "memory" / "edt-k")) << "a refused make leaves nothing behind";
  // Nothing to bound: nothing made, nothing to join.
  auto none = cgroups.make("c", {});
  ASSERT_TRUE(none.is_ok());
  EXPECT_TRUE(none->empty());
  EXPECT_FALSE(cgroups.make("c", {16, 0}).is_ok());
  // A hierarchy whose control files cannot be written: the make fails and
  // takes back the cgroups it made.
  fs::create_directories(root / "pids");
  std::ofstream(root / "pids" / "cgroup.procs") << "";
  ASSERT_EQ(cgroups.unavailable({16, 1 << 30}), "");
  EXPECT_FALSE(cgroups.make("c", {16, 1 << 30}).is_ok());
  EXPECT_FALSE(fs::exists(root / "pids" / "edt-k"));
  EXPECT_FALSE(fs::exists(root / "memory" / "edt-k"));
  std::ofstream(root / "cgroup.controllers") << "cpu io memory\n";
  EXPECT_NE(cgroups.unavailable({16, 0}).find("has no pids controller"), std::string::npos);
  std::ofstream(root / "cgroup.procs") << "";
  EXPECT_EQ(cgroups.unavailable({0, 0, 1500}), "");  // v2's cpu controller
  fs::remove_all(root);
}

// On this machine's own cgroups (root, as CI runs): a process that joins a
// container's cgroup cannot make more tasks than its pids bound, and the
// memory bound is written. Elsewhere the test says why it cannot run.
// Containers start and leave at once (the reconciler starts a scale's from
// several threads): one leaving removes the shared parent when it is empty,
// which must not fail another's start between making the parent and its own.
TEST(CgroupsTest, ContainersStartingAndLeavingAtOnceAllGetTheirCgroups) {
  ContainerCgroups cgroups("/sys/fs/cgroup", "race" + std::to_string(getpid()));
  const ContainerLimits limits{16};
  if (std::string why = cgroups.unavailable(limits); !why.empty()) GTEST_SKIP() << why;
  std::atomic<int> failures{0};
  std::string first;
  std::mutex mu;
  auto churn = [&](const std::string& name) {
    for (int i = 0; i < 300; ++i) {
      auto made = cgroups.make(name, limits);
      if (!made.is_ok()) {
        std::lock_guard lock(mu);
        if (failures++ == 0) first = made.status().message();
      }
      (void)cgroups.remove(name);
    }
  };
  std::thread a(churn, "a"), b(churn, "b");
  a.join();
  b.join();
  EXPECT_EQ(failures.load(), 0) << first;
}

// In a child that joins the cgroups of `procs`: forks up to `tries` parked
// tasks and writes how many it made to `report`, then waits to be killed
// with its process group (the caller's kill(-pid)).
pid_t fork_parked(const std::vector<std::string>& procs, int tries, int report) {
  const pid_t child = fork();
  if (child != 0) return child;
  setpgid(0, 0);
  for (const auto& file : procs) std::ofstream(file) << "0";
  int made = 0;
  for (int i = 0; i < tries; ++i) {
    const pid_t p = fork();
    if (p == 0) {
      pause();
      _exit(0);
    }
    if (p < 0) break;
    ++made;
  }
  (void)!write(report, &made, sizeof(made));
  pause();
  _exit(0);
}

TEST(CgroupsTest, AProcessInAContainersCgroupIsBoundedByIt) {
  ContainerCgroups cgroups("/sys/fs/cgroup", "test" + std::to_string(getpid()));
  const ContainerLimits limits{8, 256ull << 20};
  if (std::string why = cgroups.unavailable(limits); !why.empty()) GTEST_SKIP() << why;
  auto procs = cgroups.make("c", limits);
  ASSERT_TRUE(procs.is_ok()) << procs.status().message();
  ASSERT_FALSE(procs->empty());
  for (const auto& procs_file : *procs) {
    const std::string dir = fs::path(procs_file).parent_path().string();
    for (const auto& [control, value] : {std::pair{"memory.limit_in_bytes", "268435456\n"},
                                         {"memory.max", "268435456\n"}, {"pids.max", "8\n"}}) {
      if (fs::exists(dir + "/" + control)) {
        EXPECT_EQ(read_file(dir + "/" + control), value) << dir << "/" << control;
      }
    }
  }
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  const pid_t child = fork_parked(*procs, 20, report[1]);  // tasks forked beside it
  close(report[1]);
  int made = -1;
  ASSERT_EQ(read(report[0], &made, sizeof(made)), static_cast<ssize_t>(sizeof(made)));
  close(report[0]);
  kill(-child, SIGKILL);  // its process group: itself and the parked ones
  waitpid(child, nullptr, 0);
  EXPECT_EQ(made, limits.pids_max - 1);
  ASSERT_TRUE(cgroups.remove("c").is_ok());  // waits for the parked children's exit
  for (const auto& file : *procs) EXPECT_FALSE(fs::exists(fs::path(file).parent_path()));
}

// The CPU time a process that joins the cgroups of `procs` uses while it
// spins for `seconds`, as a share of one CPU: measured in the process.
double busy_share_in(const std::vector<std::string>& procs, double seconds) {
  int report[2];
  if (pipe(report) != 0) return -1;
  const pid_t child = fork();
  if (child == 0) {
    for (const auto& file : procs) std::ofstream(file) << "0";
    timespec start{}, now{}, cpu{};
    clock_gettime(CLOCK_MONOTONIC, &start);
    auto elapsed = [](const timespec& a, const timespec& b) { return (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9; };
    do clock_gettime(CLOCK_MONOTONIC, &now);
    while (elapsed(start, now) < seconds);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
    const double share = (cpu.tv_sec + cpu.tv_nsec / 1e9) / elapsed(start, now);
    (void)!write(report[1], &share, sizeof(share));
    _exit(0);
  }
  close(report[1]);
  double share = -1;
  if (read(report[0], &share, sizeof(share)) != static_cast<ssize_t>(sizeof(share))) share = -1;
  close(report[0]);
  waitpid(child, nullptr, 0);
  return share;
}

// A field of a cgroup's cpu.stat ("nr_throttled"); -1 if it has none.
int64_t cpu_stat(const std::string& dir, const std::string& field) {
  std::istringstream stat(read_file(dir + "/cpu.stat"));
  std::string name;
  for (int64_t value; stat >> name >> value;)
    if (name == field) return value;
  return -1;
}

// On this machine's own cgroups: a process spinning in a container's cgroup
// bounded to 0.2 CPU gets well under half a CPU (generous: the machine may
// be busy), and the kernel says it throttled it.
TEST(CgroupsTest, AProcessInAContainersCgroupGetsItsCpuBound) {
  ContainerCgroups cgroups("/sys/fs/cgroup", "test" + std::to_string(getpid()));
  const ContainerLimits limits{0, 0, 200};
  if (std::string why = cgroups.unavailable(limits); !why.empty()) GTEST_SKIP() << why;
  auto procs = cgroups.make("c", limits);
  ASSERT_TRUE(procs.is_ok()) << procs.status().message();
  ASSERT_EQ(procs->size(), 1u);
  const std::string dir = fs::path(procs->front()).parent_path().string();
  if (fs::exists(dir + "/cpu.max")) {
    EXPECT_EQ(read_file(dir + "/cpu.max"), "20000 100000\n");
  } else {
    EXPECT_EQ(read_file(dir + "/cpu.cfs_period_us"), "100000\n");
    EXPECT_EQ(read_file(dir + "/cpu.cfs_quota_us"), "20000\n");
  }
  const double share = busy_share_in(*procs, 1.0);
  EXPECT_GT(share, 0.0);
  EXPECT_LT(share, 0.45) << "a process bounded to 0.2 CPU used " << share << " of one";
  EXPECT_GT(cpu_stat(dir, "nr_throttled"), 0) << read_file(dir + "/cpu.stat");
  ASSERT_TRUE(cgroups.remove("c").is_ok());
  EXPECT_FALSE(fs::exists(dir));
}

TEST(CgroupsTest, TheDefaultPidsBoundIsAShareOfTheHostsTasks) {
  // This host's figures (pid_max 32768): 2048 each, 16384 for all together.
  EXPECT_EQ(container_pids_share({32768, 192735}), 2048);
  EXPECT_EQ(all_containers_pids_max({32768, 192735}), 16384);
  // A large pid_max: at most 4096 each; threads-max, when lower, counts.
  EXPECT_EQ(container_pids_share({4194304, 1000000}), 4096);
  EXPECT_EQ(all_containers_pids_max({4194304, 1000000}), 500000);
  EXPECT_EQ(container_pids_share({32768, 8000}), 500);
  // No two containers at their default bound take half the host's tasks,
  // and all of them together leave it half.
  for (int64_t pid_max : {301, 32768, 65536, 4194304}) {
    const HostTasks host{pid_max, 1 << 30};
    EXPECT_LE(2 * container_pids_share(host), pid_max / 2) << pid_max;
    EXPECT_LE(all_containers_pids_max(host), pid_max / 2) << pid_max;
  }
  auto here = read_host_tasks();
  ASSERT_TRUE(here.is_ok()) << here.status().message();
  EXPECT_GE(here->pid_max, 301);
  EXPECT_GT(here->threads_max, 0);
}

TEST(CgroupsTest, TheHostsTasksAreReadOrTheFileNamed) {
  const fs::path dir = fs::temp_directory_path() / ("edt-cgroups-proc-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "pid_max") << "32768\n";
  std::ofstream(dir / "threads-max") << "192735\n";
  auto host = read_host_tasks(dir.string());
  ASSERT_TRUE(host.is_ok()) << host.status().message();
  EXPECT_EQ(host->pid_max, 32768);
  EXPECT_EQ(host->threads_max, 192735);
  std::ofstream(dir / "threads-max") << "lots\n";
  auto bad = read_host_tasks(dir.string());
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find((dir / "threads-max").string() + " holds 'lots'"), std::string::npos)
      << bad.status().message();
  fs::remove_all(dir);
}


// All of one edtd's containers together stay under its parent's bound,
// whatever each one's is.
TEST(CgroupsTest, AllContainersTogetherAreBoundedByTheirParent) {
  const std::string key = "all" + std::to_string(getpid());
  ContainerCgroups cgroups("/sys/fs/cgroup", key, 40);
  const ContainerLimits limits{30};
  if (std::string why = cgroups.unavailable(limits); !why.empty()) GTEST_SKIP() << why;
  auto a = cgroups.make("a", limits), b = cgroups.make("b", limits);
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  EXPECT_EQ(read_file(fs::path(a->front()).parent_path().parent_path().string() + "/pids.max"), "40\n");
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  int made_a = -1, made_b = -1;
  const pid_t in_a = fork_parked(*a, 60, report[1]);
  ASSERT_EQ(read(report[0], &made_a, sizeof(made_a)), static_cast<ssize_t>(sizeof(made_a)));
  const pid_t in_b = fork_parked(*b, 60, report[1]);
  ASSERT_EQ(read(report[0], &made_b, sizeof(made_b)), static_cast<ssize_t>(sizeof(made_b)));
  for (pid_t group : {in_a, in_b}) {
    kill(-group, SIGKILL);
    waitpid(group, nullptr, 0);
  }
  close(report[0]);
  close(report[1]);
  EXPECT_EQ(made_a, 29);  // its own bound: 30 with itself
  EXPECT_EQ(made_b, 40 - 30 - 1);  // the parent's: 40 in all
  ASSERT_TRUE(cgroups.remove("a").is_ok());
  ASSERT_TRUE(cgroups.remove("b").is_ok());
  // By default the parent's bound is half the host's tasks.
  ContainerCgroups host_share("/sys/fs/cgroup", key);
  auto c = host_share.make("c", limits);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  auto host = read_host_tasks();
  ASSERT_TRUE(host.is_ok());
  EXPECT_EQ(read_file(fs::path(c->front()).parent_path().parent_path().string() + "/pids.max"),
            std::to_string(all_containers_pids_max(*host)) + "\n");
  ASSERT_TRUE(host_share.remove("c").is_ok());
}

TEST(CgroupsTest, AProcessJoiningAContainerTakesItsOpenFilesBound) {
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  const pid_t child = fork();
  if (child == 0) {
    struct rlimit files {};
    // The test's own cgroups are no container's: only the bound is taken.
    const bool ok = join_cgroups(read_file("/proc/self/cgroup")).is_ok() && getrlimit(RLIMIT_NOFILE, &files) == 0;
    const uint64_t got[2] = {ok ? files.rlim_cur : 0, ok ? files.rlim_max : 0};
    (void)!write(report[1], got, sizeof(got));
    _exit(0);
  }
  close(report[1]);
  uint64_t got[2] = {};
  ASSERT_EQ(read(report[0], got, sizeof(got)), static_cast<ssize_t>(sizeof(got)));
  close(report[0]);
  waitpid(child, nullptr, 0);
  EXPECT_EQ(got[0], kContainerOpenFiles);
  EXPECT_EQ(got[1], kContainerOpenFiles);
}

}  // namespace
}  // namespace edt::control

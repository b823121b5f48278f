#include "control/backends/local/cgroups.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

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
  // Nothing to bound: nothing made, nothing to join.
  auto none = cgroups.make("c", {});
  ASSERT_TRUE(none.is_ok());
  EXPECT_TRUE(none->empty());
  EXPECT_FALSE(cgroups.make("c", {16, 0}).is_ok());
  std::ofstream(root / "cgroup.controllers") << "cpu io memory\n";
  EXPECT_NE(cgroups.unavailable({16, 0}).find("has no pids controller"), std::string::npos);
  fs::remove_all(root);
}

// On this machine's own cgroups (root, as CI runs): a process that joins a
// container's cgroup cannot make more tasks than its pids bound, and the
// memory bound is written. Elsewhere the test says why it cannot run.
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
  const pid_t child = fork();
  if (child == 0) {
    setpgid(0, 0);
    for (const auto& file : *procs) std::ofstream(file) << "0";
    int made = 0;  // tasks forked beside this one, each parked
    for (int i = 0; i < 20; ++i) {
      const pid_t p = fork();
      if (p == 0) {
        pause();
        _exit(0);
      }
      if (p < 0) break;
      ++made;
    }
    (void)!write(report[1], &made, sizeof(made));
    kill(0, SIGKILL);  // its process group: itself and the parked ones
    _exit(0);
  }
  close(report[1]);
  int made = -1;
  ASSERT_EQ(read(report[0], &made, sizeof(made)), static_cast<ssize_t>(sizeof(made)));
  close(report[0]);
  waitpid(child, nullptr, 0);
  EXPECT_EQ(made, limits.pids_max - 1);
  ASSERT_TRUE(cgroups.remove("c").is_ok());  // waits for the parked children's exit
  for (const auto& file : *procs) EXPECT_FALSE(fs::exists(fs::path(file).parent_path()));
}

}  // namespace
}  // namespace edt::control

#include "control/backends/local/proc_scan.h"
#include "control/backends/local/sandbox_process.h"
#include "control/backends/local/sandbox_record.h"

#include <gtest/gtest.h>

namespace edt::control {
namespace {

// The first host id of `range` from 2^28; -1 for an error.
int64_t first_of(int64_t range) {
  auto ids = subordinate_ids(1u << 28, range);
  return ids.is_ok() ? int64_t{*ids} : -1;
}

TEST(SubordinateIdsTest, EachRangeIs65536IdsFromTheFirst) {
  EXPECT_EQ(first_of(1), 1 << 28);
  EXPECT_EQ(first_of(2), (1 << 28) + 65536);
  // The last range that fits below 2^32 - 1 (which is no id), and the next.
  const int64_t last = ((int64_t{1} << 32) - (int64_t{1} << 28)) / 65536 - 1;
  EXPECT_EQ(first_of(last), (int64_t{1} << 32) - 2 * 65536);
  auto past = subordinate_ids(1u << 28, last + 1);
  ASSERT_FALSE(past.is_ok());
  EXPECT_NE(past.status().message().find("--user-namespaces"), std::string::npos) << past.status().message();
  EXPECT_EQ(first_of(0), -1);  // an owner with no range
}

// Two tenants' records: alice's acl-worker-0 and bob's bcl-worker-0.
const SandboxRef kAlice{4242, 777}, kBob{5151, 888};
const std::vector<SandboxRecord> kRecords = {{"acl", "acl-worker-0", kAlice}, {"bcl", "bcl-worker-0", kBob}};

// alice's init relabelled as bob's bcl-worker-0 (its environment rewritten
// through /proc/1/mem): what identify_sandbox() sees of it is not its label
// but its cgroup and the records, and those say acl-worker-0.
TEST(LocalBackendIdentifyTest, ARelabelledSandboxIsTheContainerItsCgroupAndRecordName) {
  auto found = identify_sandbox(kAlice, std::string("acl-worker-0"), kRecords);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->cluster, "acl");
  EXPECT_EQ(found->name, "acl-worker-0");
  // Without cgroups: the record of its pid and start time alone.
  found = identify_sandbox(kAlice, std::nullopt, kRecords);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->name, "acl-worker-0");
}

TEST(LocalBackendIdentifyTest, ASandboxNoRecordNamesIsNotAdopted) {
  // Its pid reused, or another start time: no record names it.
  EXPECT_FALSE(identify_sandbox({4242, 778}, std::nullopt, kRecords));
  EXPECT_FALSE(identify_sandbox({9999, 1}, std::nullopt, kRecords));
  // In bob's cgroup, whose record names another init: a stray of his.
  EXPECT_FALSE(identify_sandbox({9999, 1}, std::string("bcl-worker-0"), kRecords));
  // In a cgroup no record is for.
  EXPECT_FALSE(identify_sandbox(kAlice, std::string("zzz-worker-0"), kRecords));
  // Two records naming one process: neither is trusted.
  EXPECT_FALSE(identify_sandbox(kAlice, std::nullopt, {{"acl", "acl-worker-0", kAlice}, {"bcl", "bcl-worker-0", kAlice}}));
}

TEST(LocalBackendIdentifyTest, ASandboxSpawnedBeforeItsPidWasRecordedIsKnownByItsCgroup) {
  const std::vector<SandboxRecord> before_pid = {{"bcl", "bcl-worker-0", {}}};
  auto found = identify_sandbox(kBob, std::string("bcl-worker-0"), before_pid);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->cluster, "bcl");
  EXPECT_EQ(found->ref, kBob);
  // Without a cgroup, such a sandbox is no one's (it is ended, then started again).
  EXPECT_FALSE(identify_sandbox(kBob, std::nullopt, before_pid));
}

TEST(LocalBackendIdentifyTest, TheCgroupIsReadFromTheProcFileOfEitherLayout) {
  EXPECT_EQ(cgroup_container("0::/edt-ab12/acl-worker-0\n", "edt-ab12"), "acl-worker-0");
  EXPECT_EQ(cgroup_container("12:pids:/edt-ab12/bcl-worker-1\n3:cpu,cpuacct:/\n", "edt-ab12"), "bcl-worker-1");
  EXPECT_EQ(cgroup_container("0::/system.slice/edtd.service\n", "edt-ab12"), std::nullopt);
  // Another data dir's edtd, and a cgroup below a container's: not ours.
  EXPECT_EQ(cgroup_container("0::/edt-ffff/acl-worker-0\n", "edt-ab12"), std::nullopt);
  EXPECT_EQ(cgroup_container("0::/edt-ab12/acl-worker-0/sub\n", "edt-ab12"), std::nullopt);
  EXPECT_EQ(cgroup_container("", "edt-ab12"), std::nullopt);
}

}  // namespace
}  // namespace edt::control

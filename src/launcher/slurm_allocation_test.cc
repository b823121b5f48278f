#include "launcher/slurm_allocation.h"

#include <gtest/gtest.h>

namespace edt::launcher {
namespace {

using Names = std::vector<std::string>;

template <class T>
T ok(Result<T> r) {
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? r.value() : T{};
}

TEST(SlurmNodelist, ExpandsTheCompactForm) {
  EXPECT_EQ(ok(expand_nodelist("tt-launcher")), Names{"tt-launcher"});
  EXPECT_EQ(ok(expand_nodelist("tt-launcher,tt-worker-[0-2]")),
            (Names{"tt-launcher", "tt-worker-0", "tt-worker-1", "tt-worker-2"}));
  EXPECT_EQ(ok(expand_nodelist("n[0,2-3],m1")), (Names{"n0", "n2", "n3", "m1"}));
  EXPECT_EQ(ok(expand_nodelist("n[08-11]")), (Names{"n08", "n09", "n10", "n11"}));
  EXPECT_EQ(ok(expand_nodelist("a[1-2]-b[3-4]")), (Names{"a1-b3", "a1-b4", "a2-b3", "a2-b4"}));
  EXPECT_EQ(ok(expand_nodelist(" x[5] ")), Names{"x5"});
}

TEST(SlurmNodelist, RefusesMalformedListsNamingThem) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "empty"},
      {"n[1-2", "'[' without ']'"},
      {"n1-2]", "']' without '['"},
      {"n[2-1]", "'2-1' is not a number or a range"},
      {"n[a]", "'a' is not a number"},
      {"n1,,n2", "an empty name"},
      {"n[0-999999]", "too large"},
      {"a[0-999]-b[0-999]", "names more than 100000 hosts"},
  };
  for (const auto& [list, words] : cases) {
    auto r = expand_nodelist(list);
    ASSERT_FALSE(r.is_ok()) << list;
    EXPECT_NE(r.status().message().find(words), std::string::npos) << list << ": " << r.status().message();
  }
}

TEST(SlurmTasks, ExpandsRepeats) {
  EXPECT_EQ(ok(expand_tasks_per_node("1(x4)")), (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(ok(expand_tasks_per_node("2(x2),1")), (std::vector<int>{2, 2, 1}));
  EXPECT_EQ(ok(expand_tasks_per_node("3")), std::vector<int>{3});
  for (const char* bad : {"", "x", "2(x", "2(x0)", "0", "1,", "2(3)"})
    EXPECT_FALSE(expand_tasks_per_node(bad).is_ok()) << bad;
}

TEST(SlurmAllocation, HostsWithTheirTasksAsSlots) {
  Environment env{{"SLURM_JOB_NODELIST", "tt-launcher,tt-worker-[0-2]"}, {"SLURM_TASKS_PER_NODE", "2(x3),1"}};
  ASSERT_TRUE(in_slurm_allocation(env));
  auto hosts = slurm_allocation_hosts(env);
  ASSERT_TRUE(hosts.is_ok()) << hosts.status().message();
  EXPECT_EQ(hosts.value(), (std::vector<HostSlots>{{"tt-launcher", 2}, {"tt-worker-0", 2}, {"tt-worker-1", 2},
                                            {"tt-worker-2", 1}}));
  env.erase("SLURM_TASKS_PER_NODE");
  const auto one_each = ok(slurm_allocation_hosts(env));
  ASSERT_EQ(one_each.size(), 4u);
  EXPECT_EQ(one_each[3].slots, 1);
  env["SLURM_TASKS_PER_NODE"] = "1(x2)";
  auto mismatch = slurm_allocation_hosts(env);
  ASSERT_FALSE(mismatch.is_ok());
  EXPECT_NE(mismatch.status().message().find("gives 2 nodes"), std::string::npos);
  EXPECT_FALSE(in_slurm_allocation({}));
  EXPECT_FALSE(slurm_allocation_hosts({}).is_ok());
}

}  // namespace
}  // namespace edt::launcher

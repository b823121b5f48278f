#include "launcher/worker_env.h"

#include <gtest/gtest.h>

namespace edt::launcher {
namespace {

SlotInfo example_slot() {
  SlotInfo slot;
  slot.host = "127.0.0.3";
  slot.host_index = 1;
  slot.rank = 5;
  slot.size = 8;
  slot.local_rank = 1;
  slot.local_size = 4;
  slot.cross_rank = 1;
  slot.cross_size = 2;
  return slot;
}

Rendezvous example_rendezvous() { return Rendezvous{"127.0.0.1:4000", "127.0.0.1", 4001}; }

TEST(WorkerEnv, EdtHorovodAndTorchVariablesAgree) {
  Environment env = placement_variables(example_slot(), example_rendezvous());
  const std::pair<const char*, const char*> expected[] = {
      {"EDT_RANK", "5"},          {"EDT_SIZE", "8"},          {"EDT_LOCAL_RANK", "1"},      {"EDT_LOCAL_SIZE", "4"},
      {"EDT_CROSS_RANK", "1"},    {"EDT_CROSS_SIZE", "2"},    {"EDT_HOSTNAME", "127.0.0.3"}, {"EDT_COORDINATOR", "127.0.0.1:4000"},
      {"HOROVOD_RANK", "5"},      {"HOROVOD_SIZE", "8"},      {"HOROVOD_LOCAL_RANK", "1"},  {"HOROVOD_LOCAL_SIZE", "4"},
      {"HOROVOD_CROSS_RANK", "1"}, {"HOROVOD_CROSS_SIZE", "2"}, {"HOROVOD_HOSTNAME", "127.0.0.3"},
      {"RANK", "5"},              {"WORLD_SIZE", "8"},        {"LOCAL_RANK", "1"},          {"LOCAL_WORLD_SIZE", "4"},
      {"GROUP_RANK", "1"},        {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "4001"},
  };
  for (const auto& [name, value] : expected) EXPECT_EQ(env[name], value) << name;
  EXPECT_EQ(env.size(), std::size(expected));
}

TEST(WorkerEnv, ExportsTakeValuesOrEdtrunsOwn) {
  Environment launcher = {{"NCCL_DEBUG", "INFO"}};
  auto exports = parse_exports({"A=1", "B=", "C=x=y", "NCCL_DEBUG"}, launcher);
  ASSERT_TRUE(exports.is_ok()) << exports.status().to_string();
  EXPECT_EQ(exports.value(), (Environment{{"A", "1"}, {"B", ""}, {"C", "x=y"}, {"NCCL_DEBUG", "INFO"}}));
}

TEST(WorkerEnv, BadExportsAreErrors) {
  auto unset = parse_exports({"NOT_SET_ANYWHERE"}, {});
  ASSERT_FALSE(unset.is_ok());
  EXPECT_NE(unset.status().message().find("-x NOT_SET_ANYWHERE=VALUE"), std::string::npos);
  for (const char* bad : {"1A=2", "=x", "A-B=1", ""}) {
    auto r = parse_exports({bad}, {});
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.status().message().find("not a variable name"), std::string::npos) << bad;
  }
}

TEST(WorkerEnv, LocalWorkersInheritEverything) {
  Environment launcher = {{"PATH", "/bin"}, {"HOSTNAME", "here"}, {"CUDA_VISIBLE_DEVICES", "0"}, {"RANK", "99"}};
  Environment exports = {{"X", "1"}};
  Environment env = worker_environment(example_slot(), example_rendezvous(), {&launcher, &exports, false});
  EXPECT_EQ(env["PATH"], "/bin");
  EXPECT_EQ(env["HOSTNAME"], "here");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "0");
  EXPECT_EQ(env["X"], "1");
  EXPECT_EQ(env["RANK"], "5");  // placement wins over a stale value
  EXPECT_EQ(env["OMP_NUM_THREADS"], "1");
}

TEST(WorkerEnv, RemoteWorkersGetTheForwardedPart) {
  Environment launcher = {{"PATH", "/bin"},       {"HOSTNAME", "here"},     {"SSH_CONNECTION", "1 2 3 4"},
                          {"PWD", "/x"},          {"HOME", "/root"},        {"CUDA_VISIBLE_DEVICES", "0"},
                          {"BASH_FUNC_f%%", "()"}, {"EDT_TRANSPORT", "tcp"}, {"OMP_NUM_THREADS", "4"}};
  Environment exports = {{"CUDA_VISIBLE_DEVICES", "1"}};
  Environment env = worker_environment(example_slot(), example_rendezvous(), {&launcher, &exports, true});
  EXPECT_EQ(env["PATH"], "/bin");
  EXPECT_EQ(env["EDT_TRANSPORT"], "tcp");
  EXPECT_EQ(env["OMP_NUM_THREADS"], "4");  // the user's choice stays
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "1");  // -x wins even over host-specific names
  for (const char* name : {"HOSTNAME", "SSH_CONNECTION", "PWD", "HOME", "BASH_FUNC_f%%"}) {
    EXPECT_EQ(env.count(name), 0u) << name;
  }
}

TEST(WorkerEnv, PerHostWorkersAreToldTorchrunsArguments) {
  SlotInfo slot = example_slot();  // host index 1 of a job of 8 hosts
  std::vector<int> node_slots = {4, 2, 1, 1, 1, 1, 1, 1};
  const Environment kEmpty;
  Environment plain = worker_environment(slot, example_rendezvous(), {&kEmpty, &kEmpty, true});
  EXPECT_EQ(plain.count("NNODES"), 0u);
  EXPECT_EQ(plain.count("NODE_RANK"), 0u);
  WorkerEnvironmentInputs inputs{&kEmpty, &kEmpty, true, &node_slots};
  Environment env = worker_environment(slot, example_rendezvous(), inputs);
  EXPECT_EQ(env["NNODES"], "8");
  EXPECT_EQ(env["NUM_NODES"], "8");
  EXPECT_EQ(env["NODE_RANK"], "1");
  EXPECT_EQ(env["GPUS_PER_NODE"], "2");
  EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
  EXPECT_EQ(env["MASTER_PORT"], "4001");
}

}  // namespace
}  // namespace edt::launcher

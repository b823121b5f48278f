#include "control/model/slurm.h"

#include <gtest/gtest.h>

#include <sstream>

namespace edt::control::slurm {
namespace {

ClusterSpec spec_with_gpus(const std::string& model, int count) {
  ClusterSpec spec;
  spec.name = "tt";
  spec.framework = "slurm";
  spec.containers = 2;
  spec.gpu = {model, count};
  return spec;
}

// The value of `key=` on its own line of a slurm.conf, or "" if absent.
std::string conf_value(const std::string& conf, const std::string& key) {
  std::istringstream lines(conf);
  std::string line;
  while (std::getline(lines, line))
    if (line.rfind(key + "=", 0) == 0) return line.substr(key.size() + 1);
  return "";
}

TEST(SlurmConf, NamesTheLauncherAsControllerAtItsAddress) {
  const std::string conf = render_slurm_conf(spec_with_gpus("", 0), "127.83.0.1", true);
  EXPECT_EQ(conf_value(conf, "ClusterName"), "tt");
  EXPECT_EQ(conf_value(conf, "SlurmctldHost"), "tt-launcher(127.83.0.1)");
  EXPECT_EQ(conf_value(conf, "SlurmctldPort"), "6817");
  EXPECT_EQ(conf_value(conf, "SlurmdPort"), "6818");
  // Containers share one network namespace in loopback mode: each daemon
  // binds its own address.
  EXPECT_EQ(conf_value(conf, "CommunicationParameters"), "NoInAddrAny,NoCtldInAddrAny");
  // Commands listen on every address: Slurm answers them at 127.0.0.1.
  const std::string commands = render_slurm_conf(spec_with_gpus("", 0), "127.83.0.1", false);
  EXPECT_EQ(conf_value(commands, "CommunicationParameters"), "");
  EXPECT_EQ(conf_value(commands, "SlurmctldHost"), "tt-launcher(127.83.0.1)");
  EXPECT_EQ(conf_value(conf, "ProctrackType"), "proctrack/linuxproc");
  EXPECT_EQ(conf_value(conf, "TaskPlugin"), "task/none");
  EXPECT_EQ(conf_value(conf, "GresTypes"), "gpu");
  EXPECT_EQ(conf_value(conf, "MaxNodeCount"), std::to_string(kMaxContainers));
  EXPECT_EQ(conf_value(conf, "TreeWidth"), "65533");
  EXPECT_EQ(conf_value(conf, "PartitionName"), "main Nodes=ALL Default=YES MaxTime=INFINITE State=UP");
  // Dynamic nodes: the file names none, so a scale leaves it as it is.
  EXPECT_EQ(conf.find("NodeName="), std::string::npos);
  ClusterSpec four = spec_with_gpus("", 0);
  four.containers = 4;
  EXPECT_EQ(render_slurm_conf(four, "127.83.0.1", true), conf);
}

TEST(SlurmConf, CgroupConfKeepsSlurmOffTheHostsCgroups) {
  const std::string conf = render_cgroup_conf();
  EXPECT_EQ(conf_value(conf, "CgroupPlugin"), "cgroup/v1");
  EXPECT_EQ(conf_value(conf, "CgroupAutomount"), "no");
}

TEST(SlurmGres, NamesTheContainersOwnDevices) {
  const ClusterSpec spec = spec_with_gpus("NVIDIA-P4", 2);
  EXPECT_EQ(conf_value(render_gres_conf(spec, {2, 3}), "Name"), "gpu Type=NVIDIA-P4 File=/dev/nvidia[2,3]");
  EXPECT_EQ(conf_value(render_gres_conf(spec_with_gpus("NVIDIA-P4", 1), {5}), "Name"),
            "gpu Type=NVIDIA-P4 File=/dev/nvidia5");
  EXPECT_EQ(conf_value(render_gres_conf(spec, {2, 3}), "AutoDetect"), "off");
  EXPECT_EQ(conf_value(render_gres_conf(spec_with_gpus("", 0), {}), "Name"), "");
}

TEST(SlurmNode, DeclaresGpusAndMemory) {
  ClusterSpec spec = spec_with_gpus("NVIDIA-P4", 2);
  EXPECT_EQ(node_conf(spec, {0, 1}), "Gres=gpu:NVIDIA-P4:2");
  spec.memory_bytes = uint64_t{3} << 30;
  EXPECT_EQ(node_conf(spec, {0, 1}), "Gres=gpu:NVIDIA-P4:2 RealMemory=3072");
  ClusterSpec plain = spec_with_gpus("", 0);
  EXPECT_EQ(node_conf(plain, {}), "");
  plain.memory_bytes = uint64_t{512} << 20;
  EXPECT_EQ(node_conf(plain, {}), "RealMemory=512");
}

TEST(SlurmNode, GresTypeIsOneWord) {
  EXPECT_EQ(gres_type("NVIDIA-P4"), "NVIDIA-P4");
  EXPECT_EQ(gres_type("A100 80GB:x"), "A100_80GB_x");
  EXPECT_EQ(gres_type("a\"b c"), "a_b_c");
}

}  // namespace
}  // namespace edt::control::slurm

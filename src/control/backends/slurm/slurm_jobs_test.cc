#include "control/backends/slurm/slurm_jobs.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

namespace edt::control::slurm_jobs {
namespace {

bool has(const std::vector<std::string>& argv, const std::string& arg) {
  return std::find(argv.begin(), argv.end(), arg) != argv.end();
}

SandboxSpec two_gpu_worker() {
  SandboxSpec spec;
  spec.cluster = "tthvd";
  spec.name = "tthvd-worker-0";
  spec.address = "10.20.128.3";
  spec.image_root = "/";
  spec.shm_bytes = uint64_t{1} << 30;
  spec.gpus = {4, 5};
  spec.gpu_model = "NVIDIA-P4";
  spec.mounts = {{"/srv/mnist", "/data", true}};
  spec.env = {{"EDT_CLUSTER", "tthvd"}};
  spec.id_range = 3;
  return spec;
}

TEST(SlurmJobsTest, SbatchAsksForTheContainersResourcesOnOneNode) {
  SandboxSpec spec = two_gpu_worker();
  spec.cpu_millis = 1500;
  const auto argv = sbatch_argv(spec, {"gpu", "proj", "high"}, "abc", "/shared/slurm/w.out", "'/opt/edtd' slurm-node f");
  EXPECT_EQ(argv.front(), "/usr/bin/sbatch");
  for (const char* arg : {"--parsable", "--job-name=edt-abc-tthvd-worker-0", "--comment=tthvd", "--partition=gpu",
                          "--nodes=1", "--ntasks=1", "--cpus-per-task=2", "--gres=gpu:NVIDIA-P4:2", "--account=proj",
                          "--qos=high", "--no-requeue", "--output=/shared/slurm/w.out"})
    EXPECT_TRUE(has(argv, arg)) << arg;
  // No memory bound: its shm and the default's 1 GiB.
  EXPECT_TRUE(has(argv, "--mem=2048M"));
  EXPECT_EQ(argv.back(), "--wrap=exec '/opt/edtd' slurm-node f");
}

TEST(SlurmJobsTest, SbatchLeavesOutWhatIsNotAsked) {
  SandboxSpec spec = two_gpu_worker();
  spec.gpus.clear();
  spec.memory_bytes = (uint64_t{3} << 30) + 1;  // rounded up to whole MiB
  const auto argv = sbatch_argv(spec, {"cpu", "", ""}, "abc", "o", "c");
  EXPECT_TRUE(has(argv, "--mem=3073M"));
  EXPECT_TRUE(has(argv, "--cpus-per-task=1"));
  for (const auto& arg : argv) {
    EXPECT_FALSE(arg.starts_with("--gres")) << arg;
    EXPECT_FALSE(arg.starts_with("--account")) << arg;
    EXPECT_FALSE(arg.starts_with("--qos")) << arg;
  }
}

TEST(SlurmJobsTest, ParsesSqueueLinesAndSkipsOthers) {
  const auto jobs = parse_squeue(
      "12|edt-abc-c-launcher|RUNNING|edtslurm-n1|None|c\n"
      "13|edt-abc-c-worker-2|PENDING|(null)|Resources|c\n"
      "squeue: error: something\n"
      "x|a|b|c|d|e\n");
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].id, 12);
  EXPECT_EQ(jobs[0].node, "edtslurm-n1");
  EXPECT_EQ(jobs[0].cluster, "c");
  EXPECT_EQ(jobs[1].node, "");
  EXPECT_EQ(jobs[1].reason, "Resources");
  EXPECT_TRUE(waiting(jobs[1].state));
  EXPECT_FALSE(ended(jobs[0].state));
  for (const char* state : {"CANCELLED", "NODE_FAIL", "TIMEOUT", "PREEMPTED", "COMPLETED", "FAILED"})
    EXPECT_TRUE(ended(state)) << state;
  // Its processes are still being ended: it still holds its address.
  EXPECT_FALSE(ended("COMPLETING"));
}

TEST(SlurmJobsTest, JobNamesBelongToOneEdtd) {
  EXPECT_EQ(container_of("abc", job_name("abc", "c-worker-1")), "c-worker-1");
  EXPECT_EQ(container_of("abd", job_name("abc", "c-worker-1")), "");
  EXPECT_EQ(container_of("abc", "train"), "");
}

TEST(SlurmJobsTest, JobIdsAndGpuLists) {
  EXPECT_EQ(parse_job_id("42\n"), 42);
  EXPECT_EQ(parse_job_id("sbatch: warning: x\n43;cluster\n"), 43);
  EXPECT_EQ(parse_job_id("sbatch: error: Batch job submission failed\n"), 0);
  EXPECT_EQ(parse_gpu_list("0,2"), (std::vector<int>{0, 2}));
  EXPECT_EQ(parse_gpu_list(""), std::vector<int>{});
  EXPECT_EQ(parse_gpu_list("GPU-1234"), std::nullopt);
  EXPECT_EQ(parse_gpu_list("0,,1"), std::nullopt);
}

TEST(SlurmJobsTest, CountsEachNodesGpusOnce) {
  const auto models = parse_gres_inventory(
      "n1|gpu:NVIDIA-P4:2(S:0)\n"
      "n1|gpu:NVIDIA-P4:2(S:0)\n"  // n1 again, in another partition
      "n2|gpu:NVIDIA-T4:4(S:0-1),mps:100\n"
      "n3|(null)\n"
      "n4|gpu:1\n");
  EXPECT_EQ(models, (std::map<std::string, int>{{"NVIDIA-P4", 2}, {"NVIDIA-T4", 4}, {"gpu", 1}}));
}

TEST(SlurmJobsTest, JobFileRoundTrips) {
  LocalBackendOptions node;
  node.data_dir = "/shared/edt";
  node.tool_binds = {{"/opt/edt/bin/edtrun", "/run/edt-install/bin/edtrun", true}};
  node.tool_path = {"/opt/edt/bin"};
  node.python_path = "/opt/edt/python";
  node.first_subordinate_id = 1u << 28;
  ContainerNetworkOptions network;
  network.parent = "eth0";
  network.prefix = 20;
  network.login_address = "10.20.0.5";
  network.range = "10.20.128.0/17";
  node.network = network;
  auto read = read_job_file(job_file(two_gpu_worker(), node));
  ASSERT_TRUE(read.is_ok()) << read.status().message();
  const auto& [spec, options] = *read;
  EXPECT_EQ(spec.name, "tthvd-worker-0");
  EXPECT_EQ(spec.address, "10.20.128.3");
  EXPECT_EQ(spec.gpus.size(), 2u);  // which ones, Slurm says on the node
  EXPECT_EQ(spec.mounts.size(), 1u);
  EXPECT_TRUE(spec.mounts[0].read_only);
  EXPECT_EQ(spec.env.at("EDT_CLUSTER"), "tthvd");
  EXPECT_EQ(spec.id_range, 3);
  EXPECT_EQ(options.data_dir, "/shared/edt");
  ASSERT_EQ(options.tool_binds.size(), 1u);
  EXPECT_EQ(options.tool_binds[0].host_path, "/opt/edt/bin/edtrun");
  EXPECT_EQ(options.tool_binds[0].path, "/run/edt-install/bin/edtrun");
  EXPECT_EQ(options.first_subordinate_id, 1u << 28);
  ASSERT_TRUE(options.network.has_value());
  EXPECT_EQ(options.network->parent, "eth0");
  EXPECT_EQ(options.network->prefix, 20);
  EXPECT_EQ(options.network->login_address, "10.20.0.5");
  EXPECT_EQ(options.network->range, "10.20.128.0/17");
  EXPECT_EQ(options.network->containers_dir, "/shared/edt/containers");
  EXPECT_FALSE(read_job_file(nlohmann::json{{"spec", 1}}).is_ok());
}

// --slurm-mode user: a container's slot is its port, and its node's address
// is Slurm's NodeAddr.
TEST(SlurmJobsTest, SlotsArePortsAndNodeAddressesAreSlurms) {
  EXPECT_EQ(slot_port("0.0.160.40"), 41000);
  EXPECT_EQ(slot_port("0.0.255.255"), 65535);
  for (const char* other : {"10.0.160.40", "0.1.0.1", "0.0.256.1", "0.0.1", "0.0.a.1", ""})
    EXPECT_EQ(slot_port(other), 0) << other;
  EXPECT_EQ(parse_node_address("NodeName=n1 Arch=x86_64 CoresPerSocket=1 NodeAddr=198.18.190.11 NodeHostName=n1\n"),
            "198.18.190.11");
  EXPECT_EQ(parse_node_address("NodeName=n1 NodeHostName=n1"), "");
}

TEST(SlurmJobsTest, AJobFileSaysTheContainerRunsAsItsOwnUser) {
  SandboxSpec spec = two_gpu_worker();
  spec.own_user = true;
  LocalBackendOptions node;
  node.data_dir = "/shared/edt";
  node.ssh_port = 41003;
  auto read = read_job_file(job_file(spec, node));
  ASSERT_TRUE(read.is_ok()) << read.status().message();
  EXPECT_TRUE(read->first.own_user);
  EXPECT_EQ(read->second.ssh_port, 41003);
  EXPECT_FALSE(read->second.network.has_value());
  EXPECT_FALSE(read_job_file(job_file(two_gpu_worker(), node))->first.own_user);
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
}

// The containers' root passes through the shared directory's parents as
// "others": those edtd makes are 0711 whatever its umask, and one that is
// not passable is named.
TEST(SlurmJobsTest, SharedDirectoryParentsArePassable) {
  char top[] = "/tmp/edt-slurm-parents-XXXXXX";
  ASSERT_NE(::mkdtemp(top), nullptr);
  ::chmod(top, 0755);
  const std::string dir = std::string(top) + "/site/shared";
  const mode_t old_umask = ::umask(077);
  const Status made = make_passable_parents(dir);
  ::umask(old_umask);
  ASSERT_TRUE(made.is_ok()) << made.message();
  EXPECT_EQ(mode_of(std::string(top) + "/site"), 0711u);
  EXPECT_EQ(mode_of(dir), 0711u);
  EXPECT_EQ(unpassable_parent(dir), "");
  EXPECT_TRUE(make_passable_parents(dir).is_ok());  // again: nothing to make
  ::chmod((std::string(top) + "/site").c_str(), 0700);
  EXPECT_EQ(unpassable_parent(dir), std::string(top) + "/site (mode 0700)");
  std::filesystem::remove_all(top);
}

}  // namespace
}  // namespace edt::control::slurm_jobs

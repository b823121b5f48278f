#include "control/model/cluster.h"
#include "control/model/catalog.h"
#include "common/units.h"
#include "control/model/cluster_json.h"
#include "control/model/container_files.h"
#include "control/model/teams.h"

#include <gtest/gtest.h>

namespace edt::control {
namespace {

using nlohmann::json;

json valid_body() {
  return json::parse(R"({"name": "tthvd", "framework": "horovod", "containers": 2})");
}



// Parses `body` and expects a refusal of `kind` naming `field`.
void expect_refused(const json& body, StatusCode kind, const std::string& field) {
  ClusterSpec spec;
  Status r = parse_cluster_spec(body, &spec);
  ASSERT_FALSE(r.is_ok()) << body.dump();
  EXPECT_EQ(r.code(), kind) << r.message();
  EXPECT_EQ(r.field(), field) << r.message();
  EXPECT_FALSE(r.message().empty());
  EXPECT_FALSE(r.fix().empty());
}

// Whole components: /data/x is within /data, /data2 is not; every
// absolute path is within /.
TEST(PathWithin, ComparesWholeComponents) {
  EXPECT_TRUE(path_within("/data", "/data"));
  EXPECT_TRUE(path_within("/data/x", "/data"));
  EXPECT_FALSE(path_within("/data2", "/data"));
  EXPECT_FALSE(path_within("/dat", "/data"));
  EXPECT_TRUE(path_within("/var/lib/edt", "/"));
  EXPECT_TRUE(path_within("/", "/"));
  EXPECT_FALSE(path_within("", "/"));
}

TEST(ClusterSpec, ParsesAFullRequest) {
  json body = json::parse(R"({"name": "tthvd", "framework": "deepspeed", "containers": 4, "image": "ds",
    "gpu": {"model": "NVIDIA-P4", "count": 2}, "shm": "1Gi",
    "mounts": [{"volume": "data", "path": "/data", "read_only": true}, {"volume": "home"}],
    "env": {"NCCL_DEBUG": "INFO"}, "drain_timeout": "2m"})");
  ClusterSpec spec;
  ASSERT_TRUE(parse_cluster_spec(body, &spec).is_ok());
  EXPECT_EQ(spec.name, "tthvd");
  EXPECT_EQ(spec.framework, "deepspeed");
  EXPECT_EQ(spec.containers, 4);
  EXPECT_EQ(spec.image, "ds");
  EXPECT_EQ(spec.gpu.model, "NVIDIA-P4");
  EXPECT_EQ(spec.gpu.count, 2);
  EXPECT_EQ(spec.shm_bytes, 1ull << 30);
  ASSERT_EQ(spec.mounts.size(), 2u);
  EXPECT_TRUE(spec.mounts[0].read_only);
  EXPECT_EQ(spec.mounts[1].path, "/root/home");
  EXPECT_EQ(spec.env.at("NCCL_DEBUG"), "INFO");
  EXPECT_EQ(spec.drain_timeout, std::chrono::minutes(2));
}

TEST(ClusterSpec, DefaultsImageAndShm) {
  ClusterSpec spec;
  ASSERT_TRUE(parse_cluster_spec(valid_body(), &spec).is_ok());
  EXPECT_EQ(spec.image, "edt");
  EXPECT_EQ(spec.shm_bytes, kDefaultShmBytes);
  EXPECT_EQ(spec.gpu.count, 0);
  EXPECT_EQ(spec.drain_timeout, kDefaultDrainTimeout);
}

TEST(ClusterSpec, ReadsDrainTimeoutsAndWritesThemBack) {
  for (auto [in, ms] : {std::pair{json("30s"), 30000}, {json("500ms"), 500}, {json("2m"), 120000}, {json(0), 0},
                        {json(45), 45000}, {json("1.5s"), 1500}, {json("1h"), 3600000}}) {
    json body = valid_body();
    body["drain_timeout"] = in;
    ClusterSpec spec;
    ASSERT_TRUE(parse_cluster_spec(body, &spec).is_ok()) << in;
    EXPECT_EQ(spec.drain_timeout.count(), ms) << in;
    // What edtd writes (and stores, with the shm in bytes) reads back to the same value.
    json written = spec_to_json(spec);
    written.erase("shm");
    ClusterSpec again;
    ASSERT_TRUE(parse_cluster_spec(written, &again).is_ok()) << written.dump();
    EXPECT_EQ(again.drain_timeout, spec.drain_timeout);
  }
}

TEST(ClusterSpec, RefusesBadDrainTimeouts) {
  // A bad unit, negative, too long, not a duration at all.
  for (json bad : {json("60q"), json("-5s"), json(-5), json("2h"), json(3601), json("soon"), json(true), json(1.5)}) {
    json body = valid_body();
    body["drain_timeout"] = bad;
    expect_refused(body, StatusCode::kInvalidArgument, "drain_timeout");
  }
}

TEST(ClusterSpec, RefusesFewerThanTwoContainers) {
  for (int n : {1, 0, -3}) {
    json body = valid_body();
    body["containers"] = n;
    expect_refused(body, StatusCode::kInvalidArgument, "containers");
  }
  json body = valid_body();
  body["containers"] = "two";
  expect_refused(body, StatusCode::kInvalidArgument, "containers");
  body.erase("containers");
  expect_refused(body, StatusCode::kInvalidArgument, "containers");
}

TEST(ClusterSpec, RefusesBadNames) {
  for (const char* name : {"", "Tthvd", "-a", "a-", "a_b", "a.b", "x2345678901234567890123456789012345678901"}) {
    json body = valid_body();
    body["name"] = name;
    expect_refused(body, StatusCode::kInvalidArgument, "name");
  }
  json body = valid_body();
  body["name"] = 7;
  expect_refused(body, StatusCode::kInvalidArgument, "name");
}

TEST(ClusterSpec, RefusesUnknownFrameworkAndFields) {
  json body = valid_body();
  body["framework"] = "tensorflow";
  expect_refused(body, StatusCode::kInvalidArgument, "framework");
  body = valid_body();
  body["containres"] = 2;
  expect_refused(body, StatusCode::kInvalidArgument, "containres");
  body = valid_body();
  body["gpu"] = {{"model", "X"}, {"cnt", 1}};
  expect_refused(body, StatusCode::kInvalidArgument, "gpu.cnt");
  expect_refused(json::array(), StatusCode::kMalformed, "");
}

TEST(ClusterSpec, RefusesBadShm) {
  for (json shm : {json("lots"), json("5Q"), json("512"), json("1Ti"), json(true)}) {
    json body = valid_body();
    body["shm"] = shm;
    expect_refused(body, StatusCode::kInvalidArgument, "shm");
  }
}

TEST(ClusterSpec, ReadsAMemoryBoundAndWritesItBack) {
  ClusterSpec spec;
  ASSERT_TRUE(parse_cluster_spec(valid_body(), &spec).is_ok());
  EXPECT_EQ(spec.memory_bytes, 0u);
  EXPECT_TRUE(spec_to_json(spec)["memory"].is_null());
  for (auto [in, bytes] : {std::pair{json("8Gi"), 8ull << 30}, {json(1ull << 28), 1ull << 28}, {json(nullptr), 0ull}}) {
    json body = valid_body();
    body["memory"] = in;
    ASSERT_TRUE(parse_cluster_spec(body, &spec).is_ok()) << in;
    EXPECT_EQ(spec.memory_bytes, bytes) << in;
    // Written for people, as shm is (the store keeps the bytes).
    json written = spec_to_json(spec);
    EXPECT_EQ(written["memory"], bytes ? json(format_size(bytes)) : json(nullptr));
  }
}

TEST(ClusterSpec, RefusesAMemoryBoundThatCannotHoldShm) {
  for (json memory : {json("lots"), json("64Mi"), json("17Ti"), json(true), json(-1)}) {
    json body = valid_body();
    body["memory"] = memory;
    expect_refused(body, StatusCode::kInvalidArgument, "memory");
  }
  json body = valid_body();
  body["shm"] = "1Gi";
  body["memory"] = "1Gi";
  ClusterSpec spec;
  Status r = parse_cluster_spec(body, &spec);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.field(), "memory");
  EXPECT_NE(r.message().find("cannot hold the shm of 1 GiB"), std::string::npos) << r.message();
  EXPECT_NE(r.fix().find("at least 1088Mi"), std::string::npos) << r.fix();
  body["memory"] = "1088Mi";
  EXPECT_TRUE(parse_cluster_spec(body, &spec).is_ok());
}

TEST(ClusterSpec, ReadsACpuBoundExactlyAndWritesItBack) {
  ClusterSpec spec;
  ASSERT_TRUE(parse_cluster_spec(valid_body(), &spec).is_ok());
  EXPECT_EQ(spec.cpu_millis, 0);
  EXPECT_TRUE(spec_to_json(spec)["cpus"].is_null());
  for (auto [in, millis, written] : {std::tuple{json("1.5"), 1500, json("1.5")}, {json(1.5), 1500, json("1.5")},
                                     {json("0.01"), 10, json("0.01")}, {json(0.01), 10, json("0.01")},
                                     {json("1.234"), 1234, json("1.234")}, {json("2.50"), 2500, json("2.5")},
                                     {json(3), 3000, json("3")}, {json("1024"), 1024000, json("1024")},
                                     {json(nullptr), 0, json(nullptr)}}) {
    json body = valid_body();
    body["cpus"] = in;
    ASSERT_TRUE(parse_cluster_spec(body, &spec).is_ok()) << in;
    EXPECT_EQ(spec.cpu_millis, millis) << in;
    EXPECT_EQ(spec_to_json(spec)["cpus"], written) << in;
    // What edtd writes reads back the same.
    json back = spec_to_json(spec);
    back.erase("shm");  // written for people, as is memory
    back.erase("memory");
    ClusterSpec again;
    ASSERT_TRUE(parse_cluster_spec(back, &again).is_ok()) << in;
    EXPECT_EQ(again.cpu_millis, millis) << in;
  }
}

TEST(ClusterSpec, RefusesABadCpuBound) {
  for (json cpus : {json(0), json("0"), json(-1), json("-1"), json(1.2345), json("1.2345"), json("abc"), json(2000),
                    json("2000"), json(0.009), json("1024.001"), json(""), json("1."), json(".5"), json("1e3"),
                    json(" 1"), json(true), json::array({1}), json(99999999999999999.0), json("99999999999999999999")}) {
    json body = valid_body();
    body["cpus"] = cpus;
    ClusterSpec spec;
    Status r = parse_cluster_spec(body, &spec);
    ASSERT_FALSE(r.is_ok()) << cpus;
    EXPECT_EQ(r.code(), StatusCode::kInvalidArgument) << cpus;
    EXPECT_EQ(r.field(), "cpus") << cpus;
    EXPECT_NE(r.fix().find("between 0.01 and 1024"), std::string::npos) << r.fix();
  }
  json body = valid_body();
  body["cpus"] = 2000;
  ClusterSpec spec;
  EXPECT_EQ(parse_cluster_spec(body, &spec).message(), "cpus of 2000 is outside 0.01..1024");
  body["cpus"] = "1.2345";
  EXPECT_EQ(parse_cluster_spec(body, &spec).message(), "cpus: '1.2345' is not a positive decimal with at most 3 decimals");
}

TEST(ClusterSpec, RefusesBadMountPaths) {
  for (const char* path : {"data", "/root/../etc", "/root/./x", "/root//x", "/root/x/", "/", "/root", "/etc",
                           "/etc/mpi", "/usr/local", "/proc", "/dev/shm", "/tmp"}) {
    json body = valid_body();
    body["mounts"] = {{{"volume", "v"}, {"path", path}}};
    expect_refused(body, StatusCode::kInvalidArgument, "mounts[0].path");
  }
  for (const std::string& path : {std::string("/data\nx"), std::string("/da\0ta", 7), std::string("/data\x7f"),
                                 "/" + std::string(4095, 'a')}) {
    json body = valid_body();
    body["mounts"] = {{{"volume", "v"}, {"path", path}}};
    expect_refused(body, StatusCode::kInvalidArgument, "mounts[0].path");
  }
  json body = valid_body();
  body["mounts"] = {{{"volume", "v"}, {"path", "/data"}}, {{"volume", "w"}, {"path", "/data/w"}}};
  expect_refused(body, StatusCode::kInvalidArgument, "mounts[1].path");
}

// A value sshd's configuration or a shell would read otherwise than
// written is refused, naming the variable.
TEST(ClusterSpec, RefusesEnvValuesThatSshdWouldMisread) {
  for (const std::string& value : {std::string("a\nPermitRootLogin yes"), std::string("a\"b"), std::string("a\\b"),
                                  std::string("a\0b", 3), std::string("a\tb"), std::string(4097, 'x')}) {
    json body = valid_body();
    body["env"] = {{"X", value}};
    expect_refused(body, StatusCode::kInvalidArgument, "env.X");
  }
  json body = valid_body();
  body["env"] = {{std::string(256, 'A'), "1"}};
  expect_refused(body, StatusCode::kInvalidArgument, "env." + std::string(256, 'A'));
  body["env"] = json::object();
  for (int i = 0; i < 257; ++i) body["env"]["V" + std::to_string(i)] = "1";
  expect_refused(body, StatusCode::kInvalidArgument, "env");
  body["env"] = {{"OK", "spaces, 'quotes', $dollars and ünïcode are fine"}, {"LONG", std::string(4096, 'x')}};
  ClusterSpec spec;
  EXPECT_TRUE(parse_cluster_spec(body, &spec).is_ok());
}

TEST(ClusterSpec, AcceptsNormalMountPaths) {
  for (const char* path : {"/root/data", "/data", "/srv/x/y", "/workspace"})
    EXPECT_TRUE(check_mount_path(path, "p").is_ok()) << path;
}

TEST(ClusterSpec, RefusesBadEnvAndGpu) {
  json body = valid_body();
  body["env"] = {{"1X", "a"}};
  expect_refused(body, StatusCode::kInvalidArgument, "env.1X");
  body["env"] = {{"X", 1}};
  expect_refused(body, StatusCode::kInvalidArgument, "env.X");
  body = valid_body();
  body["gpu"] = {{"count", 1}};
  expect_refused(body, StatusCode::kInvalidArgument, "gpu.model");
  body["gpu"] = {{"model", "P4"}, {"count", -1}};
  expect_refused(body, StatusCode::kInvalidArgument, "gpu.count");
}

Catalog test_catalog() {
  Catalog c;
  c.images["edt"] = {"edt", "/", {"horovod"}, true};
  c.images["ds"] = {"ds", "/", {"deepspeed", "megatron"}, false};
  c.volumes["data"] = {"data", "alice", "/x", true};
  c.gpus_total["NVIDIA-P4"] = 8;
  c.gpus_free["NVIDIA-P4"] = 3;
  return c;
}

Status check(const std::string& text, int new_containers) {
  ClusterSpec spec;
  Status r = parse_cluster_spec(json::parse(text), &spec);
  EXPECT_TRUE(r.is_ok()) << r.message();
  return check_against_catalog(spec, test_catalog(), new_containers);
}

TEST(Catalog, RefusesImageWithoutTheFramework) {
  Status r = check(R"({"name": "a", "framework": "deepspeed", "containers": 2})", 2);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.field(), "image");
  EXPECT_EQ(r.message(), "image edt carries horovod, not deepspeed");
  EXPECT_TRUE(check(R"({"name": "a", "framework": "deepspeed", "containers": 2, "image": "ds"})", 2).is_ok());
}

TEST(Catalog, RefusesUnknownImageVolumeAndModel) {
  Status r = check(R"({"name": "a", "framework": "horovod", "containers": 2, "image": "nope"})", 2);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.field(), "image");
  r = check(R"({"name": "a", "framework": "horovod", "containers": 2, "mounts": [{"volume": "nope"}]})", 2);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.field(), "mounts[0].volume");
  r = check(R"({"name": "a", "framework": "horovod", "containers": 2, "gpu": {"model": "H100", "count": 1}})", 2);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.field(), "gpu.model");
  EXPECT_NE(r.fix().find("NVIDIA-P4"), std::string::npos);
}

TEST(Catalog, RefusesMoreGpusThanThereAreAndTellsWhatIsShortOfFree) {
  Status r = check(R"({"name": "a", "framework": "horovod", "containers": 5, "gpu": {"model": "NVIDIA-P4", "count": 2}})", 5);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.field(), "gpu.count");
  EXPECT_NE(r.message().find("this machine has 8"), std::string::npos) << r.message();
  // Short of free GPUs is not a refusal: the request waits in the queue.
  EXPECT_TRUE(check(R"({"name": "a", "framework": "horovod", "containers": 2, "gpu": {"model": "NVIDIA-P4", "count": 2}})", 2)
                  .is_ok());
  EXPECT_TRUE(check(R"({"name": "a", "framework": "horovod", "containers": 3, "gpu": {"model": "NVIDIA-P4"}})", 3)
                   .is_ok());
}

TEST(Hostfile, ListsLauncherFirstWithSlotsFromGpus) {
  auto make = [](std::string name, int index, std::vector<int> gpus) {
    ContainerStatus c;
    c.name = std::move(name);
    c.index = index;
    c.gpus = std::move(gpus);
    return c;
  };
  std::vector<ContainerStatus> containers = {make("t-worker-1", 2, {4, 5}), make("t-launcher", 0, {0, 1}),
                                             make("t-worker-0", 1, {2, 3})};
  EXPECT_EQ(render_hostfile(containers), "t-launcher slots=2\nt-worker-0 slots=2\nt-worker-1 slots=2\n");
  containers[0].gpus.clear();
  EXPECT_EQ(render_hostfile({containers[0]}), "t-worker-1 slots=1\n");
  EXPECT_EQ(container_name("t", 0), "t-launcher");
  EXPECT_EQ(container_name("t", 3), "t-worker-2");
}

TEST(ContainerEnv, EachFrameworkGetsWhatItsLauncherReads) {
  ClusterSpec spec;
  spec.name = "t";
  spec.containers = 3;
  spec.env = {{"FOO", "bar"}};
  ContainerStatus worker;
  worker.name = "t-worker-1";
  worker.index = 2;
  worker.gpus = {4, 5};
  spec.framework = "deepspeed";
  auto env = container_env(spec, worker, {{"PATH", "/bin"}});
  EXPECT_EQ(env["PDSH_RCMD_TYPE"], "ssh");
  EXPECT_EQ(env["WCOLL"], "/job/hostnames");
  EXPECT_EQ(env["OMPI_ALLOW_RUN_AS_ROOT"], "1");
  EXPECT_EQ(env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"], "1");
  // CUDA numbers the container's GPUs 0..n-1; the host's indices stay visible.
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "0,1");
  EXPECT_EQ(env["EDT_HOST_GPUS"], "4,5");
  EXPECT_EQ(env["NVIDIA_VISIBLE_DEVICES"], "4,5");
  EXPECT_EQ(env["PATH"], "/bin");
  EXPECT_EQ(env.count("MASTER_ADDR"), 0u);
  spec.framework = "megatron";
  env = container_env(spec, worker, {});
  EXPECT_EQ(env["MASTER_ADDR"], "t-launcher");
  EXPECT_EQ(env["MASTER_PORT"], "6000");
  EXPECT_EQ(env["NODE_RANK"], "2");
  EXPECT_EQ(env["GPUS_PER_NODE"], "2");
  EXPECT_EQ(env["CUDA_DEVICE_MAX_CONNECTIONS"], "1");
  EXPECT_EQ(env.count("NNODES"), 0u);  // a scale would leave it wrong: edtrun --per-host gives it
  EXPECT_EQ(env.count("PDSH_RCMD_TYPE"), 0u);
  EXPECT_EQ(env["FOO"], "bar");
  spec.env["CUDA_DEVICE_MAX_CONNECTIONS"] = "8";  // the user's env wins
  EXPECT_EQ(container_env(spec, worker, {})["CUDA_DEVICE_MAX_CONNECTIONS"], "8");
  spec.framework = "horovod";
  env = container_env(spec, worker, {});
  EXPECT_EQ(env.count("MASTER_ADDR") + env.count("PDSH_RCMD_TYPE") + env.count("NODE_RANK"), 0u);
}

// CUDA sees a container's GPUs as 0..n-1 whatever the host's indices (the
// container has only their device files), in the host's order; the host's
// indices stay in EDT_HOST_GPUS, ascending as CUDA numbers them.
TEST(ContainerEnv, GpusAreNumberedFromZeroWithTheHostsIndicesBeside) {
  EXPECT_EQ(gpu_env({7, 2, 5}), (std::map<std::string, std::string>{
                                    {"CUDA_VISIBLE_DEVICES", "0,1,2"},
                                    {"EDT_HOST_GPUS", "2,5,7"},
                                    {"NVIDIA_VISIBLE_DEVICES", "2,5,7"}}));
  // No GPUs: an empty CUDA_VISIBLE_DEVICES, so that CUDA sees none.
  EXPECT_EQ(gpu_env({})["CUDA_VISIBLE_DEVICES"], "");
  EXPECT_EQ(gpu_env({})["EDT_HOST_GPUS"], "");
}

TEST(ClusterSpec, ReadsMegatronParallelSizesAndWritesThemBack) {
  ClusterSpec spec;
  json body = json::parse(R"({"name": "m", "framework": "megatron", "containers": 4,
    "gpu": {"model": "P4", "count": 2}, "megatron": {"tensor_parallel": 2, "pipeline_parallel": 4}})");
  ASSERT_TRUE(parse_cluster_spec(body, &spec).is_ok());
  EXPECT_EQ(spec.megatron.tensor_parallel, 2);
  EXPECT_EQ(spec.megatron.pipeline_parallel, 4);
  json out = spec_to_json(spec);
  EXPECT_EQ(out["megatron"], json::parse(R"({"tensor_parallel": 2, "pipeline_parallel": 4})"));
  ClusterSpec again;
  ASSERT_TRUE(parse_cluster_spec(json{{"name", "m"}, {"framework", "megatron"}, {"containers", 4},
                                       {"gpu", out["gpu"]}, {"megatron", out["megatron"]}},
                                  &again)
                   .is_ok());
  EXPECT_EQ(again.megatron.product(), 8);
  // Only one size given: the other is 1. Without GPUs a container counts as 1.
  ASSERT_TRUE(parse_cluster_spec(json::parse(R"({"name": "m", "framework": "megatron", "containers": 4,
    "megatron": {"pipeline_parallel": 2}})"), &spec).is_ok());
  EXPECT_EQ(spec.megatron.tensor_parallel, 0);
  EXPECT_EQ(spec_to_json(spec)["megatron"], json::parse(R"({"pipeline_parallel": 2})"));
  // None given: no "megatron" in the answer.
  ASSERT_TRUE(parse_cluster_spec(valid_body(), &spec).is_ok());
  EXPECT_FALSE(spec_to_json(spec).contains("megatron"));
}

TEST(ClusterSpec, RefusesMegatronSizesThatDoNotDivideTheGpus) {
  json body = json::parse(R"({"name": "m", "framework": "megatron", "containers": 3,
    "gpu": {"model": "P4", "count": 2}, "megatron": {"tensor_parallel": 2, "pipeline_parallel": 2}})");
  ClusterSpec spec;
  Status r = parse_cluster_spec(body, &spec);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.field(), "megatron");
  EXPECT_EQ(r.message(),
            "3 containers of 2 GPUs make 6 GPUs, which tensor_parallel 2 x pipeline_parallel 2 = 4 does not divide");
  EXPECT_EQ(r.fix(), "ask for a container count such as 2, 4, 6, or other parallel sizes");
  body["containers"] = 4;
  ASSERT_TRUE(parse_cluster_spec(body, &spec).is_ok());
  // A scale is checked the same way, naming its own field.
  r = check_megatron_parallel(spec, 5, "containers");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.field(), "containers");
  EXPECT_TRUE(check_megatron_parallel(spec, 6, "containers").is_ok());
  // Bad values, and sizes for another framework.
  for (auto [megatron, field] : {std::pair{json{{"tensor_parallel", 0}}, "megatron.tensor_parallel"},
                                 {json{{"pipeline_parallel", kMaxParallelSize + 1}}, "megatron.pipeline_parallel"},
                                 {json{{"tensor_parallel", "2"}}, "megatron.tensor_parallel"},
                                 {json{{"data_parallel", 2}}, "megatron.data_parallel"},
                                 {json(2), "megatron"}}) {
    json bad = body;
    bad["megatron"] = megatron;
    expect_refused(bad, StatusCode::kInvalidArgument, field);
  }
  json other = valid_body();
  other["megatron"] = {{"tensor_parallel", 2}};
  expect_refused(other, StatusCode::kInvalidArgument, "megatron");
  other["megatron"] = nullptr;  // null: none given, for any framework
  EXPECT_TRUE(parse_cluster_spec(other, &spec).is_ok());
}

}  // namespace
}  // namespace edt::control

namespace edt::control {
namespace {

using nlohmann::json;

TEST(ClusterSpecElastic, BoundsAndPriorityAreReadCheckedAndWrittenBack) {
  ClusterSpec spec;
  ASSERT_TRUE(parse_cluster_spec(json::parse(R"({"name": "e", "framework": "horovod", "containers": 2,
      "max_containers": 6, "priority": 7})"), &spec).is_ok());
  EXPECT_EQ(spec.elastic.min, 2);
  EXPECT_EQ(spec.elastic.max, 6);
  EXPECT_EQ(spec.priority, 7);
  ClusterSpec back;
  json written = spec_to_json(spec);
  written.erase("shm");  // written for people ("64 MiB"), as the database knows
  ASSERT_TRUE(parse_cluster_spec(written, &back).is_ok());
  EXPECT_EQ(back.elastic.min, 2);
  EXPECT_EQ(back.elastic.max, 6);
  EXPECT_EQ(back.priority, 7);
  // A fixed cluster stays fixed, and says nothing of bounds.
  ClusterSpec fixed;
  ASSERT_TRUE(parse_cluster_spec(json::parse(R"({"name": "f", "framework": "horovod", "containers": 2})"), &fixed).is_ok());
  EXPECT_FALSE(fixed.elastic.elastic());
  EXPECT_FALSE(spec_to_json(fixed).contains("max_containers"));
}

TEST(ClusterSpecElastic, HostileBoundsAreRefusedByField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"name": "e", "framework": "horovod", "containers": 4, "min_containers": 5, "max_containers": 3})",
       "min_containers"},
      {R"({"name": "e", "framework": "horovod", "containers": 8, "min_containers": 2, "max_containers": 4})",
       "containers"},
      {R"({"name": "e", "framework": "horovod", "containers": 2, "min_containers": 2})", "max_containers"},
      {R"({"name": "e", "framework": "horovod", "containers": 2, "max_containers": 1})", "max_containers"},
      {R"({"name": "e", "framework": "horovod", "containers": 2, "max_containers": "6"})", "max_containers"},
      {R"({"name": "e", "framework": "horovod", "containers": 2, "priority": -1})", "priority"},
      {R"({"name": "e", "framework": "horovod", "containers": 2, "priority": 101})", "priority"},
  };
  for (const auto& [text, field] : cases) {
    ClusterSpec spec;
    Status r = parse_cluster_spec(json::parse(text), &spec);
    ASSERT_FALSE(r.is_ok()) << text;
    EXPECT_EQ(r.code(), StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(r.field(), field) << text << ": " << r.message();
    EXPECT_FALSE(r.fix().empty());
  }
}

TEST(Teams, QuotaAndTeamRequestsRefuseHostileValuesByField) {
  Quota q{"ml", "NVIDIA-P4"};
  ASSERT_TRUE(parse_quota_request(json::parse(R"({"guaranteed": 4, "borrow_limit": 2})"), &q).is_ok());
  EXPECT_EQ(q.limit(), 6);
  const std::pair<const char*, const char*> cases[] = {
      {R"({"guaranteed": -1, "borrow_limit": 2})", "guaranteed"},
      {R"({"guaranteed": 1, "borrow_limit": -2})", "borrow_limit"},
      {R"({"guaranteed": 1})", "borrow_limit"},
      {R"({"guaranteed": 1, "borrow_limit": 2, "extra": 1})", "extra"},
      {R"({"guaranteed": 99999999, "borrow_limit": 0})", "guaranteed"},
  };
  for (const auto& [text, field] : cases) {
    Quota out{"ml", "NVIDIA-P4", 1, 1};
    Status r = parse_quota_request(json::parse(text), &out);
    ASSERT_FALSE(r.is_ok()) << text;
    EXPECT_EQ(r.field(), field) << text;
    EXPECT_EQ(out.guaranteed, 1);  // nothing half-written
  }
  std::string name;
  EXPECT_EQ(parse_team_request(json::parse(R"({"name": "Bad Name"})"), &name).field(), "name");
  std::string team = "kept";
  EXPECT_TRUE(parse_user_team(json::parse(R"({"team": ""})"), &team).is_ok());
  EXPECT_EQ(team, "");
}

}  // namespace
}  // namespace edt::control

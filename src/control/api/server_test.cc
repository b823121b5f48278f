// The HTTP edge in process: the route table, the middleware (auth, admin
// routes, metrics) and the mapping of Errors to statuses and bodies, over a
// real database and a backend that starts nothing.
#include "control/api/server.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <filesystem>

#include "common/net.h"

namespace edt::control {
namespace {

using nlohmann::json;

class NoBackend : public Backend {
 public:
  Status prepare_cluster(const std::string&) override { return Status::ok(); }
  Result<SandboxRef> start(const SandboxSpec&) override { return internal_error("not here"); }
  SandboxState observe(const std::string&, const SandboxRef&) override { return SandboxState::kGone; }
  Status signal(const SandboxRef&, int) override { return Status::ok(); }
  Result<int> training_processes(const SandboxRef&) override { return 0; }
  Status remove(const std::string&) override { return Status::ok(); }
  Status write_cluster_files(const std::string&, const ClusterFiles&) override { return Status::ok(); }
  Status remove_cluster(const std::string&) override { return Status::ok(); }
  Result<SandboxRef> exec(const SandboxRef&, const ExecSpec&) override { return internal_error("not here"); }
  Result<std::string> ssh_private_key(const std::string&) override { return not_found("no key"); }
  int ssh_port() const override { return 22; }
};

class ApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("edt-api-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    db_ = Database::open((dir_ / "edtd.db").string()).value();
    reconciler_ = std::make_unique<Reconciler>(db_.get(), &backend_, ReconcilerOptions{});
    service_ = std::make_unique<Service>(
        db_.get(), ServiceOptions{AddressRange::parse("127.92.0.0/24").value(), dir_.string(), {}});
    ASSERT_TRUE(service_->set_inventory({"edt", "/", {"horovod"}, true}, {{0, "P4", true, ""}}).is_ok());
    admin_ = service_->ensure_admin().value().value();
    jobs_ = std::make_unique<JobRunner>(db_.get(), &backend_, dir_.string(), std::map<std::string, std::string>{});
    ApiServerOptions options;
    options.service = service_.get();
    options.backend = &backend_;
    options.reconciler = reconciler_.get();
    options.jobs = jobs_.get();
    options.max_body_bytes = 4096;
    server_ = std::make_unique<ApiServer>(options);
    port_ = net::free_port("127.0.0.1").value();
    ASSERT_TRUE(server_->start("127.0.0.1", port_).is_ok());
    bob_ = service_->create_user(*service_->authenticate(admin_), "bob")->token;
  }
  void TearDown() override {
    server_.reset();
    jobs_.reset();
    service_.reset();
    reconciler_.reset();
    db_.reset();
    std::filesystem::remove_all(dir_);
  }
  // A request; returns the status and the body (parsed when it is JSON).
  std::pair<int, json> call(const std::string& method, const std::string& path, const std::string& token,
                            const std::string& body = "") {
    httplib::Client c("127.0.0.1", port_);
    httplib::Headers h;
    if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
    httplib::Result r = method == "POST"    ? c.Post(path, h, body, "application/json")
                        : method == "PATCH" ? c.Patch(path, h, body, "application/json")
                        : method == "DELETE" ? c.Delete(path, h)
                                             : c.Get(path, h);
    if (!r) return {0, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  // Expects a refusal: the status, and the error body with that status and field.
  void expect_refused(const std::pair<int, json>& got, int status, const std::string& field) {
    EXPECT_EQ(got.first, status) << got.second.dump();
    ASSERT_TRUE(got.second.contains("error")) << got.second.dump();
    EXPECT_EQ(got.second["error"]["status"], status);
    EXPECT_EQ(got.second["error"]["field"], field);
    EXPECT_FALSE(got.second["error"]["message"].get<std::string>().empty());
    EXPECT_FALSE(got.second["error"]["fix"].get<std::string>().empty());
  }

  std::filesystem::path dir_;
  std::unique_ptr<Database> db_;
  NoBackend backend_;
  std::unique_ptr<Reconciler> reconciler_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<JobRunner> jobs_;
  std::unique_ptr<ApiServer> server_;
  int port_ = 0;
  std::string admin_, bob_;
};

TEST_F(ApiServerTest, PublicRoutesNeedNoToken) {
  EXPECT_EQ(call("GET", "/healthz", "").second, (json{{"ok", true}}));
  EXPECT_EQ(call("GET", "/api/v1/openapi.json", "").second["openapi"], "3.0.3");
}

TEST_F(ApiServerTest, TheMiddlewareRefusesWithErrorBodies) {
  expect_refused(call("GET", "/api/v1/clusters", ""), 401, "Authorization");
  expect_refused(call("GET", "/api/v1/clusters", "edt_wrong"), 401, "Authorization");
  expect_refused(call("POST", "/api/v1/users", bob_, "not json"), 403, "");  // admin-only before the body
  expect_refused(call("GET", "/api/v1/nothing", admin_), 404, "");
  expect_refused(call("POST", "/api/v1/clusters", admin_, R"({"name": "a", )"), 400, "");
  expect_refused(call("POST", "/api/v1/clusters", admin_, std::string(5000, ' ')), 413, "");
  expect_refused(call("POST", "/api/v1/clusters", admin_, R"({"name": "a", "framework": "horovod", "containers": 1})"),
                 422, "containers");
}

TEST(RouteRegex, EachParameterIsOneSegmentAndNamed) {
  std::vector<std::string> names;
  EXPECT_EQ(route_regex("/api/v1/clusters/{name}/containers/{container}/terminal", &names),
            "/api/v1/clusters/([^/]+)/containers/([^/]+)/terminal");
  EXPECT_EQ(names, (std::vector<std::string>{"name", "container"}));
  names.clear();
  EXPECT_EQ(route_regex("/healthz", &names), "/healthz");
  EXPECT_TRUE(names.empty());
}

TEST_F(ApiServerTest, BadInputIsRefusedByFieldNeverWithA500) {
  httplib::Client c("127.0.0.1", port_);
  // The scheme in any case (RFC 7235).
  for (const std::string scheme : {"bearer ", "BEARER ", "Bearer  "}) {
    auto r = c.Get("/api/v1/whoami", {{"Authorization", scheme + bob_}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << scheme << r->body;
  }
  expect_refused(call("GET", "/api/v1/clusters", "", ""), 401, "Authorization");
  auto basic = c.Get("/api/v1/whoami", {{"Authorization", "Basic " + bob_}});
  ASSERT_TRUE(basic);
  EXPECT_NE(basic->body.find("its scheme is 'Basic'"), std::string::npos) << basic->body;
  expect_refused(call("POST", "/api/v1/images", admin_, R"({"name": "i", "root": 5, "frameworks": ["horovod"]})"), 422,
                 "root");
  expect_refused(call("POST", "/api/v1/volumes", bob_, R"({"name": "v", "size": 5})"), 422, "size");
  expect_refused(call("POST", "/api/v1/volumes", bob_, R"({"name": "v", "name": "w"})"), 400, "name");
  expect_refused(call("POST", "/api/v1/images", admin_, R"({"name": "i", "frameworks": )" + std::string(1000, '[') +
                                                            std::string(1000, ']') + "}"),
                 400, "frameworks[0][0][0][0][0][0][0]...");
  // Tokens: no body, {} or a refusal by field.
  EXPECT_EQ(call("POST", "/api/v1/users/bob/tokens", bob_, "").first, 201);
  EXPECT_EQ(call("POST", "/api/v1/users/bob/tokens", bob_, "{}").first, 201);
  expect_refused(call("POST", "/api/v1/users/bob/tokens", bob_, R"({"expires": "1h"})"), 422, "expires");
}

TEST_F(ApiServerTest, ClustersThroughTheServiceWithOwnerRules) {
  auto [created, cluster] =
      call("POST", "/api/v1/clusters", bob_, R"({"name": "a", "framework": "horovod", "containers": 2})");
  ASSERT_EQ(created, 201) << cluster.dump();
  EXPECT_EQ(cluster["status"]["phase"], "Pending");
  EXPECT_EQ(cluster["owner"], "bob");
  expect_refused(call("POST", "/api/v1/clusters", bob_, R"({"name": "a", "framework": "horovod", "containers": 2})"),
                 409, "name");
  expect_refused(call("PATCH", "/api/v1/clusters/none", bob_, R"({"containers": 3})"), 404, "name");
  expect_refused(call("PATCH", "/api/v1/clusters/a", bob_, R"({"framework": "slurm"})"), 422, "framework");
  expect_refused(call("PATCH", "/api/v1/clusters/a", bob_, R"({"containers": 3, "gpu": 1})"), 422, "gpu");
  EXPECT_EQ(call("PATCH", "/api/v1/clusters/a", bob_, R"({"containers": 3})").second["status"]["phase"], "Scaling");
  EXPECT_EQ(call("GET", "/api/v1/clusters", bob_).second["clusters"].size(), 1u);
  auto [events_status, events] = call("GET", "/api/v1/clusters/a/events", admin_);
  ASSERT_EQ(events_status, 200);
  ASSERT_EQ(events["events"].size(), 2u);
  EXPECT_EQ(events["events"][1]["type"], "Scaling");
  expect_refused(call("GET", "/api/v1/clusters/a/ssh", bob_), 409, "name");
  EXPECT_EQ(call("DELETE", "/api/v1/clusters/a", bob_).second["status"]["phase"], "Deleting");
}

TEST_F(ApiServerTest, MetricsCountRequestsAndRefusals) {
  call("GET", "/api/v1/clusters", "");
  call("GET", "/api/v1/whoami", bob_);
  httplib::Client c("127.0.0.1", port_);
  auto metrics = c.Get("/api/v1/metrics", {{"Authorization", "Bearer " + admin_}});
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("edt_api_requests_total 3"), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find("edt_api_refusals_total 1"), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find("edt_gpus{state=\"total\"} 1"), std::string::npos) << metrics->body;
}

}  // namespace
}  // namespace edt::control

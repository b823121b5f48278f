// The HTTP edge in process: the route table, the middleware (auth, admin
// routes, metrics) and the mapping of Errors to statuses and bodies, over a
// real database and a backend that starts nothing.
#include "control/api/server.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <filesystem>

#include "common/net.h"
#include "control/service/volume_files.h"
#include "image/test_images.h"

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
    jobs_ = std::make_unique<JobRunner>(db_.get(), &backend_, dir_.string(), std::map<std::string, std::string>{});
    service_ = std::make_unique<Service>(db_.get(), ServiceOptions{AddressRange::parse("127.92.0.0/24").value(),
                                                                   dir_.string(), {}, {}, jobs_.get(), &backend_,
                                                                   (dir_ / "images").string()});
    ASSERT_TRUE(service_->set_inventory({"edt", "/", {"horovod"}, true}, {{0, "P4", true, ""}}).is_ok());
    admin_ = service_->ensure_admin().value().value();
    ApiServerOptions options;
    options.service = service_.get();
    options.reconciler = reconciler_.get();
    options.max_body_bytes = 4096;
    options.max_upload_bytes = 65536;
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
    httplib::Result r = method == "PUT"     ? c.Put(path, h, body, "application/octet-stream")
                        : method == "POST"  ? c.Post(path, h, body, "application/json")
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

TEST_F(ApiServerTest, ImagesAreImportedAndDeletedByTheAdminOnly) {
  namespace it = edt::image::testing;
  it::ScratchDir src("edt-api-image");
  const std::string good = src.path() + "/good", bad = src.path() + "/bad";
  it::write_oci_layout(good, {it::make_layer({it::file("usr/a", "a"), it::file("etc/a", "a")})}, "good");
  it::write_oci_layout(bad, {it::make_layer({it::file("etc/a", "a"), it::symlink("usr", "/usr"), it::file("usr/x", "x")})},
                       "bad");
  auto body = [](const std::string& name, const std::string& path) {
    return json{{"name", name}, {"path", path}}.dump();
  };
  expect_refused(call("POST", "/api/v1/images/import", bob_, body("good", good)), 403, "");
  auto [hostile, refusal] = call("POST", "/api/v1/images/import", admin_, body("bad", bad));
  expect_refused({hostile, refusal}, 422, "path");
  EXPECT_NE(refusal["error"]["message"].get<std::string>().find("symbolic link"), std::string::npos) << refusal.dump();
  expect_refused(call("POST", "/api/v1/images/import", admin_, body("gone", src.path() + "/none.tar")), 422, "path");
  expect_refused(call("POST", "/api/v1/images/import", admin_, body("mine", (dir_ / "edtd.db").string())), 403, "path");
  EXPECT_EQ(it::count_entries((dir_ / "images/layers/sha256").string()), 0u);
  auto [made, image] = call("POST", "/api/v1/images/import", admin_, body("good", good));
  ASSERT_EQ(made, 201) << image.dump();
  EXPECT_EQ(image["working_dir"], "/work");
  EXPECT_EQ(image["source"], good);
  EXPECT_EQ(call("GET", "/api/v1/images", bob_).second["images"].size(), 2u);
  ASSERT_EQ(call("POST", "/api/v1/clusters", bob_, R"({"name": "a", "image": "good", "framework": "horovod", "containers": 2})").first, 201);
  expect_refused(call("DELETE", "/api/v1/images/good", admin_), 409, "name");
  expect_refused(call("DELETE", "/api/v1/images/good", bob_), 403, "");
  expect_refused(call("DELETE", "/api/v1/images/none", admin_), 404, "name");
}

TEST_F(ApiServerTest, TokensAreListedRevokedAndExpireAndUsersAreDeleted) {
  auto [made, token] = call("POST", "/api/v1/users/bob/tokens", admin_, R"({"expires_in": "1h", "description": "ci"})");
  ASSERT_EQ(made, 201) << token.dump();
  EXPECT_EQ(token["name"], "bob");
  const std::string ci = token["token"];
  const int64_t id = token["id"];
  auto [listed, tokens] = call("GET", "/api/v1/users/bob/tokens", ci);
  ASSERT_EQ(listed, 200) << tokens.dump();
  ASSERT_EQ(tokens["tokens"].size(), 2u);
  EXPECT_EQ(tokens["tokens"][1]["description"], "ci");
  EXPECT_EQ(tokens["tokens"][1]["expires_at"].get<int64_t>() - tokens["tokens"][1]["created_at"].get<int64_t>(), 3600);
  EXPECT_EQ(tokens["tokens"][1]["expired"], false);
  EXPECT_EQ(tokens["tokens"][0].count("token"), 0u);
  expect_refused(call("POST", "/api/v1/users/bob/tokens", bob_, R"({"expires_in": "5y"})"), 422, "expires_in");
  // Another user's tokens: refused whether or not the name exists.
  expect_refused(call("GET", "/api/v1/users/admin/tokens", bob_), 403, "name");
  expect_refused(call("GET", "/api/v1/users/nobody/tokens", bob_), 403, "name");
  expect_refused(call("DELETE", "/api/v1/users/admin/tokens/1", bob_), 403, "name");
  expect_refused(call("DELETE", "/api/v1/users/bob/tokens/x1", bob_), 404, "id");
  expect_refused(call("DELETE", "/api/v1/users/bob/tokens/999", bob_), 404, "id");
  // Revoked: the next request with it is refused.
  EXPECT_EQ(call("DELETE", "/api/v1/users/bob/tokens/" + std::to_string(id), bob_).second,
            (json{{"deleted", std::to_string(id)}}));
  expect_refused(call("GET", "/api/v1/whoami", ci), 401, "Authorization");
  EXPECT_EQ(call("GET", "/api/v1/whoami", bob_).first, 200);

  expect_refused(call("DELETE", "/api/v1/users/bob", bob_), 403, "");
  expect_refused(call("DELETE", "/api/v1/users/admin", admin_), 409, "name");
  expect_refused(call("DELETE", "/api/v1/users/nobody", admin_), 404, "name");
  ASSERT_EQ(call("POST", "/api/v1/volumes", bob_, R"({"name": "bobs"})").first, 201);
  expect_refused(call("DELETE", "/api/v1/users/bob", admin_), 409, "name");
  ASSERT_EQ(call("DELETE", "/api/v1/volumes/bobs", bob_).first, 200);
  EXPECT_EQ(call("DELETE", "/api/v1/users/bob", admin_).second, (json{{"deleted", "bob"}}));
  expect_refused(call("GET", "/api/v1/whoami", bob_), 401, "Authorization");
}

TEST_F(ApiServerTest, AnotherUsersNamesAreNotTold) {
  ASSERT_EQ(call("POST", "/api/v1/clusters", admin_, R"({"name": "adm", "framework": "horovod", "containers": 2})").first,
            201);
  ASSERT_EQ(call("POST", "/api/v1/volumes", admin_, R"({"name": "admv"})").first, 201);
  auto body_without_name = [](json body, const std::string& name) {
    std::string message = body["error"]["message"];
    message.replace(message.find(name), name.size(), "NAME");
    body["error"]["message"] = message;
    return body;
  };
  for (const std::string route : {"GET /api/v1/clusters/", "DELETE /api/v1/clusters/", "GET /api/v1/clusters/{}/ssh",
                                  "GET /api/v1/clusters/{}/events", "GET /api/v1/clusters/{}/hostfile",
                                  "DELETE /api/v1/volumes/"}) {
    const std::string method = route.substr(0, route.find(' '));
    std::string path = route.substr(route.find(' ') + 1);
    const bool volume = path.find("volumes") != std::string::npos;
    auto with = [&](const std::string& name) {
      std::string p = path;
      if (p.find("{}") == std::string::npos) return p + name;
      return p.replace(p.find("{}"), 2, name);
    };
    auto theirs = call(method, with(volume ? "admv" : "adm"), bob_);
    auto none = call(method, with("none"), bob_);
    EXPECT_EQ(theirs.first, 404) << route << " " << theirs.second.dump();
    EXPECT_EQ(body_without_name(theirs.second, volume ? "admv" : "adm"), body_without_name(none.second, "none")) << route;
  }
  auto taken = call("POST", "/api/v1/clusters", bob_, R"({"name": "adm", "framework": "horovod", "containers": 2})");
  expect_refused(taken, 409, "name");
  EXPECT_EQ(taken.second.dump().find("admin"), std::string::npos) << taken.second.dump();
  // Metrics count the user's own clusters; the admin's count all.
  httplib::Client c("127.0.0.1", port_);
  auto mine = c.Get("/api/v1/metrics", {{"Authorization", "Bearer " + bob_}});
  auto all = c.Get("/api/v1/metrics", {{"Authorization", "Bearer " + admin_}});
  ASSERT_TRUE(mine && all);
  EXPECT_EQ(mine->body.find("edt_clusters{phase=\"Pending\"}"), std::string::npos) << mine->body;
  EXPECT_NE(all->body.find("edt_clusters{phase=\"Pending\"} 1"), std::string::npos) << all->body;
  auto gpus = call("GET", "/api/v1/gpus", bob_).second["gpus"];
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0]["held"], false);
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

TEST_F(ApiServerTest, AFileIsUploadedIntoTheOwnersVolumeOnly) {
  ASSERT_EQ(call("POST", "/api/v1/volumes", bob_, R"({"name": "bobs"})").first, 201);
  ASSERT_EQ(call("POST", "/api/v1/volumes", admin_, R"({"name": "admv"})").first, 201);
  const std::string bytes(10000, 'x');  // over max_body_bytes, under max_upload_bytes
  auto [status, file] = call("PUT", "/api/v1/volumes/bobs/files?path=data/a%20b.txt", bob_, bytes);
  ASSERT_EQ(status, 200) << file.dump();
  EXPECT_EQ(file, (json{{"volume", "bobs"}, {"path", "data/a b.txt"}, {"bytes", 10000}}));
  EXPECT_EQ(std::filesystem::file_size(dir_ / "volumes/bobs/data/a b.txt"), 10000u);
  // The admin may upload into it; another user's volume is missing.
  EXPECT_EQ(call("PUT", "/api/v1/volumes/bobs/files?path=by-admin", admin_, "a").first, 200);
  expect_refused(call("PUT", "/api/v1/volumes/admv/files?path=x", bob_, "a"), 404, "name");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "volumes/admv/x"));
  expect_refused(call("PUT", "/api/v1/volumes/none/files?path=x", bob_, "a"), 404, "name");
}

TEST_F(ApiServerTest, AnUploadsPathAndBodyAreHostile) {
  ASSERT_EQ(call("POST", "/api/v1/volumes", bob_, R"({"name": "bobs"})").first, 201);
  for (const std::string path : {"..%2Fescape", "%2Fetc%2Fpasswd", "a%2F..%2F..%2Fescape", "a%0Ab", "a%00b", "a//b", ""})
    expect_refused(call("PUT", "/api/v1/volumes/bobs/files?path=" + path, bob_, "a"), 400, "path");
  expect_refused(call("PUT", "/api/v1/volumes/bobs/files?path=%FF", bob_, "a"), 400, "path");
  expect_refused(call("PUT", "/api/v1/volumes/bobs/files", bob_, "a"), 400, "path");
  expect_refused(call("PUT", "/api/v1/volumes/bobs/files?path=a&path=b", bob_, "a"), 400, "path");
  expect_refused(call("PUT", "/api/v1/volumes/bobs/files?path=a&mode=777", bob_, "a"), 400, "mode");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "volumes/escape"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "escape"));
  std::filesystem::create_directory_symlink(dir_, dir_ / "volumes/bobs/up");
  expect_refused(call("PUT", "/api/v1/volumes/bobs/files?path=up/edtd.db", bob_, "a"), 409, "path");
  EXPECT_GT(std::filesystem::file_size(dir_ / "edtd.db"), 1u);
  // Over the upload limit: 413 before the body is read, and no file.
  expect_refused(call("PUT", "/api/v1/volumes/bobs/files?path=big", bob_, std::string(65537, 'x')), 413, "");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "volumes/bobs/big"));
  // Without a valid token only max_body_bytes is read: 413 past it, 401 under.
  expect_refused(call("PUT", "/api/v1/volumes/bobs/files?path=big", "edt_wrong", std::string(5000, 'x')), 413, "");
  expect_refused(call("PUT", "/api/v1/volumes/bobs/files?path=big", "edt_wrong", "x"), 401, "Authorization");
  // The raised limit is the upload route's alone.
  expect_refused(call("POST", "/api/v1/volumes", bob_, std::string(5000, ' ')), 413, "");
}

TEST_F(ApiServerTest, ADirectoryRemovedDuringAnUploadIs409) {
  ASSERT_EQ(call("POST", "/api/v1/volumes", bob_, R"({"name": "bobs"})").first, 201);
  struct Unhook {
    ~Unhook() { set_volume_upload_hook_for_testing(nullptr); }
  } unhook;
  const auto race = dir_ / "volumes/bobs/race";
  set_volume_upload_hook_for_testing([&](const std::string&) { std::filesystem::remove_all(race); });
  auto got = call("PUT", "/api/v1/volumes/bobs/files?path=race/x", bob_, std::string(10000, 'x'));
  expect_refused(got, 409, "path");
  EXPECT_NE(got.second["error"]["message"].get<std::string>().find("during the upload"), std::string::npos)
      << got.second.dump();
  EXPECT_FALSE(std::filesystem::exists(race));
  set_volume_upload_hook_for_testing(nullptr);
  EXPECT_EQ(call("PUT", "/api/v1/volumes/bobs/files?path=race/x", bob_, "x").first, 200);
}

TEST_F(ApiServerTest, AVolumesFilesAreListedDownloadedAndDeleted) {
  ASSERT_EQ(call("POST", "/api/v1/volumes", bob_, R"({"name": "bobs"})").first, 201);
  ASSERT_EQ(call("PUT", "/api/v1/volumes/bobs/files?path=data/a.txt", bob_, "hello").first, 200);
  ASSERT_EQ(call("PUT", "/api/v1/volumes/bobs/files?path=data/sub/b.txt", bob_, "xy").first, 200);
  auto [status, top] = call("GET", "/api/v1/volumes/bobs/files", bob_);
  ASSERT_EQ(status, 200) << top.dump();
  EXPECT_EQ(top["path"], "");
  ASSERT_EQ(top["entries"].size(), 1u);
  EXPECT_EQ(top["entries"][0]["name"], "data");
  EXPECT_EQ(top["entries"][0]["type"], "directory");
  auto data = call("GET", "/api/v1/volumes/bobs/files?path=data", bob_).second["entries"];
  ASSERT_EQ(data.size(), 2u);
  EXPECT_EQ(data[0]["name"], "a.txt");
  EXPECT_EQ(data[0]["bytes"], 5);
  EXPECT_EQ(data[1]["type"], "directory");
  httplib::Client c("127.0.0.1", port_);
  auto got = c.Get("/api/v1/volumes/bobs/files/content?path=data/a.txt", {{"Authorization", "Bearer " + bob_}});
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 200);
  EXPECT_EQ(got->body, "hello");
  EXPECT_EQ(got->get_header_value("Content-Disposition"), "attachment; filename*=UTF-8''a.txt");
  // A directory goes whole; the admin may; another user's volume is missing.
  EXPECT_EQ(call("GET", "/api/v1/volumes/bobs/files?path=data", admin_).first, 200);
  ASSERT_EQ(call("POST", "/api/v1/volumes", admin_, R"({"name": "admv"})").first, 201);
  expect_refused(call("GET", "/api/v1/volumes/admv/files", bob_), 404, "name");
  expect_refused(call("GET", "/api/v1/volumes/admv/files/content?path=x", bob_), 404, "name");
  expect_refused(call("DELETE", "/api/v1/volumes/admv/files?path=x", bob_), 404, "name");
  auto [deleted, body] = call("DELETE", "/api/v1/volumes/bobs/files?path=data", bob_);
  ASSERT_EQ(deleted, 200) << body.dump();
  EXPECT_EQ(body, (json{{"deleted", "data"}, {"entries", 4}}));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "volumes/bobs/data"));
  EXPECT_TRUE(std::filesystem::is_directory(dir_ / "volumes/bobs"));
}

TEST_F(ApiServerTest, ReadingAndDeletingAVolumesFilesRefuseHostileInput) {
  ASSERT_EQ(call("POST", "/api/v1/volumes", bob_, R"({"name": "bobs"})").first, 201);
  ASSERT_EQ(call("PUT", "/api/v1/volumes/bobs/files?path=a.txt", bob_, "a").first, 200);
  for (const std::string route : {"files?path=", "files/content?path=", "DELETE files?path="}) {
    const bool del = route.starts_with("DELETE ");
    const std::string base = "/api/v1/volumes/bobs/" + (del ? route.substr(7) : route);
    const std::string method = del ? "DELETE" : "GET";
    for (const std::string path : {"..", "..%2Fescape", "%2Fetc%2Fpasswd", "a%2F..%2F..%2Fescape", "a%0Ab", "a//b"})
      expect_refused(call(method, base + path, bob_), 400, "path");
    expect_refused(call(method, base + "a.txt&path=b", bob_), 400, "path");
    expect_refused(call(method, base + "a.txt&mode=1", bob_), 400, "mode");
    expect_refused(call(method, base + "missing.txt", bob_), 404, "path");
  }
  expect_refused(call("GET", "/api/v1/volumes/bobs/files/content", bob_), 400, "path");
  expect_refused(call("DELETE", "/api/v1/volumes/bobs/files", bob_), 400, "path");
  // A link out of the volume is never followed: not on the way, not at the end.
  std::filesystem::create_directory_symlink(dir_, dir_ / "volumes/bobs/up");
  std::filesystem::create_symlink(dir_ / "edtd.db", dir_ / "volumes/bobs/db");
  expect_refused(call("GET", "/api/v1/volumes/bobs/files?path=up", bob_), 409, "path");
  expect_refused(call("GET", "/api/v1/volumes/bobs/files/content?path=up/edtd.db", bob_), 409, "path");
  expect_refused(call("GET", "/api/v1/volumes/bobs/files/content?path=db", bob_), 409, "path");
  expect_refused(call("DELETE", "/api/v1/volumes/bobs/files?path=up/edtd.db", bob_), 409, "path");
  expect_refused(call("GET", "/api/v1/volumes/bobs/files/content?path=.", bob_), 400, "path");
  auto links = call("GET", "/api/v1/volumes/bobs/files", bob_).second["entries"];
  ASSERT_EQ(links.size(), 3u) << links.dump();
  EXPECT_EQ(links[1]["type"], "link");
  // Deleting a link takes the link, never what it points at.
  EXPECT_EQ(call("DELETE", "/api/v1/volumes/bobs/files?path=up", bob_).first, 200);
  EXPECT_EQ(call("DELETE", "/api/v1/volumes/bobs/files?path=db", bob_).first, 200);
  EXPECT_TRUE(std::filesystem::exists(dir_ / "edtd.db"));
  EXPECT_TRUE(std::filesystem::is_directory(dir_ / "volumes"));
  // A body on these routes is held to max_body_bytes.
  httplib::Client c("127.0.0.1", port_);
  auto big = c.Delete("/api/v1/volumes/bobs/files?path=a.txt", {{"Authorization", "Bearer " + bob_}},
                      std::string(5000, 'x'), "application/octet-stream");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_TRUE(std::filesystem::exists(dir_ / "volumes/bobs/a.txt"));
}

TEST_F(ApiServerTest, AJobsDirectoryIsAnAbsoluteContainerPath) {
  ASSERT_EQ(call("POST", "/api/v1/clusters", bob_, R"({"name": "a", "framework": "horovod", "containers": 2})").first,
            201);
  for (const std::string cwd : {"data", "/root/../etc", "/root//data", "/root/data/", "/a\\u0001b", ""})
    expect_refused(call("POST", "/api/v1/clusters/a/jobs", bob_, R"({"command": "ls", "cwd": ")" + cwd + "\"}"), 422,
                   "cwd");
  expect_refused(call("POST", "/api/v1/clusters/a/jobs", bob_, R"({"command": "ls", "cwd": 7})"), 422, "cwd");
}

TEST_F(ApiServerTest, EventsAreFilteredByTypeAndSince) {
  ASSERT_EQ(call("POST", "/api/v1/clusters", bob_, R"({"name": "a", "framework": "horovod", "containers": 2})").first,
            201);
  ASSERT_EQ(call("PATCH", "/api/v1/clusters/a", bob_, R"({"containers": 3})").first, 200);
  auto all = call("GET", "/api/v1/clusters/a/events", bob_).second["events"];
  ASSERT_EQ(all.size(), 2u);
  auto scaling = call("GET", "/api/v1/clusters/a/events?type=Scaling", bob_).second["events"];
  ASSERT_EQ(scaling.size(), 1u);
  EXPECT_EQ(scaling[0], all[1]);
  const std::string last = all[1]["time"];
  auto since = call("GET", "/api/v1/clusters/a/events?since=" + last, bob_).second["events"];
  ASSERT_GE(since.size(), 1u);
  EXPECT_EQ(since.back(), all[1]);
  EXPECT_TRUE(call("GET", "/api/v1/clusters/a/events?since=2999-01-01T00:00:00Z", bob_).second["events"].empty());
  expect_refused(call("GET", "/api/v1/clusters/a/events?type=scaling", bob_), 400, "type");
  expect_refused(call("GET", "/api/v1/clusters/a/events?since=yesterday", bob_), 400, "since");
  expect_refused(call("GET", "/api/v1/clusters/a/events?state=Running", bob_), 400, "state");
  // Who may see the cluster is checked before the filter.
  expect_refused(call("GET", "/api/v1/clusters/none/events?type=bad", bob_), 404, "name");
}

}  // namespace
}  // namespace edt::control

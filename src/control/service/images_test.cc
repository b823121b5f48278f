// Service::import_image and delete_image over a real image store, with
// images and hostile layers made by hand (image/test_images.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "control/service/service.h"
#include "image/test_images.h"

namespace edt::control {
namespace {

namespace it = edt::image::testing;

class ImageServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServiceOptions options{AddressRange::parse("127.91.0.0/29").value(), (dir_.path() + "/data"),
                           [](const std::string&) {}};
    options.image_store = dir_.path() + "/data/images";
    db_ = Database::open(dir_.path() + "/edtd.db").value();
    service_ = std::make_unique<Service>(db_.get(), options);
    ASSERT_TRUE(service_->set_inventory({"edt", "/", {"horovod"}, true}, {}).is_ok());
    admin_ = *service_->authenticate(*service_->ensure_admin().value());
    ASSERT_TRUE(service_->create_user(admin_, "alice").is_ok());
  }
  // An OCI layout of one layer (make_config's Env, WorkingDir /work, User
  // 1000:1000, label org.edt.frameworks=torch).
  std::string layout(const std::string& name, std::vector<it::TarEntry> entries) {
    const std::string at = dir_.path() + "/" + name;
    std::vector<it::Layer> layers = {it::make_layer(entries)};
    it::write_oci_layout(at, layers, name);
    return at;
  }
  size_t store_entries(const std::string& sub) { return it::count_entries(dir_.path() + "/data/images/" + sub); }

  it::ScratchDir dir_{"edt-image-service"};
  std::unique_ptr<Database> db_;
  std::unique_ptr<Service> service_;
  User admin_;
  User alice_{"alice", false};
};

TEST_F(ImageServiceTest, ImportsALayoutAsAnImageWhoseRootIsTheStores) {
  const std::string src = layout("small", {it::dir("usr"), it::dir("etc"), it::file("usr/hello", "hi\n")});
  auto image = service_->import_image(admin_, {"small", src, {}});
  ASSERT_TRUE(image.is_ok()) << image.status().message();
  // The label says "torch", a library and no edt framework: horovod, edt's launcher.
  EXPECT_EQ(image->frameworks, std::vector<std::string>{"horovod"});
  EXPECT_EQ(image->env, (std::vector<std::string>{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}));
  EXPECT_EQ(image->working_dir, "/work");
  EXPECT_EQ(image->user, "1000:1000");
  EXPECT_EQ(image->labels.at("org.edt.frameworks"), "torch");
  EXPECT_EQ(image->source, src);
  EXPECT_TRUE(image->stored());
  EXPECT_GT(image->size_bytes, 0u);
  EXPECT_EQ(it::read_bytes(image->root + "/usr/hello"), "hi\n");
  auto listed = service_->images();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[1].name, "small");
  EXPECT_EQ(listed[1].digest, image->digest);
  EXPECT_EQ(listed[1].root, image->root);
}

// An import never replaces an image: containers may be using its root.
TEST_F(ImageServiceTest, AnImportOverAnExistingImageIsRefused) {
  const std::string src = layout("small", {it::dir("usr"), it::dir("etc")});
  ASSERT_TRUE(service_->import_image(admin_, {"small", src, {}}).is_ok());
  auto again = service_->import_image(admin_, {"small", src, {}});
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition) << again.status().message();
  EXPECT_NE(again.status().message().find("image small exists"), std::string::npos) << again.status().message();
  EXPECT_EQ(service_->import_image(admin_, {"edt", src, {}}).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(service_->images().size(), 2u);
}

TEST_F(ImageServiceTest, OnlyAnAdminImportsOrDeletes) {
  const std::string src = layout("small", {it::file("a", "a")});
  EXPECT_EQ(service_->import_image(alice_, {"small", src, {}}).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(service_->delete_image(alice_, "edt").status().code(), StatusCode::kPermissionDenied);
}

TEST_F(ImageServiceTest, BadSourcesAreRefusedAndLeaveNothing) {
  const std::string not_archive = dir_.path() + "/notes.txt";
  it::write_bytes(not_archive, "not an archive");
  const std::string hostile = layout("bad", {it::file("ok", "fine"), it::file("../escape", "x")});
  const std::string linked = layout("linked", {it::dir("etc"), it::symlink("usr", "/usr")});
  for (const std::string& path : {dir_.path() + "/missing.tar", not_archive, hostile, std::string("relative/x.tar"), linked,
                                  dir_.path() + "/data/../notes.txt", dir_.path() + "/data"}) {
    auto r = service_->import_image(admin_, {"img", path, {}});
    ASSERT_FALSE(r.is_ok()) << path;
    EXPECT_TRUE(r.status().code() == StatusCode::kInvalidArgument ||
                r.status().code() == StatusCode::kPermissionDenied)
        << path << ": " << r.status().message();
  }
  auto r = service_->import_image(admin_, {"img", hostile, {}});
  EXPECT_NE(r.status().message().find("climbs with '..'"), std::string::npos) << r.status().message();
  EXPECT_EQ(service_->images().size(), 1u);
  EXPECT_EQ(store_entries("images"), 0u);
  EXPECT_EQ(store_entries("layers/sha256"), 0u);
  EXPECT_EQ(store_entries("roots/sha256"), 0u);
  EXPECT_EQ(store_entries("blobs/sha256"), 0u);
}

TEST_F(ImageServiceTest, TheRequestsFrameworksWin) {
  auto image = service_->import_image(admin_, {"labelled", layout("labelled", {it::file("usr/a", "a"), it::file("etc/a", "a")}), {"deepspeed"}});
  ASSERT_TRUE(image.is_ok()) << image.status().message();
  EXPECT_EQ(image->frameworks, std::vector<std::string>{"deepspeed"});
}

TEST_F(ImageServiceTest, DeleteIsRefusedWhileAClusterUsesItThenFreesTheStore) {
  const std::string src = layout("small", {it::file("usr/a", "a"), it::file("etc/a", "a")});
  ASSERT_TRUE(service_->import_image(admin_, {"small", src, {}}).is_ok());
  ClusterSpec spec;
  spec.name = "c";
  spec.image = "small";
  spec.framework = "horovod";
  spec.containers = 2;
  auto c = service_->create_cluster(alice_, spec);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(service_->delete_image(admin_, "small").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(service_->delete_image(admin_, "edt").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(service_->delete_image(admin_, "nope").status().code(), StatusCode::kNotFound);
  // As the reconciler ends a deleted cluster: its containers, then it.
  for (const auto& container : c->containers) ASSERT_TRUE(db_->lock().delete_container(container.name).is_ok());
  ASSERT_TRUE(db_->lock().delete_cluster("c").is_ok());
  ASSERT_TRUE(service_->delete_image(admin_, "small").is_ok());
  EXPECT_EQ(service_->images().size(), 1u);
  EXPECT_EQ(store_entries("roots/sha256"), 0u);
  EXPECT_EQ(store_entries("layers/sha256"), 0u);
}

TEST(ImageEnvTest, TheImagesEnvIsUnderEdtsAndPathKeepsEdtsToolsFirst) {
  Image image;
  image.env = {"PATH=/opt/conda/bin:/usr/bin:/bin", "LANG=C.UTF-8", "PYTHONPATH=/app"};
  auto env = image_base_env(image, {{"PATH", "/opt/edt/bin:/usr/local/bin:/usr/bin:/bin"}, {"PYTHONPATH", "/edt"}});
  EXPECT_EQ(env["PATH"], "/opt/edt/bin:/opt/conda/bin:/usr/bin:/bin");
  EXPECT_EQ(env["LANG"], "C.UTF-8");
  EXPECT_EQ(env["PYTHONPATH"], "/edt:/app");
}

// Pulls: the admin's (a user's would make edtd fetch any address for them);
// what is refused before a byte is fetched. The pulls themselves, from a
// real registry, are tests/images.
TEST_F(ImageServiceTest, OnlyTheAdminPullsAndBadRequestsAreRefusedFirst) {
  auto by_user = service_->pull_image(alice_, {"", "127.0.0.1:1/x/y:1", "", "", {}});
  EXPECT_EQ(by_user.status().code(), StatusCode::kPermissionDenied);
  auto bad = service_->pull_image(admin_, {"", "Bad/Reference", "", "", {}});
  EXPECT_EQ(bad.status().field(), "reference") << bad.status().message();
  auto half = service_->pull_image(admin_, {"", "127.0.0.1:1/x/y:1", "u", "", {}});
  EXPECT_EQ(half.status().field(), "password") << half.status().message();
  auto taken = service_->pull_image(admin_, {"edt", "127.0.0.1:1/x/y:1", "", "", {}});
  EXPECT_EQ(taken.status().code(), StatusCode::kFailedPrecondition);
  // A repository in capitals is no reference; an unreachable registry is the reference's fault.
  auto unreachable = service_->pull_image(admin_, {"", "127.0.0.1:1/team/Py-torch:24.05_py3", "u", "p", {}});
  EXPECT_EQ(unreachable.status().field(), "reference");
  auto down = service_->pull_image(admin_, {"", "127.0.0.1:1/team/pytorch:24.05-py3", "u", "hunter2", {}});
  EXPECT_EQ(down.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(down.status().message().find("hunter2"), std::string::npos) << down.status().message();
  EXPECT_EQ(service_->images().size(), 1u);
}

}  // namespace
}  // namespace edt::control

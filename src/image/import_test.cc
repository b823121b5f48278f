// Imports of OCI layouts (directories and tars, indexes nested and
// multi-platform) and of docker save archives, and the sources that lie.
#include "image/import.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "image/test_images.h"

namespace edt::image {
namespace {

namespace fs = std::filesystem;
using namespace testing;

class ImageImportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreLimits limits;
    limits.durable = false;
    store_ = std::make_unique<Store>(Store::open(dir_ + "/store", limits).value());
  }
  size_t count(const std::string& sub) { return count_entries(dir_ + "/store/" + sub); }
  std::vector<Layer> layers() {
    return {make_layer({file("usr/bin/python3", "py")}, Compression::kGzip),
            make_layer({file("opt/app", "app"), file("usr/bin/.wh.python3", "")}, Compression::kZstd),
            make_layer({file("etc/hostname", "h")}, Compression::kNone)};
  }
  ScratchDir scratch_{"edt-import-test"};
  std::string dir_ = scratch_.path();
  std::unique_ptr<Store> store_;
};

TEST_F(ImageImportTest, OciLayoutDirectoryResolvesANestedIndexToAmd64) {
  Digest amd64 = write_oci_layout(dir_ + "/layout", layers(), "registry.example/app:1", true);
  auto record = import_path(*store_, dir_ + "/layout", {});
  ASSERT_TRUE(record.is_ok()) << record.status().to_string();
  EXPECT_EQ(record->name, "registry.example/app:1");
  EXPECT_EQ(record->manifest, amd64);
  EXPECT_EQ(record->layers.size(), 3u);
  EXPECT_EQ(record->config_fields.labels.at("org.edt.frameworks"), "torch");
  EXPECT_TRUE(fs::exists(record->root + "/opt/app"));
  EXPECT_FALSE(fs::exists(record->root + "/usr/bin/python3"));
  // Only what the amd64 image uses is kept: 3 layers, config, manifest.
  EXPECT_EQ(count("blobs/sha256"), 5u);
  auto renamed = import_path(*store_, dir_ + "/layout", {"mine:latest"});
  ASSERT_TRUE(renamed.is_ok());
  EXPECT_EQ(store_->list().value().size(), 2u);
  EXPECT_EQ(count("layers/sha256"), 3u);
}

TEST_F(ImageImportTest, OciLayoutTarsPlainGzipAndZstd) {
  write_oci_layout(dir_ + "/layout", layers(), "app:1", true);
  for (Compression c : {Compression::kNone, Compression::kGzip, Compression::kZstd}) {
    const std::string tar = dir_ + "/layout.tar";
    write_bytes(tar, tar_of_dir(dir_ + "/layout", c));
    auto record = import_path(*store_, tar, {"app:" + std::to_string(static_cast<int>(c))});
    ASSERT_TRUE(record.is_ok()) << record.status().to_string();
    EXPECT_TRUE(fs::exists(record->root + "/etc/hostname"));
  }
  EXPECT_EQ(count("blobs/sha256"), 5u);  // the arm64 image's blobs were freed
  EXPECT_EQ(count("tmp"), 0u);
}

TEST_F(ImageImportTest, DockerSaveArchiveWithALinkedLayer) {
  write_bytes(dir_ + "/saved.tar", make_docker_archive(layers(), "docker.io/library/app:2"));
  auto record = import_path(*store_, dir_ + "/saved.tar", {});
  ASSERT_TRUE(record.is_ok()) << record.status().to_string();
  EXPECT_EQ(record->name, "docker.io/library/app:2");
  EXPECT_EQ(record->layers.size(), 4u);
  EXPECT_EQ(record->config_fields.working_dir, "/work");
  EXPECT_TRUE(fs::exists(record->root + "/opt/app"));
  auto other = import_path(*store_, dir_ + "/saved.tar", {"not-a-tag-in-it"});
  EXPECT_TRUE(other.is_ok()) << other.status().to_string();  // the only image, renamed
}

TEST_F(ImageImportTest, AManifestWhoseSizesLieIsRefusedAndLeavesNoImage) {
  for (int64_t delta : {-7, 7}) {
    SCOPED_TRACE(delta);
    fs::remove_all(dir_ + "/layout");
    write_oci_layout(dir_ + "/layout", layers(), "lies:1", false, delta);
    auto from_dir = import_path(*store_, dir_ + "/layout", {});
    ASSERT_FALSE(from_dir.is_ok());
    EXPECT_NE(from_dir.status().message().find(delta < 0 ? "longer than" : "shorter than"), std::string::npos)
        << from_dir.status().message();
    EXPECT_NE(from_dir.status().message().find(sha256_of(layers()[0].blob).str()), std::string::npos);
    write_bytes(dir_ + "/layout.tar", tar_of_dir(dir_ + "/layout"));
    auto from_tar = import_path(*store_, dir_ + "/layout.tar", {});
    ASSERT_FALSE(from_tar.is_ok());
    EXPECT_NE(from_tar.status().message().find("the manifest says"), std::string::npos) << from_tar.status().message();
    EXPECT_EQ(count("images") + count("blobs/sha256") + count("tmp"), 0u);
  }
}

// A layout's blobs, but the network breaks at the blob `broken` names.
class BreakingSource : public BlobSource {
 public:
  BreakingSource(std::string dir, Digest broken) : dir_(std::move(dir)), broken_(std::move(broken)) {}
  Status fetch(Store& store, const Store::Lock& lock, const Descriptor& d, const std::string& what) override {
    if (store.has_blob(d.digest)) return Status::ok();
    if (d.digest == broken_) return unavailable(what + ": the network broke");
    ++fetched;
    const std::string bytes = read_bytes(dir_ + "/blobs/sha256/" + d.digest.hex);
    return store.put_blob(lock, bytes, d.digest, what).status();
  }
  int fetched = 0;

 private:
  std::string dir_;
  Digest broken_;
};

// The layers are fetched on a thread of their own while those stored are
// unpacked: the first error in layer order is the import's; what was
// fetched and unpacked whole before it stays for the retry, and a layer
// refused when unpacked leaves no layer after it unpacked.
TEST_F(ImageImportTest, LayersUnpackAsTheyArriveAndTheFirstErrorWins) {
  write_oci_layout(dir_ + "/layout", layers(), "app:1");
  auto index = parse_index(read_bytes(dir_ + "/layout/index.json"), "index.json").value();
  auto lock = store_->lock().value();
  BreakingSource broken(dir_ + "/layout", sha256_of(layers()[2].blob));
  auto failed = import_from_index(*store_, lock, broken, index, {});
  ASSERT_FALSE(failed.is_ok());
  EXPECT_NE(failed.status().message().find("layers[2]: the network broke"), std::string::npos)
      << failed.status().message();
  EXPECT_EQ(count("images"), 0u);
  EXPECT_EQ(count("layers/sha256"), 2u);
  BreakingSource whole(dir_ + "/layout", Digest{});
  auto retried = import_from_index(*store_, lock, whole, index, {});
  ASSERT_TRUE(retried.is_ok()) << retried.status().to_string();
  EXPECT_EQ(whole.fetched, 1);  // layer 2 only
  EXPECT_TRUE(fs::exists(retried->root + "/etc/hostname"));

  std::vector<Layer> hostile = layers();
  hostile[0] = make_layer({file("../escape", "x")}, Compression::kGzip);
  StoreLimits limits;
  limits.durable = false;
  store_ = std::make_unique<Store>(Store::open(dir_ + "/store2", limits).value());
  fs::remove_all(dir_ + "/layout");
  write_oci_layout(dir_ + "/layout", hostile, "hostile:1");
  auto refused = import_path(*store_, dir_ + "/layout", {});
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find(sha256_of(hostile[0].blob).str()), std::string::npos)
      << refused.status().message();
  // Layers unpacked beside the hostile one may be kept, whole; nothing of it is.
  EXPECT_EQ(count_entries(dir_ + "/store2/images") + count_entries(dir_ + "/store2/tmp"), 0u);
  EXPECT_FALSE(fs::exists(dir_ + "/store2/layers/sha256/" + hostile[0].diff_id.hex));
  for (const auto& layer : fs::directory_iterator(dir_ + "/store2/layers/sha256")) {
    EXPECT_TRUE(fs::exists(layer.path() / "layer.json")) << layer.path();
  }
}

TEST_F(ImageImportTest, LayersUnpackedAtOnceShareTheImageBound) {
  StoreLimits limits;
  limits.durable = false;
  limits.max_image_bytes = 100 << 10;
  Store store = Store::open(dir_ + "/bounded", limits).value();
  Layer a = make_layer({file("a", std::string(64 << 10, 'a'))});
  Layer b = make_layer({file("b", std::string(64 << 10, 'b'))});
  write_oci_layout(dir_ + "/over", {a, b}, "over:1");
  auto over = import_path(store, dir_ + "/over", {});
  ASSERT_FALSE(over.is_ok());
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted) << over.status().to_string();
  EXPECT_NE(over.status().message().find("bound of 102400 bytes"), std::string::npos) << over.status().message();
  EXPECT_EQ(count_entries(dir_ + "/bounded/images") + count_entries(dir_ + "/bounded/tmp"), 0u);
}

TEST_F(ImageImportTest, ALayerTheImageRepeatsIsUnpackedOnce) {
  const Layer base = layers()[0];
  const Layer app = layers()[1];
  write_oci_layout(dir_ + "/twice", {base, app, base}, "twice:1");
  auto twice = import_path(*store_, dir_ + "/twice", {});
  ASSERT_TRUE(twice.is_ok()) << twice.status().to_string();
  EXPECT_EQ(twice->layers.size(), 3u);
  EXPECT_EQ(count("layers/sha256"), 2u);
  EXPECT_EQ(count("tmp"), 0u);
  EXPECT_TRUE(fs::exists(twice->root + "/usr/bin/python3"));  // the last layer puts back what the second hid
}

TEST_F(ImageImportTest, ClearErrorsForWhatIsNoImage) {
  write_oci_layout(dir_ + "/unnamed", layers(), "");
  auto unnamed = import_path(*store_, dir_ + "/unnamed", {});
  EXPECT_NE(unnamed.status().fix().find("--name"), std::string::npos) << unnamed.status().to_string();
  write_bytes(dir_ + "/other.tar", make_tar({file("readme", "hi")}));
  auto other = import_path(*store_, dir_ + "/other.tar", {});
  EXPECT_NE(other.status().message().find("neither an OCI layout"), std::string::npos) << other.status().to_string();
  write_bytes(dir_ + "/junk", std::string(2048, 'j'));
  EXPECT_FALSE(import_path(*store_, dir_ + "/junk", {}).is_ok());
  EXPECT_EQ(import_path(*store_, dir_ + "/missing", {}).status().code(), StatusCode::kIoError);
  EXPECT_EQ(count("images") + count("blobs/sha256"), 0u);
}

TEST_F(ImageImportTest, DocumentsOfTheWrongShapeAreErrorsNotCrashes) {
  for (const char* manifest : {R"([{"Config": 5, "Layers": "x", "RepoTags": null}])", R"({"a": 1})", R"([7])", "[]"}) {
    write_bytes(dir_ + "/odd.tar", make_tar({file("manifest.json", manifest)}));
    auto odd = import_path(*store_, dir_ + "/odd.tar", {"odd:1"});
    EXPECT_FALSE(odd.is_ok()) << manifest;
  }
  for (const char* index : {R"({"manifests": 3})", R"({"manifests": [{"digest": 1, "size": "x"}]})", "[]",
                            R"({"manifests": [{"digest": "sha256:../../etc", "size": 1}]})"}) {
    write_bytes(dir_ + "/odd/index.json", index);
    auto odd = import_path(*store_, dir_ + "/odd", {"odd:1"});
    EXPECT_FALSE(odd.is_ok()) << index;
  }
  write_bytes(dir_ + "/odd/index.json", R"({"manifests": [{"digest": "sha256:)" + std::string(64, 'a') +
                                            R"(", "size": 1099511627776}]})");
  EXPECT_EQ(import_path(*store_, dir_ + "/odd", {"odd:1"}).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(count("images"), 0u);
}

TEST(ImagePickPlatform, NamesThePlatformsThereAre) {
  Descriptor arm;
  arm.os = "linux";
  arm.architecture = "arm64";
  auto picked = pick_platform({arm}, "index.json");
  ASSERT_FALSE(picked.is_ok());
  EXPECT_NE(picked.status().message().find("it has: linux/arm64"), std::string::npos);
}

}  // namespace
}  // namespace edt::image

// The store: images from blobs, whiteouts, sharing and freeing of layers,
// sizes and digests that lie, bounds, and kill -9 at any point of a write.
#include "image/store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "image/test_images.h"

namespace edt::image {
namespace {

namespace fs = std::filesystem;
using namespace testing;

class ImageStoreTest : public ::testing::Test {
 protected:
  Store open(StoreLimits limits = {}) {
    limits.durable = false;  // the tests' bytes need not reach the disk
    auto store = Store::open(dir_ + "/store", limits);
    EXPECT_TRUE(store.is_ok()) << store.status().to_string();
    return std::move(store).value();
  }
  size_t count(const std::string& sub) { return count_entries(dir_ + "/store/" + sub); }
  std::string read(const std::string& path) { return read_bytes(path); }
  ScratchDir scratch_{"edt-store-test"};
  std::string dir_ = scratch_.path();
};

// Puts an image's blobs into the store; its manifest's digest.
Digest put_image(Store& store, const Store::Lock& lock, const std::vector<Layer>& layers,
                 const std::map<std::string, std::string>& labels = {}) {
  std::vector<Descriptor> descriptors;
  for (const Layer& l : layers) {
    Descriptor d;
    d.media_type = l.media_type;
    d.digest = store.put_blob(lock, l.blob, sha256_of(l.blob), "layer").value();
    d.size = l.blob.size();
    descriptors.push_back(d);
  }
  Descriptor config;
  config.media_type = kOciConfig;
  const std::string config_json = make_config(layers, labels);
  config.digest = store.put_blob(lock, config_json, std::nullopt, "config").value();
  config.size = config_json.size();
  return store.put_blob(lock, make_manifest(config, descriptors), std::nullopt, "manifest").value();
}

Layer base_layer() { return make_layer({dir("usr/bin"), file("usr/bin/python3", "python"), file("etc/os-release", "deb")}); }

TEST_F(ImageStoreTest, CommitsAnImageWithItsConfigAndRoot) {
  Store store = open();
  auto lock = store.lock().value();
  Layer work = make_layer({file("work/train.py", "print(1)"), dir("locked", 0), file("locked/key", "k", 0600)});
  Digest manifest = put_image(store, lock, {base_layer(), work},
                              {{"org.edt.frameworks", "torch"}});
  auto record = store.commit_image(lock, "example.com/team/torch:1", manifest);
  ASSERT_TRUE(record.is_ok()) << record.status().to_string();
  EXPECT_EQ(read(record->root + "/usr/bin/python3"), "python");
  EXPECT_EQ(read(record->root + "/work/train.py"), "print(1)");
  EXPECT_TRUE(fs::exists(record->root + "/locked/key"));
  const ImageConfig& c = record->config_fields;
  EXPECT_EQ(c.env, (std::vector<std::string>{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}));
  EXPECT_EQ(c.working_dir, "/work");
  EXPECT_EQ(c.user, "1000:1000");
  EXPECT_EQ(c.labels.at("org.edt.frameworks"), "torch");
  auto again = store.get("example.com/team/torch:1");
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again->manifest, manifest);
  EXPECT_EQ(again->config_fields.labels, c.labels);
  EXPECT_EQ(store.list().value().size(), 1u);
  EXPECT_EQ(store.get("nope").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store.commit_image(lock, "bad name", manifest).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ImageStoreTest, WhiteoutsAndOpaqueDirectoriesHideLowerLayers) {
  Store store = open();
  auto lock = store.lock().value();
  Layer lower = make_layer({file("a/x", "1"), file("a/y", "2"), file("b/z", "3"), file("c/w", "4"), file("d", "5")});
  Layer upper = make_layer({file("a/.wh.x", ""), file("b/.wh..wh..opq", ""), file("b/new", "6"), file(".wh.c", ""),
                            dir("d"), file("d/now-a-dir", "7")});
  auto record = store.commit_image(lock, "wh", put_image(store, lock, {lower, upper}));
  ASSERT_TRUE(record.is_ok()) << record.status().to_string();
  const std::string& root = record->root;
  EXPECT_FALSE(fs::exists(root + "/a/x"));
  EXPECT_EQ(read(root + "/a/y"), "2");
  EXPECT_FALSE(fs::exists(root + "/b/z"));
  EXPECT_EQ(read(root + "/b/new"), "6");
  EXPECT_FALSE(fs::exists(root + "/c"));
  EXPECT_EQ(read(root + "/d/now-a-dir"), "7");
  EXPECT_FALSE(fs::exists(root + "/b/.wh..wh..opq"));
  EXPECT_FALSE(fs::exists(root + "/a/.wh.x"));
}

TEST_F(ImageStoreTest, SharedLayersAreUnpackedOnceAndFreedWithTheLastImage) {
  Store store = open();
  auto lock = store.lock().value();
  Layer base = base_layer();
  ASSERT_TRUE(store.commit_image(lock, "a", put_image(store, lock, {base, make_layer({file("a", "a")})})).is_ok());
  auto b = store.commit_image(lock, "b", put_image(store, lock, {base, make_layer({file("b", "b")})}));
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(count("layers/sha256"), 3u);
  EXPECT_EQ(count("roots/sha256"), 2u);
  struct stat st;
  ASSERT_EQ(::stat((b->root + "/usr/bin/python3").c_str(), &st), 0);
  EXPECT_EQ(st.st_nlink, 3u);  // the layer's file and both roots: one copy on disk
  auto freed = store.remove(lock, "a");
  ASSERT_TRUE(freed.is_ok()) << freed.status().to_string();
  EXPECT_EQ(freed->layers, 1u);
  EXPECT_EQ(freed->roots, 1u);
  EXPECT_EQ(freed->blobs, 3u);  // a's layer, config, manifest
  EXPECT_EQ(read(b->root + "/usr/bin/python3"), "python");
  EXPECT_EQ(count("layers/sha256"), 2u);
  ASSERT_TRUE(store.remove(lock, "b").is_ok());
  EXPECT_EQ(count("layers/sha256") + count("roots/sha256") + count("blobs/sha256"), 0u);
  EXPECT_EQ(store.remove(lock, "b").status().code(), StatusCode::kNotFound);
}

TEST_F(ImageStoreTest, GcSparesTheRootOfARunningContainer) {
  Store store = open();
  auto lock = store.lock().value();
  auto a = store.commit_image(lock, "a", put_image(store, lock, {base_layer()}));
  ASSERT_TRUE(a.is_ok());
  ASSERT_TRUE(store.remove(lock, "a", {a->root}).is_ok());
  EXPECT_EQ(read(a->root + "/usr/bin/python3"), "python");  // its layer is gone, its files are not
  EXPECT_EQ(count("layers/sha256"), 0u);
  ASSERT_TRUE(store.gc(lock).is_ok());
  EXPECT_FALSE(fs::exists(a->root));
}

TEST_F(ImageStoreTest, BlobsThatLieAboutSizeOrDigestAreRefused) {
  Store store = open();
  auto lock = store.lock().value();
  const std::string bytes = "0123456789";
  auto longer = store.begin_blob(lock, sha256_of(bytes), 5, "layers[0]").value();
  Status status = longer.write(bytes.data(), bytes.size());
  EXPECT_NE(status.message().find("longer than the 5 bytes"), std::string::npos) << status.to_string();
  auto shorter = store.begin_blob(lock, sha256_of(bytes), 20, "layers[1]").value();
  ASSERT_TRUE(shorter.write(bytes.data(), bytes.size()).is_ok());
  EXPECT_NE(shorter.commit().status().message().find("shorter than the 20"), std::string::npos);
  auto wrong = store.put_blob(lock, bytes, sha256_of("other"), "layers[2]");
  EXPECT_NE(wrong.status().message().find("its content's digest is " + sha256_of(bytes).str()), std::string::npos)
      << wrong.status().to_string();
  StoreLimits small;
  small.layer.max_bytes = 4;
  Store bounded = open(small);
  EXPECT_EQ(bounded.put_blob(lock, bytes, std::nullopt, "x").status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(count("blobs/sha256"), 0u);
}

TEST_F(ImageStoreTest, AHostileLayerLeavesNoLayerNoRootNoRecord) {
  Store store = open();
  auto lock = store.lock().value();
  Layer evil = make_layer({symlink("etc", "/etc"), file("etc/passwd", "root::0:0::/:/bin/sh")});
  auto record = store.commit_image(lock, "evil", put_image(store, lock, {base_layer(), evil}));
  ASSERT_FALSE(record.is_ok());
  EXPECT_NE(record.status().message().find("layer " + sha256_of(evil.blob).str()), std::string::npos);
  EXPECT_NE(record.status().message().find("entry 'etc/passwd'"), std::string::npos) << record.status().message();
  EXPECT_EQ(count("layers/sha256"), 1u);  // the good base, reusable
  EXPECT_EQ(count("roots/sha256") + count("tmp") + count("images"), 0u);
}

TEST_F(ImageStoreTest, DiffIdsAndTheImageBoundAreChecked) {
  StoreLimits limits;
  limits.max_image_bytes = 12 << 10;
  Store store = open(limits);
  auto lock = store.lock().value();
  Layer a = make_layer({file("a", std::string(8 << 10, 'a'))});
  Layer b = make_layer({file("b", std::string(8 << 10, 'b'))});
  auto over = store.commit_image(lock, "big", put_image(store, lock, {a, b}));
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted) << over.status().to_string();
  Layer lying = b;
  lying.diff_id = sha256_of("another tar");
  auto mismatch = store.commit_image(lock, "lie", put_image(store, lock, {lying}));
  EXPECT_NE(mismatch.status().message().find("the image's config says"), std::string::npos)
      << mismatch.status().to_string();
}

// Every blob's content matches its name; every layer and root is whole;
// every record names what is there.
void expect_consistent(const std::string& root) {
  for (const auto& e : fs::directory_iterator(root + "/blobs/sha256")) {
    EXPECT_EQ(sha256_of(read_bytes(e.path())).hex, e.path().filename().string());
  }
  for (const auto& e : fs::directory_iterator(root + "/layers/sha256")) {
    EXPECT_TRUE(fs::exists(e.path() / "layer.json")) << e.path();
  }
  for (const auto& e : fs::directory_iterator(root + "/images")) {
    ASSERT_EQ(e.path().extension(), ".json") << e.path();
    auto record = nlohmann::json::parse(std::ifstream(e.path()));
    EXPECT_TRUE(fs::exists(record["root"].get<std::string>() + "/usr/bin/python3"));
  }
}

TEST_F(ImageStoreTest, KillNineAtAnyPointLeavesAConsistentStoreAndTheRetryWorks) {
  std::vector<Layer> layers = {base_layer()};
  for (int i = 0; i < 4; ++i) {
    std::vector<TarEntry> entries;
    for (int f = 0; f < 300; ++f) entries.push_back(file("l" + std::to_string(i) + "/f" + std::to_string(f), std::string(4096, 'x')));
    layers.push_back(make_layer(entries, Compression::kZstd));
  }
  for (int delay_us : {0, 1000, 3000, 6000, 10000, 20000, 40000}) {
    SCOPED_TRACE(delay_us);
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      Store store = open();
      auto lock = store.lock().value();
      bool ok = store.commit_image(lock, "img", put_image(store, lock, layers)).is_ok();
      ::_exit(ok ? 0 : 1);
    }
    ::usleep(delay_us);
    ::kill(child, SIGKILL);
    int wstatus = 0;
    ::waitpid(child, &wstatus, 0);
    Store store = open();
    auto lock = store.lock().value();  // empties tmp/
    EXPECT_EQ(count("tmp"), 0u);
    expect_consistent(dir_ + "/store");
    auto retry = store.commit_image(lock, "img2", put_image(store, lock, layers));
    ASSERT_TRUE(retry.is_ok()) << retry.status().to_string();
    expect_consistent(dir_ + "/store");
    ASSERT_TRUE(store.remove(lock, "img2").is_ok());
    (void)store.remove(lock, "img");
    EXPECT_EQ(count("blobs/sha256") + count("layers/sha256") + count("roots/sha256"), 0u);
  }
}

}  // namespace
}  // namespace edt::image

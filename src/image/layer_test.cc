// unpack_layer() on good layers (plain, gzip, zstd) and on hand-made hostile
// ones: each refused with the layer's digest and the entry named, and
// nothing written outside the destination.
#include "image/layer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "image/safe_fs.h"
#include "image/test_images.h"

namespace edt::image {
namespace {

namespace fs = std::filesystem;
using namespace testing;

class ImageLayerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<ScratchDir>("edt-layer-test");
    dir_ = scratch_->path();
    fs::create_directories(dir_ + "/dest");
    fs::create_directories(dir_ + "/outside");
  }
  void TearDown() override { scratch_.reset(); }

  Result<LayerStats> unpack(const std::string& blob, LayerLimits limits = {}) {
    write_bytes(dir_ + "/blob", blob);
    EDT_ASSIGN_OR_RETURN(UniqueFd dest, open_dir(dir_ + "/dest"));
    return unpack_layer(dir_ + "/blob", sha256_of(blob), dest.get(), limits);
  }
  std::string read(const std::string& path) { return read_bytes(dir_ + "/dest/" + path); }
  bool outside_empty() { return fs::is_empty(dir_ + "/outside"); }

  std::unique_ptr<ScratchDir> scratch_;
  std::string dir_;
};

std::vector<TarEntry> good_entries() {
  return {dir("./"),
          dir("usr/bin"),
          file("usr/bin/tool", "#!/bin/sh\necho hi\n", 0755),
          hardlink("usr/bin/tool2", "usr/bin/tool"),
          symlink("bin", "usr/bin"),
          symlink("etc/localtime", "/usr/share/zoneinfo/UTC"),
          symlink("usr/lib/up", "../bin/tool"),
          dir("ro", 0555),
          file("ro/file", "read only"),
          file("./dot/slash", "fine"),
          {"run/fifo", TarEntry::kFifo, "", "", 0600}};
}

TEST_F(ImageLayerTest, UnpacksPlainGzipAndZstdWithTheDiffIdOfTheTar) {
  for (Compression c : {Compression::kNone, Compression::kGzip, Compression::kZstd}) {
    TearDown();
    SetUp();
    auto stats = unpack(make_tar(good_entries(), c));
    ASSERT_TRUE(stats.is_ok()) << stats.status().to_string();
    EXPECT_EQ(stats->diff_id, sha256_of(make_tar(good_entries())));
    EXPECT_EQ(stats->entries, good_entries().size());
    EXPECT_EQ(read("usr/bin/tool"), "#!/bin/sh\necho hi\n");
    struct stat st;
    ASSERT_EQ(::stat((dir_ + "/dest/usr/bin/tool2").c_str(), &st), 0);
    EXPECT_EQ(st.st_nlink, 2u);
    EXPECT_EQ(st.st_mode & 07777, 0755u);
    EXPECT_EQ(st.st_mtime, 1700000000);
    EXPECT_EQ(fs::read_symlink(dir_ + "/dest/etc/localtime"), "/usr/share/zoneinfo/UTC");
    ASSERT_EQ(::stat((dir_ + "/dest/ro").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, ::geteuid() == 0 ? 0555u : 0755u);  // not root: the store keeps u+rwx
    EXPECT_EQ(read("dot/slash"), "fine");
    EXPECT_TRUE(fs::is_fifo(dir_ + "/dest/run/fifo"));
  }
}

std::string deep_path(int depth) {
  std::string path;
  for (int i = 0; i < depth; ++i) path += "d/";
  return path + "f";
}

struct Hostile {
  const char* what;
  std::vector<TarEntry> entries;
  const char* error;  // in the message
};

TEST_F(ImageLayerTest, RefusesHostileEntriesNamingLayerAndEntry) {
  const std::string outside = dir_ + "/outside";
  const Hostile cases[] = {
      {"dot-dot", {file("../outside/escaped", "x")}, "entry '../outside/escaped'"},
      {"dot-dot inside", {dir("a"), file("a/../../outside/escaped", "x")}, "climbs with '..'"},
      {"absolute", {file(outside + "/escaped", "x")}, "absolute path"},
      {"file through a symlink dir", {symlink("evil", outside), file("evil/escaped", "x")}, "is a symbolic link"},
      {"dir through a symlink dir", {symlink("evil", outside), dir("evil/sub")}, "is a symbolic link"},
      {"relative symlink out", {dir("a/b"), symlink("a/b/up", "../../../outside")}, "points out of the image's root"},
      {"hard link out", {hardlink("h", "../outside/f")}, "hard link to '../outside/f'"},
      {"hard link absolute", {hardlink("h", "/etc/passwd")}, "hard link to '/etc/passwd'"},
      {"hard link through a symlink", {symlink("s", outside), hardlink("h", "s/f")}, "hard link to 's/f'"},
      {"hard link to nothing", {hardlink("h", "missing")}, "no file earlier in this layer"},
      {"device", {{"dev/sda", TarEntry::kCharDevice, "", "", 0600}}, "device node"},
      {"whiteout of the parent", {dir("a"), file("a/.wh...", "")}, "a whiteout of '..'"},
      {"whiteout of itself", {file(".wh..", "")}, "a whiteout of '.'"},
      {"too deep", {file(deep_path(600), "x")}, "601 names deep"},
  };
  for (const Hostile& h : cases) {
    SCOPED_TRACE(h.what);
    TearDown();
    SetUp();
    const std::string blob = make_tar(h.entries, Compression::kGzip);
    auto stats = unpack(blob);
    ASSERT_FALSE(stats.is_ok());
    const std::string message = stats.status().message();
    EXPECT_NE(message.find("layer " + sha256_of(blob).str()), std::string::npos) << message;
    EXPECT_NE(message.find("entry '"), std::string::npos) << message;
    EXPECT_NE(message.find(h.error), std::string::npos) << message;
    EXPECT_TRUE(outside_empty()) << h.what;
  }
}

TEST_F(ImageLayerTest, SetuidAndSetgidBitsAreStrippedOrRefused) {
  const std::string blob = make_tar({file("su", "x", 04755), file("wall", "y", 02755), dir("mail", 02775)});
  auto stripped = unpack(blob);
  ASSERT_TRUE(stripped.is_ok()) << stripped.status().to_string();
  EXPECT_EQ(stripped->setid_stripped, 2u);
  EXPECT_EQ(fs::status(dir_ + "/dest/su").permissions(), fs::perms(0755));
  EXPECT_EQ(fs::status(dir_ + "/dest/wall").permissions(), fs::perms(0755));
  TearDown();
  SetUp();
  LayerLimits refuse;
  refuse.setid = SetidPolicy::kRefuse;
  auto refused = unpack(blob, refuse);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("entry 'su'"), std::string::npos) << refused.status().message();
  EXPECT_NE(refused.status().message().find("setuid or setgid"), std::string::npos);
}

TEST_F(ImageLayerTest, DecompressionBombStopsAtTheBound) {
  const std::string bomb = zero_file_tar_gz("zeros", 64 << 20);
  ASSERT_LT(bomb.size(), 1u << 20);  // 64 MiB in well under 1 MiB
  LayerLimits limits;
  limits.max_bytes = 8 << 20;
  auto stats = unpack(bomb, limits);
  ASSERT_FALSE(stats.is_ok());
  EXPECT_EQ(stats.status().code(), StatusCode::kResourceExhausted) << stats.status().to_string();
  EXPECT_NE(stats.status().message().find("layer " + sha256_of(bomb).str()), std::string::npos);
  // The same bound read from the image's side.
  limits.max_bytes = 1ull << 40;
  ImageBytes image(4 << 20);
  limits.image = &image;
  EXPECT_EQ(unpack(bomb, limits).status().code(), StatusCode::kResourceExhausted);
}

TEST_F(ImageLayerTest, TooManyEntriesStopAtTheBound) {
  std::vector<TarEntry> many;
  for (int i = 0; i < 50; ++i) many.push_back(file("f" + std::to_string(i), ""));
  LayerLimits limits;
  limits.max_entries = 10;
  auto stats = unpack(make_tar(many, Compression::kZstd), limits);
  ASSERT_FALSE(stats.is_ok());
  EXPECT_EQ(stats.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(stats.status().message().find("more than 10 entries"), std::string::npos);
}

TEST_F(ImageLayerTest, NotATarIsRefused) {
  auto stats = unpack(std::string(4096, 'x'));
  ASSERT_FALSE(stats.is_ok());
  EXPECT_EQ(stats.status().code(), StatusCode::kMalformed) << stats.status().to_string();
}

TEST_F(ImageLayerTest, LaterEntryReplacesEarlierAndWhiteoutsStayAsMarkers) {
  auto stats = unpack(make_tar({file("a", "old"), file("a", "new"), file("d/.wh.gone", ""), file("d/.wh..wh..opq", "")}));
  ASSERT_TRUE(stats.is_ok()) << stats.status().to_string();
  EXPECT_EQ(read("a"), "new");
  EXPECT_TRUE(fs::exists(dir_ + "/dest/d/.wh.gone"));
  EXPECT_TRUE(fs::exists(dir_ + "/dest/d/.wh..wh..opq"));
}

}  // namespace
}  // namespace edt::image

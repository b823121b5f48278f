// Writing files into a volume's directory with hostile paths and a hostile
// directory (links a container could have made).
#include "control/service/volume_files.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "edt_api/contract.h"

namespace edt::control {
namespace {

namespace fs = std::filesystem;

class VolumeFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("edt-volume-files-" + std::to_string(getpid()));
    fs::remove_all(root_);
    volume_ = root_ / "volume";
    outside_ = root_ / "outside";
    fs::create_directories(volume_);
    fs::create_directories(outside_);
  }
  void TearDown() override { fs::remove_all(root_); }

  static std::string read(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // The names in `dir`, recursively, as relative paths.
  static std::vector<std::string> listing(const fs::path& dir) {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(dir)) out.push_back(fs::relative(e.path(), dir).string());
    std::sort(out.begin(), out.end());
    return out;
  }
  StatusCode refusal(const std::string& path) {
    auto written = write_volume_file(volume_.string(), path, "x");
    EXPECT_FALSE(written.is_ok()) << path;
    return written.is_ok() ? StatusCode::kInternal : written.status().code();
  }

  fs::path root_, volume_, outside_;
};

TEST_F(VolumeFilesTest, WritesTheBytesWithTheModeAContainerReadsAndWrites) {
  const std::string bytes("a\0b\xff", 4);
  auto written = write_volume_file(volume_.string(), "data/sub/train.bin", bytes);
  ASSERT_TRUE(written.is_ok()) << written.status().message();
  EXPECT_EQ(*written, 4);
  EXPECT_EQ(read(volume_ / "data/sub/train.bin"), bytes);
  struct stat st {};
  ASSERT_EQ(::stat((volume_ / "data/sub/train.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  EXPECT_EQ(st.st_uid, ::getuid());
  ASSERT_EQ(::stat((volume_ / "data").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0700, 0700u);
  // Replaced whole; no temporary file stays.
  ASSERT_TRUE(write_volume_file(volume_.string(), "data/sub/train.bin", "new").is_ok());
  EXPECT_EQ(read(volume_ / "data/sub/train.bin"), "new");
  EXPECT_EQ(listing(volume_), (std::vector<std::string>{"data", "data/sub", "data/sub/train.bin"}));
  ASSERT_TRUE(write_volume_file(volume_.string(), "empty", "").is_ok());
  EXPECT_EQ(fs::file_size(volume_ / "empty"), 0u);
}

TEST_F(VolumeFilesTest, RefusesPathsThatLeaveTheVolumeOrAreNotNames) {
  const std::string too_long_segment(256, 'a');
  std::string too_long_path;
  while (too_long_path.size() <= api::limits::VolumeFilePath::max_length) too_long_path += "abcdefgh/";
  too_long_path += "f";
  for (const std::string& path :
       {std::string(""), std::string("/etc/passwd"), std::string(".."), std::string("../outside/x"),
        std::string("a/../../outside/x"), std::string("a/./b"), std::string("."), std::string("a//b"),
        std::string("a/"), std::string("a\nb"), std::string("a\tb"), std::string("a\x7f"), std::string("a\0b", 3),
        std::string("\xff\xfe"), too_long_segment, too_long_path}) {
    EXPECT_EQ(refusal(path), StatusCode::kMalformed) << path;
  }
  // 255 bytes a segment is a name.
  EXPECT_TRUE(write_volume_file(volume_.string(), std::string(255, 'b'), "x").is_ok());
  EXPECT_TRUE(listing(outside_).empty());
}

TEST_F(VolumeFilesTest, NeverFollowsALinkOnTheWayOrAtTheName) {
  fs::create_directory_symlink(outside_, volume_ / "escape");
  fs::create_directories(volume_ / "real");
  fs::create_directory_symlink("../../outside", volume_ / "real" / "up");
  std::ofstream(outside_ / "target") << "host file";
  fs::create_symlink(outside_ / "target", volume_ / "link");
  std::ofstream(volume_ / "plain") << "a file";
  EXPECT_EQ(refusal("escape/x"), StatusCode::kFailedPrecondition);
  EXPECT_EQ(refusal("real/up/x"), StatusCode::kFailedPrecondition);
  EXPECT_EQ(refusal("link"), StatusCode::kFailedPrecondition);
  EXPECT_EQ(refusal("plain/x"), StatusCode::kFailedPrecondition);   // a file on the way
  EXPECT_EQ(refusal("real"), StatusCode::kFailedPrecondition);      // a directory at the name
  EXPECT_EQ(listing(outside_), (std::vector<std::string>{"target"}));
  EXPECT_EQ(read(outside_ / "target"), "host file");
  EXPECT_TRUE(fs::is_symlink(volume_ / "link"));
}

TEST_F(VolumeFilesTest, AFailedWriteLeavesNoPartialFile) {
  ASSERT_TRUE(write_volume_file(volume_.string(), "dir/kept", "old").is_ok());
  // A file-size limit fails the write part way (EFBIG, even for root).
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto* previous = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 2;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  auto written = write_volume_file(volume_.string(), "dir/kept", "longer than two bytes");
  ::setrlimit(RLIMIT_FSIZE, &saved);
  ::signal(SIGXFSZ, previous);
  ASSERT_FALSE(written.is_ok());
  EXPECT_EQ(written.status().code(), StatusCode::kIoError);
  EXPECT_EQ(written.status().field(), "path");
  EXPECT_EQ(read(volume_ / "dir/kept"), "old");
  EXPECT_EQ(listing(volume_ / "dir"), (std::vector<std::string>{"kept"}));
  auto missing = write_volume_file((root_ / "gone").string(), "x", "y");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kIoError);
}

// A container removing the directory an upload goes into, while it is
// written: a conflict to retry (409), not an internal error, and nothing left.
TEST_F(VolumeFilesTest, ADirectoryRemovedDuringTheUploadIsAConflict) {
  struct Unhook {
    ~Unhook() { set_volume_upload_hook_for_testing(nullptr); }
  } unhook;
  int races = 0;
  set_volume_upload_hook_for_testing([&](const std::string& path) {
    ++races;
    EXPECT_EQ(path, "race/deeper/x");
    fs::remove_all(volume_ / "race");  // its temporary file with it, as rm -r does
  });
  auto written = write_volume_file(volume_.string(), "race/deeper/x", "bytes");
  EXPECT_EQ(races, 1);
  ASSERT_FALSE(written.is_ok());
  EXPECT_EQ(written.status().code(), StatusCode::kFailedPrecondition) << written.status().message();
  EXPECT_EQ(written.status().field(), "path");
  EXPECT_NE(written.status().message().find("during the upload"), std::string::npos) << written.status().message();
  EXPECT_TRUE(listing(volume_).empty());
  // Only the temporary file taken away: the same.
  set_volume_upload_hook_for_testing([&](const std::string&) {
    for (const auto& e : fs::directory_iterator(volume_ / "kept")) fs::remove(e.path());
  });
  written = write_volume_file(volume_.string(), "kept/x", "bytes");
  ASSERT_FALSE(written.is_ok());
  EXPECT_EQ(written.status().code(), StatusCode::kFailedPrecondition) << written.status().message();
  EXPECT_EQ(listing(volume_), (std::vector<std::string>{"kept"}));
  // Once the directory stays, the upload goes through.
  set_volume_upload_hook_for_testing(nullptr);
  EXPECT_EQ(write_volume_file(volume_.string(), "race/deeper/x", "bytes").value(), 5);
  EXPECT_EQ(read(volume_ / "race/deeper/x"), "bytes");
}

TEST_F(VolumeFilesTest, WhatAnUploadMakesBelongsToTheVolumesOwner) {
  // With user namespaces a volume's top belongs to its owner's container
  // root: an upload must be that root's too, or the container could not
  // change it.
  if (geteuid() != 0) GTEST_SKIP() << "giving files to another uid needs root";
  ASSERT_EQ(::chown(volume_.c_str(), 268500992, 268500993), 0);
  ASSERT_TRUE(write_volume_file(volume_.string(), "data/sub/train.bin", "x").is_ok());
  for (const char* path : {"data", "data/sub", "data/sub/train.bin"}) {
    struct stat st {};
    ASSERT_EQ(::lstat((volume_ / path).c_str(), &st), 0) << path;
    EXPECT_EQ(st.st_uid, 268500992u) << path;
    EXPECT_EQ(st.st_gid, 268500993u) << path;
  }
}

}  // namespace
}  // namespace edt::control

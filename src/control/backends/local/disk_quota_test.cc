#include "control/backends/local/disk_quota.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace edt::control {
namespace {

namespace fs = std::filesystem;

// A status's message when it is not ok: what failed, in the test's output.
::testing::AssertionResult ok(const Status& st) {
  if (st.is_ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << st.message();
}

// A directory of this test's own, its disk taken back even when a check fails.
class DiskQuotaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = bounded_disks_unavailable(); !why.empty()) GTEST_SKIP() << why;
    root_ = fs::temp_directory_path() / ("edt-disk-quota-test-" + std::to_string(::getpid()));
    fs::create_directories(root_);
  }
  void TearDown() override {
    if (root_.empty()) return;
    (void)remove_bounded_disk(image(), at());
    fs::remove_all(root_);
  }
  std::string image() const { return (root_ / "disk.img").string(); }
  std::string at() const { return (root_ / "disk").string(); }
  // Bytes the host's file system holds for the image.
  uint64_t held() const {
    struct stat st {};
    return ::stat(image().c_str(), &st) == 0 ? uint64_t(st.st_blocks) * 512 : 0;
  }

  fs::path root_;
};

// Writes 1 MiB blocks to `path` until `limit` bytes or an error; the error.
int fill(const std::string& path, uint64_t limit, uint64_t* written) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  const std::string block(1 << 20, 'x');
  int error = 0;
  for (*written = 0; *written < limit;) {
    ssize_t n = ::write(fd, block.data(), block.size());
    if (n < 0) {
      error = errno;
      break;
    }
    *written += uint64_t(n);
  }
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  ::close(fd);
  return error;
}

TEST_F(DiskQuotaTest, AWritePastTheBoundGetsENOSPCAndTheHostHoldsNoMore) {
  constexpr uint64_t kBound = 32 << 20;
  ASSERT_TRUE(ok(make_bounded_disk(image(), at(), {kBound, 0})));
  EXPECT_TRUE(is_mount_point(at()));
  EXPECT_LT(held(), uint64_t{4} << 20) << "an empty disk is sparse";
  uint64_t written = 0;
  EXPECT_EQ(fill(at() + "/big", 4 * kBound, &written), ENOSPC);
  EXPECT_GT(written, kBound / 2);
  EXPECT_LE(written, kBound);
  EXPECT_LE(held(), kBound);
  // What the tree deletes goes back to the host (discard punches holes).
  fs::remove(at() + "/big");
  int dir = ::open(at().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dir, 0);
  ::syncfs(dir);
  ::close(dir);
  EXPECT_LT(held(), kBound / 4);
}

TEST_F(DiskQuotaTest, FilesPastTheInodeBoundGetENOSPC) {
  ASSERT_TRUE(ok(make_bounded_disk(image(), at(), {16 << 20, 512})));
  int error = 0, made = 0;
  for (; made < 2000 && error == 0; ++made) {
    int fd = ::open((at() + "/f" + std::to_string(made)).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) error = errno;
    else ::close(fd);
  }
  EXPECT_EQ(error, ENOSPC) << "made " << made << " files";
  EXPECT_LT(made, 1100) << "ext4 rounds the inode count up to fill its groups, but not to twice over";
}

TEST_F(DiskQuotaTest, RemoveUnmountsAndFreesAndMayBeRepeated) {
  ASSERT_TRUE(ok(make_bounded_disk(image(), at(), {16 << 20, 0})));
  std::ofstream(at() + "/kept") << "data";
  ASSERT_TRUE(ok(remove_bounded_disk(image(), at())));
  EXPECT_FALSE(is_mount_point(at()));
  EXPECT_FALSE(fs::exists(image()));
  EXPECT_FALSE(fs::exists(at() + "/kept"));
  EXPECT_TRUE(ok(remove_bounded_disk(image(), at()))) << "nothing there is not an error";
}

TEST_F(DiskQuotaTest, AnUnmountedDiskIsMountedAgainWithItsFiles) {
  ASSERT_TRUE(ok(make_bounded_disk(image(), at(), {16 << 20, 0})));
  std::ofstream(at() + "/kept") << "data";
  ASSERT_EQ(::umount2(at().c_str(), 0), 0) << std::strerror(errno);  // as a reboot leaves it
  ASSERT_TRUE(ok(mount_bounded_disk(image(), at())));
  EXPECT_TRUE(ok(mount_bounded_disk(image(), at()))) << "mounted already: nothing to do";
  std::ifstream kept(at() + "/kept");
  std::string text;
  kept >> text;
  EXPECT_EQ(text, "data");
}

TEST_F(DiskQuotaTest, ADiskStillMountedElsewhereIsMountedAgainThroughItsOwnDevice) {
  ASSERT_TRUE(ok(make_bounded_disk(image(), at(), {16 << 20, 0, true})));
  // A container's bind of it lives on after the host's mount is undone.
  const std::string bind = (root_ / "bind").string();
  fs::create_directories(bind);
  ASSERT_EQ(::mount(at().c_str(), bind.c_str(), nullptr, MS_BIND, nullptr), 0) << std::strerror(errno);
  ASSERT_EQ(::umount2(at().c_str(), MNT_DETACH), 0) << std::strerror(errno);
  ASSERT_TRUE(ok(mount_bounded_disk(image(), at())));
  struct stat here {}, there {};
  ASSERT_EQ(::stat(at().c_str(), &here), 0);
  ASSERT_EQ(::stat(bind.c_str(), &there), 0);
  // One superblock: a second loop device would be a second ext4 over the file.
  EXPECT_EQ(here.st_dev, there.st_dev);
  ::umount2(bind.c_str(), MNT_DETACH);
}

TEST_F(DiskQuotaTest, MakingAgainReplacesTheOldDisk) {
  ASSERT_TRUE(ok(make_bounded_disk(image(), at(), {16 << 20, 0})));
  std::ofstream(at() + "/old") << "data";
  ASSERT_TRUE(ok(make_bounded_disk(image(), at(), {16 << 20, 0})));
  EXPECT_FALSE(fs::exists(at() + "/old"));
}

TEST_F(DiskQuotaTest, ABoundBelowTheLeastIsRefusedAndLeavesNothing) {
  Status st = make_bounded_disk(image(), at(), {1 << 20, 0});
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("below the least, 16 MiB"), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(image()));
  EXPECT_FALSE(is_mount_point(at()));
}

TEST(DiskQuota, InodesDefaultToOnePer16KiB) {
  EXPECT_EQ(inodes_of({uint64_t{10} << 30, 0}), 655360u);
  EXPECT_EQ(inodes_of({uint64_t{10} << 30, 99}), 99u);
}

}  // namespace
}  // namespace edt::control

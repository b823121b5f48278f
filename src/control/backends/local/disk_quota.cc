#include "control/backends/local/disk_quota.h"

#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "control/backends/local/host_command.h"

namespace edt::control {

namespace fs = std::filesystem;

namespace {

// An fd that closes with it.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string mkfs_program() {
  for (const char* path : {"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"})
    if (::access(path, X_OK) == 0) return path;
  return "";
}

// Binds a free loop device to `file` (LOOP_CONFIGURE, or on a kernel before
// 5.8 LOOP_SET_FD and LOOP_SET_STATUS64), cleared when its last user closes
// it: `loop` is that device, open (closing it before the mount would clear
// it). Another thread may take the device the control gave first (EBUSY):
// then the next.
Result<std::string> attach_loop(int file, const std::string& name, Fd& loop) {
  Fd control(::open("/dev/loop-control", O_RDWR | O_CLOEXEC));
  if (control.fd < 0) return io_error("open /dev/loop-control", errno);
  for (int attempt = 0; attempt < 64; ++attempt) {
    const int n = ::ioctl(control.fd, LOOP_CTL_GET_FREE);
    if (n < 0) return io_error("find a free loop device (LOOP_CTL_GET_FREE)", errno);
    const std::string device = "/dev/loop" + std::to_string(n);
    if (loop.fd >= 0) ::close(loop.fd);
    loop.fd = ::open(device.c_str(), O_RDWR | O_CLOEXEC);
    if (loop.fd < 0) return io_error("open " + device, errno);
    loop_config config{};
    config.fd = static_cast<uint32_t>(file);
    config.info.lo_flags = LO_FLAGS_AUTOCLEAR;
    std::strncpy(reinterpret_cast<char*>(config.info.lo_file_name), name.c_str(), LO_NAME_SIZE - 1);
    int rc = ::ioctl(loop.fd, LOOP_CONFIGURE, &config);
    if (rc != 0 && (errno == EINVAL || errno == ENOTTY)) {
      rc = ::ioctl(loop.fd, LOOP_SET_FD, file);
      if (rc == 0 && ::ioctl(loop.fd, LOOP_SET_STATUS64, &config.info) != 0) {
        const int error = errno;
        ::ioctl(loop.fd, LOOP_CLR_FD, 0);
        return io_error("set up " + device + " for " + name, error);
      }
    }
    if (rc == 0) return device;
    if (errno != EBUSY) return io_error("bind " + device + " to " + name, errno);
  }
  return unavailable("every free loop device was taken by another before " + name + " could have it; try again");
}

// The loop device that already has `file` behind it, or "": a disk whose
// host mount was undone while a container's bind of it lives on (a volume
// an admin unmounted). Mounting the file through a second device would give
// its ext4 two superblocks, which corrupts it; the same device shares one.
std::string loop_of(int file) {
  struct stat st {};
  if (::fstat(file, &st) != 0) return "";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/sys/block", ec)) {
    const std::string name = entry.path().filename();
    if (name.rfind("loop", 0) != 0) continue;
    Fd device(::open(("/dev/" + name).c_str(), O_RDONLY | O_CLOEXEC));
    loop_info64 info{};
    if (device.fd >= 0 && ::ioctl(device.fd, LOOP_GET_STATUS64, &info) == 0 && info.lo_device == st.st_dev &&
        info.lo_inode == st.st_ino)
      return "/dev/" + name;
  }
  return "";
}

}  // namespace

uint64_t inodes_of(const DiskBound& bound) { return bound.inodes != 0 ? bound.inodes : bound.bytes / (16 << 10); }

std::string bounded_disks_unavailable() {
  if (::geteuid() != 0) return "edtd is not root, and only root may mount a disk";
  if (::access("/dev/loop-control", R_OK | W_OK) != 0)
    return "this machine has no /dev/loop-control (no loop devices: load the loop module, or give the container "
           "/dev/loop-control and /dev/loop*)";
  if (mkfs_program().empty()) return "this machine has no mkfs.ext4 (install e2fsprogs)";
  return "";
}

bool is_mount_point(const std::string& path) {
  struct stat at {}, above {};
  if (::lstat(path.c_str(), &at) != 0 || !S_ISDIR(at.st_mode)) return false;
  if (::lstat((path + "/..").c_str(), &above) != 0) return false;
  return at.st_dev != above.st_dev || at.st_ino == above.st_ino;
}

Status mount_bounded_disk(const std::string& image, const std::string& at) {
  if (is_mount_point(at)) return Status::ok();
  std::error_code ec;
  fs::create_directories(at, ec);
  if (ec) return Status(StatusCode::kIoError, "mkdir " + at + ": " + ec.message());
  Fd file(::open(image.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (file.fd < 0) return io_error("open the disk " + image, errno);
  // The loop device holds the file now; it goes when the mount does, or
  // (AUTOCLEAR) as `loop` closes when the mount failed.
  Fd loop(-1);
  std::string device = loop_of(file.fd);
  if (device.empty()) {
    EDT_ASSIGN_OR_RETURN(device, attach_loop(file.fd, image, loop));
  }
  // noinit_itable: the fresh file reads as zeros, so the inode tables are.
  if (::mount(device.c_str(), at.c_str(), "ext4", MS_NODEV | MS_NOSUID, "discard,noinit_itable") != 0)
    return io_error("mount " + image + " (" + device + ") at " + at, errno);
  return Status::ok();
}

Status make_bounded_disk(const std::string& image, const std::string& at, const DiskBound& bound) {
  if (bound.bytes < kMinDiskBytes)
    return invalid_argument("a disk bound of " + std::to_string(bound.bytes) + " bytes is below the least, " +
                            std::to_string(kMinDiskBytes >> 20) + " MiB; give a larger one (or 0: no bound)");
  EDT_RETURN_IF_ERROR(remove_bounded_disk(image, at));
  {
    Fd file(::open(image.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (file.fd < 0) return io_error("create the disk " + image, errno);
    if (::ftruncate(file.fd, static_cast<off_t>(bound.bytes)) != 0) {
      const int error = errno;
      ::unlink(image.c_str());
      return io_error("size the disk " + image, error);
    }
  }
  // A journal only where asked (a volume's data outlives a crash of the
  // host; a container's disk is made anew at its next start). -m 0: the
  // container's root is not the host's, so blocks kept for root would only
  // be lost.
  auto made = run_host_command({mkfs_program(), "-q", "-F", "-t", "ext4", "-m", "0", "-N",
                                std::to_string(inodes_of(bound)), "-O",
                                bound.journal ? "has_journal" : "^has_journal", "-E",
                                "lazy_itable_init=1,lazy_journal_init=1,nodiscard", image},
                               "e2fsprogs");
  Status st = made.is_ok() ? mount_bounded_disk(image, at) : made.status();
  if (!st.is_ok()) ::unlink(image.c_str());
  return st.with_context("make a disk of " + std::to_string(bound.bytes >> 20) + " MiB at " + at);
}

Status remove_bounded_disk(const std::string& image, const std::string& at) {
  if (is_mount_point(at) && ::umount2(at.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0)
    return io_error("unmount the disk at " + at, errno);
  if (::unlink(image.c_str()) != 0 && errno != ENOENT) return io_error("remove the disk " + image, errno);
  return Status::ok();
}

}  // namespace edt::control

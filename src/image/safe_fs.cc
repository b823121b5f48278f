#include "image/safe_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

namespace edt::image {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

int UniqueFd::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

Result<std::vector<std::string>> split_relative(std::string_view path) {
  if (!path.empty() && path.front() == '/') return invalid_argument("absolute path '" + std::string(path) + "'");
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view name = path.substr(start, end - start);
    if (name == "..") return invalid_argument("path '" + std::string(path) + "' climbs with '..'");
    if (!name.empty() && name != ".") names.emplace_back(name);
    start = end + 1;
  }
  return names;
}

Result<UniqueFd> open_dir_beneath(int root_fd, const std::vector<std::string>& names, bool create) {
  UniqueFd dir(::fcntl(root_fd, F_DUPFD_CLOEXEC, 0));
  if (!dir.valid()) return io_error("dup of a directory descriptor", errno);
  std::string walked;
  for (const std::string& name : names) {
    walked += (walked.empty() ? "" : "/") + name;
    bool made = false;
    if (create) {
      made = ::mkdirat(dir.get(), name.c_str(), 0755) == 0;
      if (!made && errno != EEXIST) return io_error("mkdir " + walked, errno);
    }
    int fd = ::openat(dir.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    // A directory no entry names (a layer's implied parent) is 0755, as
    // Docker makes it, whatever the umask.
    if (made && fd >= 0) ::fchmod(fd, 0755);
    if (fd < 0 && (errno == ELOOP || errno == ENOTDIR)) {
      return Status(StatusCode::kInvalidArgument, "'" + walked + "' is a symbolic link or not a directory: "
                                                  "a path through it could leave the image's root");
    }
    if (fd < 0) return io_error("open " + walked, errno);
    dir = UniqueFd(fd);
  }
  return dir;
}

Result<UniqueFd> open_dir(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return io_error("open directory " + path, errno);
  return UniqueFd(fd);
}

Status remove_at(int dir_fd, const std::string& name) {
  struct stat st;
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT ? Status::ok() : io_error("stat " + name, errno);
  }
  if (!S_ISDIR(st.st_mode)) {
    if (::unlinkat(dir_fd, name.c_str(), 0) != 0 && errno != ENOENT) return io_error("unlink " + name, errno);
    return Status::ok();
  }
  // A read-only directory (a layer's 0555 dir) must be readable and writable to empty.
  ::fchmodat(dir_fd, name.c_str(), (st.st_mode & 07777) | 0700, 0);
  int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return io_error("open " + name, errno);
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return io_error("opendir " + name, errno);
  }
  Status status;
  while (struct dirent* e = ::readdir(d)) {
    std::string child = e->d_name;
    if (child == "." || child == "..") continue;
    status = remove_at(::dirfd(d), child);
    if (!status.is_ok()) break;
  }
  ::closedir(d);
  EDT_RETURN_IF_ERROR(status.with_context(name));
  if (::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) return io_error("rmdir " + name, errno);
  return Status::ok();
}

Status make_dirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return Status(StatusCode::kIoError, "mkdir -p " + path + ": " + ec.message());
  return Status::ok();
}

Result<std::string> read_bounded(const std::string& path, uint64_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error("open " + path, errno);
  UniqueFd owned(fd);
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error("read " + path, errno);
    if (n == 0) return out;
    if (out.size() + n > max_bytes) {
      return Status(StatusCode::kResourceExhausted,
                    path + " is larger than " + std::to_string(max_bytes) + " bytes, the bound for such a file");
    }
    out.append(buf, n);
  }
}

Status replace_durably(const std::string& path, std::string_view content) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("create " + tmp, errno);
  UniqueFd owned(fd);
  for (size_t done = 0; done < content.size();) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error("write " + tmp, errno);
    done += n;
  }
  if (::fsync(fd) != 0) return io_error("fsync " + tmp, errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return io_error("rename " + tmp, errno);
  EDT_ASSIGN_OR_RETURN(UniqueFd dir, open_dir(std::filesystem::path(path).parent_path().string()));
  ::fsync(dir.get());
  return Status::ok();
}

Status sync_fs(int fd, const std::string& what) {
  if (::syncfs(fd) != 0) return io_error("syncfs " + what, errno);
  return Status::ok();
}

}  // namespace edt::image

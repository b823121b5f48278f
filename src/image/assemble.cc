#include "image/assemble.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "image/safe_fs.h"

namespace edt::image {
namespace {

constexpr std::string_view kWhiteout = ".wh.";
constexpr std::string_view kOpaque = ".wh..wh..opq";

Result<std::vector<std::string>> list_dir(int fd) {
  int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return io_error("dup", errno);
  DIR* d = ::fdopendir(copy);
  if (d == nullptr) {
    ::close(copy);
    return io_error("opendir", errno);
  }
  ::rewinddir(d);
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  ::closedir(d);
  return names;
}

Status apply_whiteouts(const std::vector<std::string>& names, int dst) {
  for (const std::string& name : names) {
    if (name == kOpaque) {
      EDT_ASSIGN_OR_RETURN(std::vector<std::string> below, list_dir(dst));
      for (const std::string& old : below) EDT_RETURN_IF_ERROR(remove_at(dst, old));
    }
  }
  for (const std::string& name : names) {
    if (name.rfind(kWhiteout, 0) != 0 || name == kOpaque) continue;
    const std::string hidden = name.substr(kWhiteout.size());
    if (hidden.rfind(kWhiteout, 0) == 0) continue;  // aufs's own ".wh..wh.*" files: nothing to hide
    if (hidden.empty() || hidden == "." || hidden == "..") continue;  // unpack_layer() refuses these
    EDT_RETURN_IF_ERROR(remove_at(dst, hidden));
  }
  return Status::ok();
}

Status merge_dir(int src, int dst);

Status merge_subdir(int src, int dst, const std::string& name, const struct stat& st) {
  struct stat old;
  if (::fstatat(dst, name.c_str(), &old, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(old.st_mode)) {
    EDT_RETURN_IF_ERROR(remove_at(dst, name));
  }
  if (::mkdirat(dst, name.c_str(), 0700) != 0 && errno != EEXIST) return io_error("mkdir " + name, errno);
  EDT_ASSIGN_OR_RETURN(UniqueFd from, open_dir_beneath(src, {name}, false));
  EDT_ASSIGN_OR_RETURN(UniqueFd to, open_dir_beneath(dst, {name}, false));
  ::fchmod(to.get(), 0700);  // a lower layer's 0555 directory takes this layer's entries
  EDT_RETURN_IF_ERROR(merge_dir(from.get(), to.get()).with_context(name));
  if (::geteuid() == 0) ::fchown(to.get(), st.st_uid, st.st_gid);
  if (::fchmod(to.get(), st.st_mode & 07777) != 0) return io_error("chmod " + name, errno);
  return Status::ok();
}

Status merge_dir(int src, int dst) {
  EDT_ASSIGN_OR_RETURN(std::vector<std::string> names, list_dir(src));
  EDT_RETURN_IF_ERROR(apply_whiteouts(names, dst));
  for (const std::string& name : names) {
    if (name.rfind(kWhiteout, 0) == 0) continue;
    struct stat st;
    if (::fstatat(src, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return io_error("stat " + name, errno);
    if (S_ISDIR(st.st_mode)) {
      EDT_RETURN_IF_ERROR(merge_subdir(src, dst, name, st));
      continue;
    }
    EDT_RETURN_IF_ERROR(remove_at(dst, name));
    if (::linkat(src, name.c_str(), dst, name.c_str(), 0) != 0) return io_error("link " + name, errno);
  }
  return Status::ok();
}

}  // namespace

Status assemble_root(const std::vector<std::string>& layer_dirs, int dest_fd) {
  for (const std::string& dir : layer_dirs) {
    EDT_ASSIGN_OR_RETURN(UniqueFd src, open_dir(dir));
    EDT_RETURN_IF_ERROR(merge_dir(src.get(), dest_fd).with_context("assembling from " + dir));
  }
  return Status::ok();
}

}  // namespace edt::image

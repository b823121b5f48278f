#include "control/service/volume_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "common/io.h"
#include "common/utf8.h"
#include "edt_api/contract.h"

namespace edt::control {

namespace {

constexpr size_t kMaxSegmentBytes = 255;  // NAME_MAX
constexpr mode_t kFileMode = 0644;
constexpr mode_t kDirectoryMode = 0755;

using Fd = FileDescriptor;

std::vector<std::string> segments_of(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t slash = path.find('/', start);
    out.push_back(path.substr(start, slash - start));
    if (slash == std::string::npos) return out;
    start = slash + 1;
  }
}

Status in_the_way(const std::string& where, const std::string& what) {
  return conflict("path", "'" + where + "' in the volume is " + what,
                  "upload to another path, or remove or rename '" + where + "' (in a container that mounts it)");
}

// The refusal of a read or delete whose way holds a link or a non-directory.
Status not_followed(const std::string& where, const std::string& what) {
  return conflict("path", "'" + where + "' in the volume is " + what,
                  "edtd follows no link in a volume: give the path of a file or directory inside it");
}

Status not_there(const std::string& where) {
  return missing("path", "'" + where + "' is not in the volume", "list the volume to see what it holds");
}

// Whether `err` says the volume's disk (or its files) is full.
bool no_room(int err) { return err == ENOSPC || err == EDQUOT; }

// The refusal of an upload its volume has no room for (Service::upload_file
// names the volume and its bound).
Status volume_full(const std::string& path) {
  return too_large("path", "the volume has no room for '" + path + "'",
                   "delete files in the volume, or upload into a larger volume");
}

Status file_system(const std::string& what, int err) { return as_refusal(io_error(what, err), "path"); }

// The refusal for an upload whose directory, or temporary file, was
// removed while it was written (ENOENT where the file system had them).
Status changed_during_upload(const std::string& path) {
  return conflict("path", "a directory on the way to '" + path + "' in the volume was removed or changed during the upload",
                  "upload again (and do not remove the directory while uploading into it)");
}

// Who what an upload makes belongs to: the owner of the volume's top
// directory (with user namespaces, its owner's container root).
struct Owner {
  uid_t uid = 0;
  gid_t gid = 0;
};

// The directory `name` in `parent`, made if missing (for `owner`); never
// through a link.
Result<Fd> open_directory(int parent, const std::string& name, const std::string& where, Owner owner) {
  if (::mkdirat(parent, name.c_str(), kDirectoryMode) == 0) {
    if (::fchownat(parent, name.c_str(), owner.uid, owner.gid, AT_SYMLINK_NOFOLLOW) != 0)
      return file_system("give the directory '" + where + "' in the volume to its owner", errno);
  } else if (errno == ENOENT) {
    return changed_during_upload(where);  // the directory it goes in was removed
  } else if (no_room(errno)) {
    return volume_full(where);
  } else if (errno != EEXIST) {
    return file_system("make the directory '" + where + "' in the volume", errno);
  }
  Fd fd(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() >= 0) return fd;
  if (errno == ENOENT) return changed_during_upload(where);
  if (errno == ELOOP || errno == ENOTDIR) return in_the_way(where, "a symbolic link or not a directory");
  return file_system("open the directory '" + where + "' in the volume", errno);
}

// Refuses a final name that exists and is not a regular file.
Status check_target(int parent, const std::string& name, const std::string& path) {
  struct stat st {};
  if (::fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return Status::ok();
    return file_system("look at '" + path + "' in the volume", errno);
  }
  if (S_ISLNK(st.st_mode)) return in_the_way(path, "a symbolic link");
  if (!S_ISREG(st.st_mode)) return in_the_way(path, "a directory or another non-file");
  return Status::ok();
}

std::function<void(const std::string&)>& upload_hook() {
  static std::function<void(const std::string&)> hook;
  return hook;
}

// A name for a temporary file no other upload of this edtd uses.
std::string temporary_name() {
  static std::atomic<uint64_t> next{0};
  return ".edt-upload-" + std::to_string(::getpid()) + "-" + std::to_string(next++);
}

// Writes `bytes` to a new temporary file in `parent` (for `owner`) and
// renames it to `name`.
Result<int64_t> replace_file(int parent, const std::string& name, const std::string& path, std::string_view bytes,
                              Owner owner) {
  const std::string temp = temporary_name();
  Fd fd(::openat(parent, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, kFileMode));
  if (fd.get() < 0 && errno == ENOENT) return changed_during_upload(path);  // the directory is gone
  if (fd.get() < 0 && no_room(errno)) return volume_full(path);
  if (fd.get() < 0) return file_system("make a temporary file beside '" + path + "'", errno);
  Status st = io::write_all(fd.get(), bytes, "'" + path + "' in the volume");
  bool full = !st.is_ok() && no_room(errno);
  if (st.is_ok() && ::fchown(fd.get(), owner.uid, owner.gid) != 0)
    st = io_error("give '" + path + "' to the volume's owner", errno);
  if (st.is_ok() && ::fchmod(fd.get(), kFileMode) != 0) st = io_error("set the mode of '" + path + "'", errno);
  if (st.is_ok() && ::fsync(fd.get()) != 0) {
    full = no_room(errno);
    st = io_error("sync '" + path + "'", errno);
  }
  if (st.is_ok() && upload_hook()) upload_hook()(path);
  bool gone = false;  // the directory or the temporary file was removed meanwhile
  if (st.is_ok() && ::renameat(parent, temp.c_str(), parent, name.c_str()) != 0) {
    gone = errno == ENOENT;
    st = io_error("rename the upload to '" + path + "'", errno);
  }
  if (!st.is_ok()) {
    ::unlinkat(parent, temp.c_str(), 0);
    if (full) return volume_full(path);
    return gone ? changed_during_upload(path) : as_refusal(st, "path");
  }
  return static_cast<int64_t>(bytes.size());
}

// Opens the volume's top directory.
Result<Fd> open_top(const std::string& dir) {
  Fd top(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (top.get() < 0) return file_system("open the volume's directory " + dir, errno);
  return top;
}

// The directory `segments[0..count)` under `top`, opened one segment at a
// time, never through a link; a missing one is kNotFound.
Result<Fd> walk(Fd top, const std::vector<std::string>& segments, size_t count) {
  std::string where;
  for (size_t i = 0; i < count; ++i) {
    where += (i ? "/" : "") + segments[i];
    Fd next(::openat(top.get(), segments[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (next.get() < 0 && errno == ENOENT)
      return not_there(where);
    if (next.get() < 0 && (errno == ELOOP || errno == ENOTDIR))
      return not_followed(where, "a symbolic link or not a directory");
    if (next.get() < 0) return file_system("open '" + where + "' in the volume", errno);
    top = std::move(next);
  }
  return top;
}

// The directory that holds the last segment of `path` (checked first).
Result<Fd> open_parent(const std::string& dir, const std::string& path, std::vector<std::string>* segments) {
  EDT_RETURN_IF_ERROR(check_volume_file_path(path));
  *segments = segments_of(path);
  EDT_ASSIGN_OR_RETURN(Fd top, open_top(dir));
  return walk(std::move(top), *segments, segments->size() - 1);
}

VolumeEntry entry_of(const std::string& name, const struct stat& st) {
  const char* type = S_ISREG(st.st_mode) ? "file" : S_ISDIR(st.st_mode) ? "directory" : S_ISLNK(st.st_mode) ? "link" : "other";
  return {name, type, S_ISREG(st.st_mode) ? static_cast<int64_t>(st.st_size) : 0, static_cast<int64_t>(st.st_mtime)};
}

// The entries of the open directory `fd` (which it takes), at most `limit`.
Result<VolumeListing> read_entries(Fd fd, size_t limit) {
  const int dfd = fd.release();  // closedir closes it
  DIR* d = ::fdopendir(dfd);
  if (!d) {
    const int err = errno;
    ::close(dfd);
    return file_system("read a directory of the volume", err);
  }
  VolumeListing out;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (::fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone meanwhile
    if (out.entries.size() == limit) {
      out.truncated = true;
      break;
    }
    out.entries.push_back(entry_of(name, st));
  }
  ::closedir(d);
  std::sort(out.entries.begin(), out.entries.end(), [](auto& a, auto& b) { return a.name < b.name; });
  return out;
}

constexpr int kMaxDeleteDepth = 256;

// Removes what the directory `name` in `parent` holds, then it; never
// through a link. Adds to `*removed` each entry that went.
Status remove_tree(int parent, const std::string& name, const std::string& where, int depth, int64_t* removed) {
  if (depth > kMaxDeleteDepth)
    return conflict("path", "'" + where + "' is nested over " + std::to_string(kMaxDeleteDepth) + " directories deep",
                    "delete its deepest directories first, in a container that mounts the volume");
  Fd fd(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) return file_system("open '" + where + "' in the volume", errno);
  EDT_ASSIGN_OR_RETURN(VolumeListing listing, read_entries(Fd(::dup(fd.get())), SIZE_MAX));
  for (const auto& e : listing.entries) {
    const std::string inner = where + "/" + e.name;
    if (e.type == "directory") {
      EDT_RETURN_IF_ERROR(remove_tree(fd.get(), e.name, inner, depth + 1, removed));
      continue;
    }
    if (::unlinkat(fd.get(), e.name.c_str(), 0) != 0) return file_system("delete '" + inner + "'", errno);
    ++*removed;
  }
  if (::unlinkat(parent, name.c_str(), AT_REMOVEDIR) != 0) return file_system("delete '" + where + "'", errno);
  ++*removed;
  return Status::ok();
}

}  // namespace

FileDescriptor::~FileDescriptor() {
  if (fd_ >= 0) ::close(fd_);
}

Result<VolumeListing> list_volume_dir(const std::string& dir, const std::string& path, size_t limit) {
  if (!path.empty()) EDT_RETURN_IF_ERROR(check_volume_file_path(path));
  const std::vector<std::string> segments = path.empty() ? std::vector<std::string>{} : segments_of(path);
  EDT_ASSIGN_OR_RETURN(Fd top, open_top(dir));
  EDT_ASSIGN_OR_RETURN(Fd listed, walk(std::move(top), segments, segments.size()));
  return read_entries(std::move(listed), limit);
}

Result<OpenedVolumeFile> open_volume_file(const std::string& dir, const std::string& path) {
  std::vector<std::string> segments;
  EDT_ASSIGN_OR_RETURN(Fd parent, open_parent(dir, path, &segments));
  Fd fd(::openat(parent.get(), segments.back().c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0 && errno == ENOENT)
    return not_there(path);
  if (fd.get() < 0 && errno == ELOOP) return not_followed(path, "a symbolic link");
  if (fd.get() < 0) return file_system("open '" + path + "' in the volume", errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return file_system("look at '" + path + "' in the volume", errno);
  if (!S_ISREG(st.st_mode)) return not_followed(path, "not a regular file");
  return OpenedVolumeFile{std::move(fd), static_cast<int64_t>(st.st_size)};
}

Result<int64_t> delete_volume_path(const std::string& dir, const std::string& path) {
  std::vector<std::string> segments;
  EDT_ASSIGN_OR_RETURN(Fd parent, open_parent(dir, path, &segments));
  struct stat st {};
  if (::fstatat(parent.get(), segments.back().c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return errno == ENOENT ? not_there(path)
                           : file_system("look at '" + path + "' in the volume", errno);
  int64_t removed = 0;
  if (S_ISDIR(st.st_mode)) {
    EDT_RETURN_IF_ERROR(remove_tree(parent.get(), segments.back(), path, 0, &removed));
  } else if (::unlinkat(parent.get(), segments.back().c_str(), 0) != 0) {
    return file_system("delete '" + path + "' in the volume", errno);
  } else {
    removed = 1;
  }
  return removed;
}

void set_volume_upload_hook_for_testing(std::function<void(const std::string& path)> hook) {
  upload_hook() = std::move(hook);
}

Status check_volume_file_path(const std::string& path, const std::string& field) {
  const std::string fix = "give a relative path such as data/train.csv: no leading '/', no '.' or '..' "
                          "segments, no empty segment, no control characters";
  const size_t max_length = api::limits::VolumeFilePath::max_length;
  if (path.empty()) return malformed(field, "the file's path is empty", fix);
  if (path.size() > max_length)
    return malformed(field, "the file's path is over " + std::to_string(max_length) + " bytes", "give a shorter path");
  if (!utf8::is_valid(path)) return malformed(field, "the file's path is not UTF-8", fix);
  for (unsigned char c : path)
    if (c < 0x20 || c == 0x7f) return malformed(field, "the file's path holds a control character", fix);
  if (path[0] == '/') return malformed(field, "the file's path '" + path + "' is absolute", fix);
  for (const auto& segment : segments_of(path)) {
    if (segment.empty()) return malformed(field, "the file's path '" + path + "' has an empty segment", fix);
    if (segment == "." || segment == "..")
      return malformed(field, "the file's path '" + path + "' has a '" + segment + "' segment", fix);
    if (segment.size() > kMaxSegmentBytes)
      return malformed(field, "a segment of the file's path is over " + std::to_string(kMaxSegmentBytes) + " bytes",
                     "give shorter names");
  }
  return Status::ok();
}

Result<int64_t> write_volume_file(const std::string& dir, const std::string& path, std::string_view bytes) {
  EDT_RETURN_IF_ERROR(check_volume_file_path(path));
  Fd current(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (current.get() < 0) return file_system("open the volume's directory " + dir, errno);
  struct stat top {};
  if (::fstat(current.get(), &top) != 0) return file_system("look at the volume's directory " + dir, errno);
  const Owner owner{top.st_uid, top.st_gid};
  const std::vector<std::string> segments = segments_of(path);
  std::string where;
  for (size_t i = 0; i + 1 < segments.size(); ++i) {
    where += (i ? "/" : "") + segments[i];
    auto next = open_directory(current.get(), segments[i], where, owner);
    if (!next.is_ok()) return next.status();
    current = std::move(*next);
  }
  EDT_RETURN_IF_ERROR(check_target(current.get(), segments.back(), path));
  return replace_file(current.get(), segments.back(), path, bytes, owner);
}

}  // namespace edt::control

// Volume files: writing a file a client sends into a volume's directory,
// with the path treated as hostile.
//
// A path is relative: segments joined by '/', each 1 to 255 bytes of UTF-8
// with no control character, none "." or ".."; the whole at most
// limits::VolumeFilePath::max_length bytes. Anything else is refused
// (kMalformed, 400) before the file system is touched.
//
// The write never leaves the volume's directory and never follows a link:
// each directory on the way is opened relative to the one before it with
// O_NOFOLLOW | O_DIRECTORY (made, mode 0755, if missing), so a symbolic link
// a container put on the way is refused (kConflict) instead of followed, as
// is a final name that is a link, a directory or not a regular file. The
// bytes go to a new temporary file in the same directory (O_EXCL, mode
// 0644), are synced, and the file is renamed over the name: a reader sees
// the old file or the whole new one, and a failure leaves no partial file.
// A directory on the way removed (or the temporary file taken away) while
// the upload is written, as a container's `rm -r` may do, is a kConflict
// (409: the directory changed during the upload; try again), never a 500.
// The file is owned by edtd's user, which is the containers' user (root in
// the container; no user namespace, docs/security.md), so a container can
// read and write it. Thread-safe: concurrent writes to one name end with
// one of them whole.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "control/model/error.h"

namespace edt::control {

// A file written into a volume.
struct VolumeFile {
  std::string volume;
  std::string path;  // relative to the volume's directory
  int64_t bytes = 0;
};

// A file descriptor closed when it goes.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd = -1) : fd_(fd) {}
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileDescriptor& operator=(FileDescriptor&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor();
  int get() const { return fd_; }
  // Gives the descriptor up: the caller closes it.
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// One entry of a volume's directory.
struct VolumeEntry {
  std::string name;
  std::string type;  // "file", "directory", "link" or "other"
  int64_t bytes = 0;     // a file's size; 0 for the rest
  int64_t modified = 0;  // unix seconds
};

// A directory's entries, sorted by name; at most `limit` of them
// (`truncated` tells there were more).
struct VolumeListing {
  std::vector<VolumeEntry> entries;
  bool truncated = false;
};

// A regular file opened for reading, and its size.
struct OpenedVolumeFile {
  FileDescriptor fd;
  int64_t bytes = 0;
};

// Refuses a path that is not a relative path inside a volume, as above.
Status check_volume_file_path(const std::string& path, const std::string& field = "path");

// Writes `bytes` to `path` under the directory `dir`, as above; returns the
// bytes written, or the refusal (kMalformed path, kConflict link or
// non-file in the way, kTooLarge the volume (its disk) is full, kInternal
// the file system failed).
Result<int64_t> write_volume_file(const std::string& dir, const std::string& path, std::string_view bytes);

// The entries of the directory `path` under `dir` ("" is `dir` itself).
Result<VolumeListing> list_volume_dir(const std::string& dir, const std::string& path, size_t limit);

// Opens the regular file `path` under `dir` for reading; a directory or
// another non-file there is kConflict.
Result<OpenedVolumeFile> open_volume_file(const std::string& dir, const std::string& path);

// Deletes `path` under `dir`: a file or a link, or a directory with all it
// holds (links in it are removed, never followed). Returns how many entries went.
Result<int64_t> delete_volume_path(const std::string& dir, const std::string& path);

// For tests: `hook(path)` runs in each write once the bytes are written and
// synced, just before the rename (where a container's `rm -r` races an
// upload); empty (the default): nothing. Set it while no write runs.
void set_volume_upload_hook_for_testing(std::function<void(const std::string& path)> hook);

}  // namespace edt::control

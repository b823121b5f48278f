// File-system steps that never follow a symbolic link: what the layer store
// uses to write inside trees whose names an image chose.
//
// A layer's entries name paths ("usr/bin/python3"); an earlier entry may
// have made any of their directories a symbolic link (to "/etc", to
// "../../.."). Every step here walks a relative path one name at a time
// from a directory descriptor, with O_NOFOLLOW, so that a link on the way is
// an error and never a way out of the tree. Errors name the path. Functions
// are thread-safe on distinct trees.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "edt/status.h"

namespace edt::image {

// An owned file descriptor, closed when it goes.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();
  int get() const { return fd_; }
  int release();
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// The names of a relative path in a layer ("./usr//bin/" -> usr, bin; "./"
// -> none), or an error for an absolute path or a ".." anywhere.
Result<std::vector<std::string>> split_relative(std::string_view path);

// Opens (or, with `create`, makes with mode 0755) the directory `names`
// beneath `root_fd`; a name that is a symbolic link or not a directory is
// an error.
Result<UniqueFd> open_dir_beneath(int root_fd, const std::vector<std::string>& names, bool create);

// Opens an existing directory `path` (an absolute or working-directory path).
Result<UniqueFd> open_dir(const std::string& path);

// Removes `name` in `dir_fd` and, if it is a directory, all below it, never
// following a link. A missing name is no error.
Status remove_at(int dir_fd, const std::string& name);

// Makes the directory `path` and its parents (mode 0755); present is fine.
Status make_dirs(const std::string& path);

// The file `path` whole, or an error when it is larger than `max_bytes`.
Result<std::string> read_bounded(const std::string& path, uint64_t max_bytes);

// Replaces `path` with `content` (`path`.tmp, fsync, rename, fsync of the
// directory): a reader, or a restart after a kill, sees the old or the new.
Status replace_durably(const std::string& path, std::string_view content);

// Flushes the file system that holds `fd` to disk (syncfs), so that a
// rename that follows publishes only trees whose content is on disk.
Status sync_fs(int fd, const std::string& what);

}  // namespace edt::image

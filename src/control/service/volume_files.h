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

#include "control/model/error.h"

namespace edt::control {

// A file written into a volume.
struct VolumeFile {
  std::string volume;
  std::string path;  // relative to the volume's directory
  int64_t bytes = 0;
};

// Refuses a path that is not a relative path inside a volume, as above.
Status check_volume_file_path(const std::string& path, const std::string& field = "path");

// Writes `bytes` to `path` under the directory `dir`, as above; returns the
// bytes written, or the refusal (kMalformed path, kConflict link or
// non-file in the way, kTooLarge the volume (its disk) is full, kInternal
// the file system failed).
Result<int64_t> write_volume_file(const std::string& dir, const std::string& path, std::string_view bytes);

// For tests: `hook(path)` runs in each write once the bytes are written and
// synced, just before the rename (where a container's `rm -r` races an
// upload); empty (the default): nothing. Set it while no write runs.
void set_volume_upload_hook_for_testing(std::function<void(const std::string& path)> hook);

}  // namespace edt::control

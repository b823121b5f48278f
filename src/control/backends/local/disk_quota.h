// Disk bounds: a directory tree whose bytes and files are bounded, as a
// sparse file on the host holding an ext4 of its own, loop-mounted (nodev,
// nosuid) at the tree. A write past the bound fails inside with ENOSPC ("No
// space left on device"), and so does making a file past the inode bound;
// the host's file system never holds more of it than the file's size.
//
// Why this mechanism (docs/security.md, "Resource bounds"): project quotas
// need a data dir on a file system mounted with them (ext4 prjquota, xfs
// pquota), which most hosts' root is not; a tmpfs with size= would keep the
// data in RAM. An image costs a mkfs.ext4 and a mount at start, about 70 ms
// (measured there), and nothing while the disk is empty: the file is sparse,
// the ext4 has no journal and its inode tables are not zeroed (the file reads
// as zeros where never written), and with `discard` what the tree deletes is
// given back to the host (holes punched in the file).
//
// Lifetime: the mount is the host's (a restarted edtd finds it where it
// was; sandboxes bind from it). The loop device goes with the last unmount
// (LO_FLAGS_AUTOCLEAR), and the file's blocks with the last of the loop
// device and the file's name. Needs root, /dev/loop-control and mkfs.ext4:
// bounded_disks_unavailable() says what is missing.
#pragma once

#include <cstdint>
#include <string>

#include "edt/status.h"

namespace edt::control {

struct DiskBound {
  uint64_t bytes = 0;   // 0: no bound
  uint64_t inodes = 0;  // files and directories; 0: one per 16 KiB of bytes (ext4's own ratio)
  // A journal, for data that must outlive a crash of the host (a volume);
  // a container's disk is made anew at every start and needs none.
  bool journal = false;
};

// The least bound a disk may have: ext4 needs room for its own metadata.
inline constexpr uint64_t kMinDiskBytes = uint64_t{16} << 20;

// The inode bound `bound` gives: its own, or one per 16 KiB of bytes.
uint64_t inodes_of(const DiskBound& bound);

// Why bounded disks cannot be made on this machine ("" when they can): not
// root, no /dev/loop-control (loop devices), or no mkfs.ext4 (e2fsprogs).
std::string bounded_disks_unavailable();

// Makes `image` (replacing any file there) a sparse file of bound.bytes
// holding an empty ext4 with bound's inodes, and mounts it at `at` (made if
// missing; its top is root's, 0755). An error leaves neither the file nor
// the mount.
Status make_bounded_disk(const std::string& image, const std::string& at, const DiskBound& bound);

// Mounts the disk `image` at `at` unless something is mounted there already
// (an edtd restarted after the host: the file stayed, its mount did not).
// Where a loop device still has the file behind it (a container's bind of
// it outlived the host's mount), that device is mounted: a second one would
// give the ext4 a second superblock.
Status mount_bounded_disk(const std::string& image, const std::string& at);

// Unmounts `at` if a disk is mounted there (lazily: a process that still
// holds a file of it keeps the disk until it lets go), and removes `image`.
// Nothing there is not an error.
Status remove_bounded_disk(const std::string& image, const std::string& at);

// Whether `path` is the top of a mount of another file system than the
// directory above it.
bool is_mount_point(const std::string& path);

}  // namespace edt::control

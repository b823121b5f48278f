// One pass over a layer: an outer libarchive reader undoes the compression
// (format "raw"), an inner one reads the tar from it through a callback that
// hashes and counts every uncompressed byte, so that the diff ID and the
// byte bound cost no second read.
#include "image/layer.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <vector>

#include "image/safe_fs.h"

namespace edt::image {
namespace {

struct ArchiveFree {
  void operator()(archive* a) const { archive_read_free(a); }
};
using ArchivePtr = std::unique_ptr<archive, ArchiveFree>;

// The uncompressed stream, as the inner reader sees it.
struct Stream {
  archive* outer = nullptr;
  Sha256 hash;
  uint64_t bytes = 0;
  uint64_t max_bytes = 0;
  ImageBytes* image = nullptr;
  bool over = false;
  std::vector<char> buf = std::vector<char>(1 << 17);

  // Hashes and counts the `n` bytes read into buf; false past a bound.
  bool count(size_t n) {
    hash.update(buf.data(), n);
    bytes += n;
    const bool image_ok = image == nullptr || image->add(n);
    return bytes <= max_bytes && image_ok;
  }
};

la_ssize_t read_stream(archive* inner, void* opaque, const void** out) {
  auto* s = static_cast<Stream*>(opaque);
  la_ssize_t n = archive_read_data(s->outer, s->buf.data(), s->buf.size());
  if (n < 0) {
    archive_set_error(inner, EIO, "%s", archive_error_string(s->outer));
    return -1;
  }
  if (!s->count(n)) {
    s->over = true;
    archive_set_error(inner, EFBIG, "over the bound of unpacked bytes");
    return -1;
  }
  *out = s->buf.data();
  return n;
}

// Deeper paths are refused: removing and assembling trees recurse once
// per directory, and no real image nests anywhere near this.
constexpr size_t kMaxDepth = 512;

struct DirMode {
  std::vector<std::string> names;
  mode_t mode;
};

class Unpacker {
 public:
  Unpacker(int root, const LayerLimits& limits, const Stream& stream)
      : root_(root), limits_(limits), stream_(stream) {}
  Status entry(archive* a, archive_entry* e);
  Status finish();
  LayerStats stats;
  uint64_t file_bytes = 0;

 private:
  Status check_setid(mode_t& mode, const std::string& path);
  Status regular(archive* a, archive_entry* e, int parent, const std::string& name, mode_t mode);
  Status symlink(archive_entry* e, const std::vector<std::string>& names, int parent);
  Status hardlink(archive_entry* e, int parent, const std::string& name);
  Status directory(int parent, const std::vector<std::string>& names, mode_t mode);
  Status whiteout(archive* a, archive_entry* e, int parent, const std::string& name);
  void own(archive_entry* e, int parent, const std::string& name);
  // What the image's bound leaves this layer: what it has left now and what
  // this layer's stream has taken of it so far.
  uint64_t image_left() const { return limits_.image ? limits_.image->left() + stream_.bytes : ~0ull; }

  int root_;
  LayerLimits limits_;
  const Stream& stream_;
  std::vector<DirMode> dirs_;
  bool as_root_ = ::geteuid() == 0;
};

Status Unpacker::check_setid(mode_t& mode, const std::string& path) {
  if ((mode & (S_ISUID | S_ISGID)) == 0) return Status::ok();
  if (limits_.setid == SetidPolicy::kRefuse) {
    return invalid_argument("'" + path + "' is setuid or setgid, and the store refuses such files");
  }
  mode &= ~(S_ISUID | S_ISGID);
  ++stats.setid_stripped;
  return Status::ok();
}

void Unpacker::own(archive_entry* e, int parent, const std::string& name) {
  // Owners are kept only where edt may set them (as root); else the files
  // are the store's user's, and the container's user namespace maps them.
  if (as_root_) ::fchownat(parent, name.c_str(), archive_entry_uid(e), archive_entry_gid(e), AT_SYMLINK_NOFOLLOW);
}

Status Unpacker::regular(archive* a, archive_entry* e, int parent, const std::string& name, mode_t mode) {
  const int64_t size = archive_entry_size(e);
  file_bytes += size > 0 ? size : 0;
  if (file_bytes > limits_.max_bytes || file_bytes > image_left()) {
    return Status(StatusCode::kResourceExhausted, "files' sizes pass the bound of unpacked bytes");
  }
  int fd = ::openat(parent, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return io_error("create", errno);
  UniqueFd file(fd);
  const void* block;
  size_t length;
  la_int64_t offset;
  int r;
  while ((r = archive_read_data_block(a, &block, &length, &offset)) == ARCHIVE_OK) {
    if (offset + static_cast<int64_t>(length) > size) return invalid_argument("data past the entry's declared size");
    for (size_t done = 0; done < length;) {
      ssize_t n = ::pwrite(fd, static_cast<const char*>(block) + done, length - done, offset + done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return io_error("write", errno);
      done += n;
    }
  }
  if (r != ARCHIVE_EOF) return Status(StatusCode::kMalformed, std::string("tar data: ") + archive_error_string(a));
  if (::ftruncate(fd, size) != 0) return io_error("truncate", errno);
  own(e, parent, name);
  if (::fchmod(fd, mode) != 0) return io_error("chmod", errno);
  const struct timespec times[2] = {{archive_entry_mtime(e), 0}, {archive_entry_mtime(e), 0}};
  ::futimens(fd, times);
  return Status::ok();
}

// Whether a relative link target, read from the link's directory (`depth`
// names below the root), climbs above the root.
bool climbs_out(size_t depth, std::string_view target) {
  if (!target.empty() && target.front() == '/') return false;
  int64_t level = static_cast<int64_t>(depth);
  size_t start = 0;
  while (start <= target.size()) {
    size_t end = target.find('/', start);
    if (end == std::string_view::npos) end = target.size();
    std::string_view name = target.substr(start, end - start);
    if (name == "..") {
      if (--level < 0) return true;
    } else if (!name.empty() && name != ".") {
      ++level;
    }
    start = end + 1;
  }
  return false;
}

Status Unpacker::symlink(archive_entry* e, const std::vector<std::string>& names, int parent) {
  const char* target = archive_entry_symlink(e);
  if (target == nullptr || *target == '\0') return invalid_argument("symbolic link with no target");
  if (climbs_out(names.size() - 1, target)) {
    return invalid_argument(std::string("symbolic link to '") + target + "' points out of the image's root");
  }
  if (::symlinkat(target, parent, names.back().c_str()) != 0) return io_error("symlink", errno);
  own(e, parent, names.back());
  const struct timespec times[2] = {{archive_entry_mtime(e), 0}, {archive_entry_mtime(e), 0}};
  ::utimensat(parent, names.back().c_str(), times, AT_SYMLINK_NOFOLLOW);
  return Status::ok();
}

Status Unpacker::hardlink(archive_entry* e, int parent, const std::string& name) {
  const std::string target = archive_entry_hardlink(e);
  auto names = split_relative(target);
  if (!names.is_ok() || names->empty()) return invalid_argument("hard link to '" + target + "', outside the layer");
  const std::string leaf = names->back();
  names->pop_back();
  auto dir = open_dir_beneath(root_, *names, false);
  if (!dir.is_ok()) return invalid_argument("hard link to '" + target + "': " + dir.status().message());
  struct stat st;
  if (::fstatat(dir->get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || S_ISDIR(st.st_mode)) {
    return invalid_argument("hard link to '" + target + "', which is no file earlier in this layer");
  }
  if (::linkat(dir->get(), leaf.c_str(), parent, name.c_str(), 0) != 0) return io_error("link", errno);
  return Status::ok();
}

Status Unpacker::directory(int parent, const std::vector<std::string>& names, mode_t mode) {
  struct stat st;
  const char* name = names.back().c_str();
  if (::fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode)) {
    EDT_RETURN_IF_ERROR(remove_at(parent, names.back()));
  }
  if (::mkdirat(parent, name, 0700) != 0 && errno != EEXIST) return io_error("mkdir", errno);
  // Modes are set at the end: a 0555 directory must take its entries first.
  dirs_.push_back({names, mode});
  return Status::ok();
}

// Kept as an empty marker file; assemble_root() applies it. ".wh.." or
// ".wh..." would hide the directory itself or its parent.
Status Unpacker::whiteout(archive* a, archive_entry* e, int parent, const std::string& name) {
  const std::string hidden = name.substr(4);
  if (hidden.empty() || hidden == "." || hidden == "..") {
    return invalid_argument("a whiteout of '" + hidden + "', which names no entry of the directory");
  }
  return regular(a, e, parent, name, 0600);
}

Status Unpacker::entry(archive* a, archive_entry* e) {
  if (++stats.entries > limits_.max_entries) {
    return Status(StatusCode::kResourceExhausted, "more than " + std::to_string(limits_.max_entries) + " entries");
  }
  const char* raw = archive_entry_pathname(e);
  if (raw == nullptr) return invalid_argument("an entry whose name cannot be read");
  // "/" alone, a directory, is the root itself as umoci writes it: as "./".
  const bool root_dir = std::string_view(raw) == "/" && archive_entry_filetype(e) == AE_IFDIR;
  EDT_ASSIGN_OR_RETURN(std::vector<std::string> names, split_relative(root_dir ? "." : raw));
  if (names.empty()) return Status::ok();  // "./", the root itself: the store owns its mode
  if (names.size() > kMaxDepth) {
    return invalid_argument("a path " + std::to_string(names.size()) + " names deep, more than " +
                            std::to_string(kMaxDepth));
  }
  mode_t mode = archive_entry_perm(e);
  const mode_t type = archive_entry_filetype(e);
  // A setgid directory only passes its group on: no privilege to drop.
  if (type != AE_IFDIR) EDT_RETURN_IF_ERROR(check_setid(mode, raw));
  std::vector<std::string> parent_names(names.begin(), names.end() - 1);
  EDT_ASSIGN_OR_RETURN(UniqueFd parent, open_dir_beneath(root_, parent_names, true));
  const std::string& name = names.back();
  if (type != AE_IFDIR) EDT_RETURN_IF_ERROR(remove_at(parent.get(), name));  // a later entry wins
  if (archive_entry_hardlink(e) != nullptr) return hardlink(e, parent.get(), name);
  if (name.rfind(".wh.", 0) == 0) return whiteout(a, e, parent.get(), name);
  switch (type) {
    case AE_IFREG: return regular(a, e, parent.get(), name, mode);
    case AE_IFDIR: return directory(parent.get(), names, mode);
    case AE_IFLNK: return symlink(e, names, parent.get());
    case AE_IFIFO:
      if (::mkfifoat(parent.get(), name.c_str(), mode) != 0) return io_error("mkfifo", errno);
      return Status::ok();
    case AE_IFCHR:
    case AE_IFBLK: return invalid_argument("a device node; images may not carry devices");
    default: return invalid_argument("an entry of a type the store does not unpack (socket or unknown)");
  }
}

Status Unpacker::finish() {
  for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
    auto dir = open_dir_beneath(root_, it->names, false);
    // A store that is not root keeps its own way into every directory.
    if (dir.is_ok()) ::fchmod(dir->get(), as_root_ ? it->mode : it->mode | 0700);
  }
  return Status::ok();
}

Result<ArchivePtr> open_outer(const std::string& path) {
  ArchivePtr outer(archive_read_new());
  archive_read_support_filter_gzip(outer.get());
  archive_read_support_filter_zstd(outer.get());
  archive_read_support_format_raw(outer.get());
  archive_entry* e;
  if (archive_read_open_filename(outer.get(), path.c_str(), 1 << 17) != ARCHIVE_OK ||
      archive_read_next_header(outer.get(), &e) != ARCHIVE_OK) {
    return Status(StatusCode::kMalformed, std::string("not a plain, gzip or zstd stream: ") +
                                              archive_error_string(outer.get()));
  }
  return outer;
}

Status over_bound(const Stream& s) {
  if (s.bytes <= s.max_bytes) {
    return Status(StatusCode::kResourceExhausted, "the image's layers unpack to more than its bound of " +
                                                      std::to_string(s.image->bound()) + " bytes");
  }
  return Status(StatusCode::kResourceExhausted,
                "more than " + std::to_string(s.max_bytes) + " unpacked bytes (a decompression bomb?)");
}

Status drain(Stream& s) {
  for (;;) {
    la_ssize_t n = archive_read_data(s.outer, s.buf.data(), s.buf.size());
    if (n < 0) return Status(StatusCode::kMalformed, archive_error_string(s.outer));
    if (n == 0) return Status::ok();
    if (!s.count(n)) return over_bound(s);
  }
}

Status unpack_entries(archive* inner, Unpacker& unpacker, Stream& stream) {
  archive_entry* e;
  for (;;) {
    int r = archive_read_next_header(inner, &e);
    if (r == ARCHIVE_EOF) return Status::ok();
    if (stream.over) return over_bound(stream);
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
      return Status(StatusCode::kMalformed, std::string("not a tar: ") + archive_error_string(inner));
    }
    std::string name = archive_entry_pathname(e) ? archive_entry_pathname(e) : "?";
    Status status = unpacker.entry(inner, e);
    if (stream.over) status = over_bound(stream);
    if (name.size() > 200) name = name.substr(0, 200) + "...";  // a hostile name may be megabytes
    if (!status.is_ok()) return status.with_context("entry '" + name + "'");
  }
}

}  // namespace

Result<LayerStats> unpack_layer(const std::string& blob_path, const Digest& blob, int dest_fd,
                                const LayerLimits& limits) {
  const std::string where = "layer " + blob.str();
  auto outer = open_outer(blob_path);
  if (!outer.is_ok()) return outer.status().with_context(where);
  Stream stream;
  stream.outer = outer->get();
  stream.max_bytes = limits.max_bytes;
  stream.image = limits.image;
  ArchivePtr inner(archive_read_new());
  archive_read_support_format_tar(inner.get());
  archive_read_support_format_gnutar(inner.get());
  if (archive_read_open(inner.get(), &stream, nullptr, read_stream, nullptr) != ARCHIVE_OK) {
    return (stream.over ? over_bound(stream)
                        : Status(StatusCode::kMalformed, std::string("not a tar: ") + archive_error_string(inner.get())))
        .with_context(where);
  }
  Unpacker unpacker(dest_fd, limits, stream);
  Status status = unpack_entries(inner.get(), unpacker, stream);
  if (status.is_ok()) status = drain(stream);
  if (status.is_ok()) status = unpacker.finish();
  if (!status.is_ok()) return status.with_context(where);
  unpacker.stats.bytes = stream.bytes;
  unpacker.stats.diff_id = stream.hash.finish();
  return unpacker.stats;
}

}  // namespace edt::image

// What the image store's tests build by hand: tar layers (plain, gzip or
// zstd, hostile ones too), OCI layouts and docker save archives.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "image/digest.h"

namespace edt::image::testing {

struct TarEntry {
  enum Type { kFile, kDir, kSymlink, kHardlink, kCharDevice, kFifo };
  std::string path;
  Type type = kFile;
  std::string data;  // a file's content
  std::string link;  // a link's target
  mode_t mode = 0644;
};

enum class Compression { kNone, kGzip, kZstd };

inline TarEntry file(std::string path, std::string data, mode_t mode = 0644) {
  return {std::move(path), TarEntry::kFile, std::move(data), "", mode};
}
inline TarEntry dir(std::string path, mode_t mode = 0755) { return {std::move(path), TarEntry::kDir, "", "", mode}; }
inline TarEntry symlink(std::string path, std::string target) {
  return {std::move(path), TarEntry::kSymlink, "", std::move(target), 0777};
}
inline TarEntry hardlink(std::string path, std::string target) {
  return {std::move(path), TarEntry::kHardlink, "", std::move(target), 0644};
}

std::string make_tar(const std::vector<TarEntry>& entries, Compression compression = Compression::kNone);
// A file of `size` zero bytes, gzip compressed: a decompression bomb.
std::string zero_file_tar_gz(const std::string& path, size_t size);

struct Layer {
  std::string blob;  // as stored (compressed or not)
  Digest diff_id;    // of the uncompressed tar
  std::string media_type;
};
Layer make_layer(const std::vector<TarEntry>& entries, Compression compression = Compression::kGzip);

// An image config with these fields and diff IDs.
std::string make_config(const std::vector<Layer>& layers, const std::map<std::string, std::string>& labels = {},
                        const std::string& architecture = "amd64");

// Writes an OCI layout at `dir`: blobs, a manifest, and an index.json that
// names it `ref_name`. With `arm_too`, index.json points to a nested index
// of an arm64 and an amd64 manifest. `size_delta` is added to the first
// layer's declared size (a manifest that lies). Returns the amd64 manifest's digest.
Digest write_oci_layout(const std::string& dir, const std::vector<Layer>& layers, const std::string& ref_name,
                        bool arm_too = false, int64_t size_delta = 0);

// A tar of the tree at `dir` (every regular file), as `tar -C dir .` makes.
std::string tar_of_dir(const std::string& dir, Compression compression = Compression::kNone);

// A docker save archive of one image tagged `tag`; its last layer is
// stored twice, the second time as a symbolic link, as older Docker did.
std::string make_docker_archive(const std::vector<Layer>& layers, const std::string& tag);

void write_bytes(const std::string& path, const std::string& bytes);
std::string read_bytes(const std::string& path);
// How many names a directory holds.
size_t count_entries(const std::string& dir);

// A fresh directory under /tmp, removed (0555 directories too) when it goes.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace edt::image::testing

#include "image/test_images.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "image/oci.h"
#include "image/safe_fs.h"

namespace edt::image::testing {
namespace {

using json = nlohmann::json;

la_ssize_t append(archive*, void* out, const void* data, size_t size) {
  static_cast<std::string*>(out)->append(static_cast<const char*>(data), size);
  return static_cast<la_ssize_t>(size);
}

archive* open_writer(std::string& out, Compression compression) {
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  if (compression == Compression::kGzip) {
    archive_write_add_filter_gzip(a);
    archive_write_set_options(a, "gzip:!timestamp");  // the same bytes every second
  }
  if (compression == Compression::kZstd) archive_write_add_filter_zstd(a);
  archive_write_set_bytes_in_last_block(a, 1);
  if (archive_write_open(a, &out, nullptr, append, nullptr) != ARCHIVE_OK) throw std::runtime_error("archive open");
  return a;
}

void write_entry(archive* a, const TarEntry& t) {
  archive_entry* e = archive_entry_new();
  archive_entry_set_pathname(e, t.path.c_str());
  archive_entry_set_perm(e, t.mode);
  archive_entry_set_mtime(e, 1700000000, 0);
  switch (t.type) {
    case TarEntry::kFile: archive_entry_set_filetype(e, AE_IFREG); archive_entry_set_size(e, t.data.size()); break;
    case TarEntry::kDir: archive_entry_set_filetype(e, AE_IFDIR); break;
    case TarEntry::kSymlink: archive_entry_set_filetype(e, AE_IFLNK); archive_entry_set_symlink(e, t.link.c_str()); break;
    case TarEntry::kHardlink:
      archive_entry_set_filetype(e, AE_IFREG);
      archive_entry_set_hardlink(e, t.link.c_str());
      break;
    case TarEntry::kCharDevice: archive_entry_set_filetype(e, AE_IFCHR); archive_entry_set_rdev(e, 0x0103); break;
    case TarEntry::kFifo: archive_entry_set_filetype(e, AE_IFIFO); break;
  }
  if (archive_write_header(a, e) != ARCHIVE_OK) throw std::runtime_error(archive_error_string(a));
  if (t.type == TarEntry::kFile && !t.data.empty()) archive_write_data(a, t.data.data(), t.data.size());
  archive_entry_free(e);
}

void close_writer(archive* a) {
  archive_write_close(a);
  archive_write_free(a);
}

const char* media_type_of(Compression c) {
  if (c == Compression::kGzip) return "application/vnd.oci.image.layer.v1.tar+gzip";
  if (c == Compression::kZstd) return "application/vnd.oci.image.layer.v1.tar+zstd";
  return "application/vnd.oci.image.layer.v1.tar";
}

json descriptor(const std::string& media_type, const std::string& blob, int64_t size_delta = 0) {
  return json{{"mediaType", media_type}, {"digest", sha256_of(blob).str()},
              {"size", static_cast<int64_t>(blob.size()) + size_delta}};
}

void put_layout_blob(const std::string& dir, const std::string& blob) {
  write_bytes(dir + "/blobs/sha256/" + sha256_of(blob).hex, blob);
}

}  // namespace

std::string make_tar(const std::vector<TarEntry>& entries, Compression compression) {
  std::string out;
  archive* a = open_writer(out, compression);
  for (const TarEntry& t : entries) write_entry(a, t);
  close_writer(a);
  return out;
}

std::string zero_file_tar_gz(const std::string& path, size_t size) {
  std::string out;
  archive* a = open_writer(out, Compression::kGzip);
  archive_entry* e = archive_entry_new();
  archive_entry_set_pathname(e, path.c_str());
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_perm(e, 0644);
  archive_entry_set_size(e, size);
  archive_write_header(a, e);
  std::string zeros(1 << 20, '\0');
  for (size_t done = 0; done < size; done += zeros.size()) archive_write_data(a, zeros.data(), std::min(zeros.size(), size - done));
  archive_entry_free(e);
  close_writer(a);
  return out;
}

Layer make_layer(const std::vector<TarEntry>& entries, Compression compression) {
  return Layer{make_tar(entries, compression), sha256_of(make_tar(entries)), media_type_of(compression)};
}

std::string make_config(const std::vector<Layer>& layers, const std::map<std::string, std::string>& labels,
                        const std::string& architecture) {
  json ids = json::array();
  for (const Layer& l : layers) ids.push_back(l.diff_id.str());
  json config{{"Env", {"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}}, {"WorkingDir", "/work"}, {"User", "1000:1000"},
              {"Cmd", {"python3"}}, {"Labels", labels}};
  return json{{"architecture", architecture}, {"os", "linux"}, {"config", config},
              {"rootfs", {{"type", "layers"}, {"diff_ids", ids}}}}.dump();
}

Digest write_oci_layout(const std::string& dir, const std::vector<Layer>& layers, const std::string& ref_name,
                        bool arm_too, int64_t size_delta) {
  std::filesystem::create_directories(dir + "/blobs/sha256");
  write_bytes(dir + "/oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
  auto manifest_for = [&](const std::string& arch) {
    const std::string config = make_config(layers, {{"org.edt.frameworks", "torch"}}, arch);
    put_layout_blob(dir, config);
    json doc{{"schemaVersion", 2}, {"mediaType", kOciManifest}, {"config", descriptor(kOciConfig, config)}};
    doc["layers"] = json::array();
    for (size_t i = 0; i < layers.size(); ++i) {
      put_layout_blob(dir, layers[i].blob);
      doc["layers"].push_back(descriptor(layers[i].media_type, layers[i].blob, i == 0 ? size_delta : 0));
    }
    put_layout_blob(dir, doc.dump());
    json d = descriptor(kOciManifest, doc.dump());
    d["platform"] = {{"os", "linux"}, {"architecture", arch}};
    return d;
  };
  json amd64 = manifest_for("amd64");
  json top = amd64;
  if (arm_too) {
    json nested{{"schemaVersion", 2}, {"manifests", {manifest_for("arm64"), amd64}}};
    put_layout_blob(dir, nested.dump());
    top = descriptor("application/vnd.oci.image.index.v1+json", nested.dump());
  }
  top["annotations"] = {{"org.opencontainers.image.ref.name", ref_name}};
  write_bytes(dir + "/index.json", json{{"schemaVersion", 2}, {"manifests", {top}}}.dump());
  return Digest{amd64["digest"].get<std::string>().substr(7)};
}

std::string tar_of_dir(const std::string& dir, Compression compression) {
  std::vector<TarEntry> entries;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    entries.push_back(file("./" + std::filesystem::relative(e.path(), dir).string(), data));
  }
  return make_tar(entries, compression);
}

std::string make_docker_archive(const std::vector<Layer>& layers, const std::string& tag) {
  std::vector<TarEntry> entries;
  json paths = json::array();
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string path = "layer" + std::to_string(i) + "/layer.tar";
    entries.push_back(file(path, layers[i].blob));
    paths.push_back(path);
  }
  // The last layer once more, as a link to the first copy.
  entries.push_back(symlink("again/layer.tar", "../" + paths.back().get<std::string>()));
  paths.push_back("again/layer.tar");
  std::vector<Layer> with_again = layers;
  with_again.push_back(layers.back());
  const std::string config = make_config(with_again);
  entries.push_back(file(sha256_of(config).hex + ".json", config));
  json manifest = json::array({{{"Config", sha256_of(config).hex + ".json"}, {"RepoTags", {tag}}, {"Layers", paths}}});
  entries.push_back(file("manifest.json", manifest.dump()));
  return make_tar(entries);
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

size_t count_entries(const std::string& dir) {
  size_t n = 0;
  for (auto it = std::filesystem::directory_iterator(dir); it != std::filesystem::directory_iterator(); ++it) ++n;
  return n;
}

ScratchDir::ScratchDir(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp " + tmpl);
  path_ = tmpl;
}

ScratchDir::~ScratchDir() {
  auto parent = open_dir("/tmp");
  if (parent.is_ok()) (void)remove_at(parent->get(), std::filesystem::path(path_).filename().string());
}

}  // namespace edt::image::testing

// The image store's unpack rate on a generated multi-layer OCI layout,
// beside umoci (when installed), and the cost of an image's root as
// hard-link trees beside an overlay mount of the same layers (as root).
//   image_bench [--layers N] [--layer-mb M] [--dir DIR]
//   image_bench --write-layout DIR [--layers N] [--layer-mb M]   # only writes the layout (pull_bench.py)
// Prints one line per measurement; bench/images/RESULTS.md keeps figures.
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>

#include "image/assemble.h"
#include "image/import.h"
#include "image/test_images.h"

namespace {

using namespace edt::image;
using namespace edt::image::testing;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Layers of 64 KiB files, half random bytes and half text, so that gzip
// has work of both kinds.
std::vector<Layer> make_layers(int count, int layer_mb) {
  std::mt19937_64 rng(42);
  std::vector<Layer> layers;
  for (int l = 0; l < count; ++l) {
    std::vector<TarEntry> entries;
    for (int f = 0; f < layer_mb * 16; ++f) {
      std::string data(64 << 10, '\0');
      for (size_t i = 0; i < data.size() / 2; i += 8) *reinterpret_cast<uint64_t*>(&data[i]) = rng();
      for (size_t i = data.size() / 2; i < data.size(); ++i) data[i] = "import torch\n"[i % 13];
      entries.push_back(file("l" + std::to_string(l) + "/d" + std::to_string(f % 32) + "/f" + std::to_string(f), data));
    }
    layers.push_back(make_layer(entries, Compression::kGzip));
  }
  return layers;
}

int run_command(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()); }

void bench_umoci(const std::string& dir, double mb) {
  if (run_command("command -v umoci") != 0) {
    std::printf("umoci: not installed\n");
    return;
  }
  auto t0 = Clock::now();
  int rc = run_command("umoci unpack --rootless --image " + dir + "/layout:latest " + dir + "/bundle");
  const double s = seconds_since(t0);
  if (rc != 0) {
    std::printf("umoci: unpack failed (exit %d)\n", rc);
    return;
  }
  std::printf("umoci unpack --rootless     %7.2f s  %7.1f MB/s\n", s, mb / s);
}

void bench_roots(const std::string& dir, const ImageRecord& record) {
  std::vector<std::string> trees;
  std::string lower;
  for (auto it = record.layers.rbegin(); it != record.layers.rend(); ++it) {
    trees.insert(trees.begin(), dir + "/store/layers/sha256/" + it->diff_id.hex + "/tree");
    lower += (lower.empty() ? "" : ":") + trees.front();
  }
  fs::create_directories(dir + "/linked");
  auto t0 = Clock::now();
  auto dest = open_dir(dir + "/linked");
  edt::Status status = dest.is_ok() ? assemble_root(trees, dest->get()) : dest.status();
  std::printf("root as hard-link trees     %7.3f s  (%s)\n", seconds_since(t0), status.is_ok() ? "ok" : status.message().c_str());
  fs::create_directories(dir + "/overlay");
  t0 = Clock::now();
  if (::mount("overlay", (dir + "/overlay").c_str(), "overlay", MS_RDONLY, ("lowerdir=" + lower).c_str()) != 0) {
    std::printf("root as an overlay mount    not possible here: %s\n", std::strerror(errno));
    return;
  }
  const double mount_s = seconds_since(t0);
  ::umount((dir + "/overlay").c_str());
  std::printf("root as an overlay mount    %7.2f ms (per container; needs CAP_SYS_ADMIN or a user namespace)\n",
              mount_s * 1e3);
}

}  // namespace

int main(int argc, char** argv) {
  int layers = 10, layer_mb = 20;
  std::string dir = "/tmp/edt-image-bench", layout_only;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--layers") layers = std::atoi(argv[i + 1]);
    if (flag == "--layer-mb") layer_mb = std::atoi(argv[i + 1]);
    if (flag == "--dir") dir = argv[i + 1];
    if (flag == "--write-layout") layout_only = argv[i + 1];
  }
  if (!layout_only.empty()) {
    write_oci_layout(layout_only, make_layers(layers, layer_mb), "latest");
    return 0;
  }
  fs::remove_all(dir);
  auto generated = make_layers(layers, layer_mb);
  write_oci_layout(dir + "/layout", generated, "latest");
  const double mb = layers * layer_mb * 1.048576;
  std::printf("image: %d layers of %d MiB (gzip), %.0f MB unpacked\n", layers, layer_mb, mb);
  auto store = Store::open(dir + "/store");
  if (!store.is_ok()) return std::fprintf(stderr, "%s\n", store.status().to_string().c_str()), 1;
  ::sync();
  auto t0 = Clock::now();
  auto record = import_path(*store, dir + "/layout", {"bench:1"});
  const double s = seconds_since(t0);
  if (!record.is_ok()) return std::fprintf(stderr, "%s\n", record.status().to_string().c_str()), 1;
  std::printf("edt-image import            %7.2f s  %7.1f MB/s (verify, unpack, root, syncfs)\n", s, mb / s);
  t0 = Clock::now();
  (void)import_path(*store, dir + "/layout", {"bench:2"});
  std::printf("edt-image import, cached    %7.3f s\n", seconds_since(t0));
  ::sync();
  bench_umoci(dir, mb);
  bench_roots(dir, *record);
  fs::remove_all(dir);
  return 0;
}

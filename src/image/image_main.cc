// edt-image: the image store from the command line (docs/images.md).
//   edt-image --store DIR import FILE|DIR [--name N]
//   edt-image --store DIR pull REFERENCE --name N [--ca-file F] [--mirror R=URL]... [--username U]
//   edt-image --store DIR list | inspect NAME | rm NAME | gc
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "image/import.h"
#include "image/record.h"
#include "image/registry.h"
#include "image/store.h"

namespace {

using namespace edt::image;

int fail(const edt::Status& status) {
  std::fprintf(stderr, "edt-image: %s\n", status.message().c_str());
  if (!status.fix().empty()) std::fprintf(stderr, "  fix: %s\n", status.fix().c_str());
  return 1;
}

uint64_t total_unpacked(const ImageRecord& r) {
  uint64_t bytes = 0;
  for (const LayerRecord& l : r.layers) bytes += l.unpacked_bytes;
  return bytes;
}

int list(const Store& store) {
  auto records = store.list();
  if (!records.is_ok()) return fail(records.status());
  std::printf("%-40s %-14s %7s %10s\n", "NAME", "MANIFEST", "LAYERS", "SIZE(MB)");
  for (const ImageRecord& r : *records) {
    std::printf("%-40s %-14s %7zu %10.1f\n", r.name.c_str(), r.manifest.short_str().c_str(), r.layers.size(),
                total_unpacked(r) / 1e6);
  }
  return 0;
}

int print_gc(const edt::Result<GcStats>& freed) {
  if (!freed.is_ok()) return fail(freed.status());
  std::printf("freed %llu blobs, %llu layers, %llu roots\n", static_cast<unsigned long long>(freed->blobs),
              static_cast<unsigned long long>(freed->layers), static_cast<unsigned long long>(freed->roots));
  return 0;
}

// The password from the environment (EDT_REGISTRY_PASSWORD) or stdin's
// first line: never a flag, which ps shows.
int pull(Store& store, const std::string& reference, PullOptions options) {
  auto ref = parse_reference(reference);
  if (!ref.is_ok()) return fail(ref.status());
  if (!options.credentials.username.empty()) {
    const char* env = std::getenv("EDT_REGISTRY_PASSWORD");
    if (env) options.credentials.password = env;
    else std::getline(std::cin, options.credentials.password);
  }
  auto lock = store.lock();
  if (!lock.is_ok()) return fail(lock.status());
  PullStats stats;
  auto record = pull_image(store, *lock, *ref, options, &stats);
  if (!record.is_ok()) return fail(record.status());
  std::printf("%s %s %zu layers, root %s; fetched %llu blobs, %llu bytes; %llu blobs reused\n", record->name.c_str(),
              record->manifest.str().c_str(), record->layers.size(), record->root.c_str(),
              static_cast<unsigned long long>(stats.fetched_blobs), static_cast<unsigned long long>(stats.fetched_bytes),
              static_cast<unsigned long long>(stats.reused_blobs));
  return 0;
}

int run(const std::string& command, const std::string& store_dir, const std::string& target,
        const ImportOptions& options, const StoreLimits& limits, const PullOptions& pulling) {
  auto store = Store::open(store_dir, limits);
  if (!store.is_ok()) return fail(store.status());
  if (command == "list") return list(*store);
  if (command == "pull") return pull(*store, target, pulling);
  if (command == "import") {
    auto record = import_path(*store, target, options);
    if (!record.is_ok()) return fail(record.status());
    std::printf("%s %s %zu layers, root %s\n", record->name.c_str(), record->manifest.str().c_str(),
                record->layers.size(), record->root.c_str());
    return 0;
  }
  if (command == "inspect") {
    auto record = store->get(target);
    if (!record.is_ok()) return fail(record.status());
    std::cout << record_to_json(*record);
    return 0;
  }
  auto lock = store->lock();
  if (!lock.is_ok()) return fail(lock.status());
  return print_gc(command == "rm" ? store->remove(*lock, target) : store->gc(*lock));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"edt-image: import, pull, list and remove images of an edt image store"};
  app.require_subcommand(1);
  std::string store_dir = "/var/lib/edt/images", target, setid = "strip";
  ImportOptions options;
  StoreLimits limits;
  app.add_option("--store", store_dir, "the store's directory")->capture_default_str();
  app.add_option("--max-layer-bytes", limits.layer.max_bytes, "bound of one layer's unpacked bytes")->capture_default_str();
  app.add_option("--max-image-bytes", limits.max_image_bytes, "bound of an image's unpacked bytes")->capture_default_str();
  app.add_option("--setid", setid, "setuid/setgid files: strip the bits, or refuse the layer")
      ->check(CLI::IsMember({"strip", "refuse"}))->capture_default_str();
  auto* import = app.add_subcommand("import", "import an OCI layout (directory or tar) or a docker save tar");
  import->add_option("path", target, "the layout or archive")->required();
  import->add_option("--name", options.name, "the image's name (default: the one the archive gives)");
  PullOptions pulling;
  std::vector<std::string> mirrors;
  auto* pull_cmd = app.add_subcommand("pull", "pull an image from an OCI registry (docs/images.md)");
  pull_cmd->add_option("reference", target, "REGISTRY/REPOSITORY:TAG or ...@sha256:HEX")->required();
  pull_cmd->add_option("--name", pulling.name, "the image's name")->required();
  pull_cmd->add_option("--ca-file", pulling.registry.ca_file, "trust the registry's certificate from these CAs");
  pull_cmd->add_option("--mirror", mirrors, "REGISTRY=URL: ask this mirror first, anonymously; repeatable");
  pull_cmd->add_option("--username", pulling.credentials.username,
                       "the registry's user; the password from EDT_REGISTRY_PASSWORD, else stdin");
  app.add_subcommand("list", "list the images");
  for (const char* name : {"inspect", "rm"}) {
    app.add_subcommand(name, std::string(name) == "rm" ? "remove an image and free what no other uses"
                                                       : "print an image's record")
        ->add_option("name", target, "the image's name")->required();
  }
  app.add_subcommand("gc", "free the blobs, layers and roots no image uses");
  CLI11_PARSE(app, argc, argv);
  limits.layer.setid = setid == "refuse" ? SetidPolicy::kRefuse : SetidPolicy::kStrip;
  for (const std::string& m : mirrors) {
    const auto eq = m.find('=');
    if (eq == std::string::npos || eq == 0) return fail(edt::invalid_argument("--mirror " + m + ": write REGISTRY=URL"));
    pulling.registry.mirrors[m.substr(0, eq)] = m.substr(eq + 1);
  }
  return run(app.get_subcommands().front()->get_name(), store_dir, target, options, limits, pulling);
}

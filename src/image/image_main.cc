// edt-image: the image store from the command line (docs/images.md).
//   edt-image --store DIR import FILE|DIR [--name N]
//   edt-image --store DIR list | inspect NAME | rm NAME | gc
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "image/import.h"
#include "image/record.h"
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

int run(const std::string& command, const std::string& store_dir, const std::string& target,
        const ImportOptions& options, const StoreLimits& limits) {
  auto store = Store::open(store_dir, limits);
  if (!store.is_ok()) return fail(store.status());
  if (command == "list") return list(*store);
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
  CLI::App app{"edt-image: import, list and remove images of an edt image store"};
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
  app.add_subcommand("list", "list the images");
  for (const char* name : {"inspect", "rm"}) {
    app.add_subcommand(name, std::string(name) == "rm" ? "remove an image and free what no other uses"
                                                       : "print an image's record")
        ->add_option("name", target, "the image's name")->required();
  }
  app.add_subcommand("gc", "free the blobs, layers and roots no image uses");
  CLI11_PARSE(app, argc, argv);
  limits.layer.setid = setid == "refuse" ? SetidPolicy::kRefuse : SetidPolicy::kStrip;
  return run(app.get_subcommands().front()->get_name(), store_dir, target, options, limits);
}

// edt's OpenSSH for containers of images other than the host's: the host's
// sshd and ssh with every library they load and the host's dynamic loader,
// copied once into <data_dir>/tools/<key>/ and bound read-only at
// kToolsInContainer. A program there runs through the bundle's loader with
// the bundle's lib/ as its only library path, so it needs nothing of the
// image: an image without OpenSSH (most framework images), with an older
// one that lacks an option edt's sshd_config uses, or with another C
// library still gets edt's sshd, and ssh for mpirun's and edtrun's hops.
//
// Layout: lib/ (the loader and the libraries, by the names ldd gives),
// libexec/ (sshd, ssh), bin/ssh (a /bin/sh script that runs libexec/ssh
// through the loader; last on the containers' PATH, so an image's own ssh
// comes first). The key is a hash of the libraries ldd names and of the
// programs' sizes and times: an upgraded host OpenSSH makes a new bundle.
// Made once (container_fs.h, made_once), as etc_links() is. Errors are
// kIoError or the command's; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "edt/status.h"

namespace edt::control {

inline constexpr std::string_view kToolsInContainer = "/run/edt-tools";

struct ToolBundle {
  std::string dir;     // on the host
  std::string loader;  // the loader's file name in lib/ ("ld-linux-x86-64.so.2")
};

// The bundle of the host's /usr/sbin/sshd and /usr/bin/ssh under `data_dir`.
Result<ToolBundle> make_tool_bundle(const std::string& data_dir);

// The argv that runs the bundle's `program` (sshd, ssh) in a container.
std::vector<std::string> bundled_argv(const ToolBundle& bundle, const std::string& program);

}  // namespace edt::control

// An image's root directory assembled from its unpacked layers, lowest
// first, as hard links into the layers' trees.
//
// Files (and links, fifos) of the root are the layers' own inodes, so a
// root costs directories and link counts, not a copy of the data, and two
// images that share layers share those files on disk. The root is therefore
// read-only: a container binds it read-only and writes elsewhere. Directories
// are made anew (mode and owner of the topmost layer that has them).
// Whiteouts are applied as the OCI image spec says: ".wh.NAME" removes NAME
// of the layers below, ".wh..wh..opq" empties its directory of them. Nothing
// follows a symbolic link. Thread-safe on distinct destinations.
#pragma once

#include <string>
#include <vector>

#include "edt/status.h"

namespace edt::image {

// Merges the trees `layer_dirs` (lowest first) into the empty directory
// `dest_fd`.
Status assemble_root(const std::vector<std::string>& layer_dirs, int dest_fd);

}  // namespace edt::image

// A container's files on the host: its own tree under containers/<name>/,
// and the /etc it sees (local_backend.h, "Layout under the data dir").
//
// A container's /etc is assembled, not bound whole: links into the image's
// /etc (bound at /run/host/etc) for what any user may read there, shared by
// the containers of an image (etc_links), with the image's secrets masked
// (unreadable_entries) and the container's own entries bound over the
// links: hostname and shadow (its own), hosts and mpi (the cluster's), on a
// Slurm cluster slurm and munge, and for a container that runs as its own
// user (SandboxSpec::own_user) passwd and group. Its profile.d is a directory of links
// to the image's scripts plus edt.sh, which links to the container's own
// login profile (write_login_profile).
//
// Errors are kIoError naming the path. No state; any thread may call these
// (etc_links is safe against another start making the same links at once).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <sys/types.h>
#include <utility>
#include <vector>

#include "control/backends/backend.h"

namespace edt::control {

// mkdir -p `path`, then chmod `mode` (which a umask does not narrow).
Status make_dirs(const std::string& path, mode_t mode);

// The entries under `etc` (relative paths, and whether each is a directory)
// that any user may not read: the image's secrets (shadow, sshd's host
// keys, munge's key...), which a container does not see.
std::vector<std::pair<std::string, bool>> unreadable_entries(const std::string& etc);

// Gives `path` and everything under it (links themselves, not where they
// lead) to the host's `uid` and `gid`.
Status hand_over(const std::string& path, uint32_t uid, uint32_t gid);

// An image's User `user` (config.User) resolved in the /etc/passwd and
// /etc/group of the image whose root is `root` ("/": the host's), read with
// their links resolved inside the image, so that an image's link never
// names a host file; root for "". Refusals are kInvalidArgument.
Result<ContainerUser> resolve_in_image(const std::string& root, const std::string& user);

// The spec's image_user resolved in its image (resolve_in_image); root for
// a container that runs as its own user, where no other id exists.
Result<ContainerUser> image_login(const SandboxSpec& spec);

// Whether the container has a passwd of its own, made from the image's
// (make_own_tree): any image but the host's (edt's sshd needs its root and
// sshd users) and an image whose User is not root; not a container that
// runs as its own user, whose passwd is its own another way.
bool own_passwd(const SandboxSpec& spec);

// Gives the login user's home on the container's disk (make_own_tree) to
// its ids, which the container maps from the host's `first_id` on (0: no
// user namespace).
Status give_home(const SandboxSpec& spec, const std::string& dir, uint32_t first_id);

// The container's login user (SandboxSpec::login) in `dir`/conf/login.json,
// which read_login() reads back (root's where there is none).
Status write_login(const ContainerUser& login, const std::string& dir);
ContainerUser read_login(const std::string& dir);

// A container's own directories in `dir`: /root, /tmp, /var on its disk
// (`dir`/disk, mounted already), its own files of /etc (hostname; a shadow
// with no password for the image's users; as its own user, the image's
// passwd and group with this process's user and group in them, at home in
// /root, and no tty group; with own_passwd(), the image's passwd with
// root's and sshd's entries where it lacks them and the image's User's
// entry at its login home, and that home on the disk, disk/home, a copy of
// what the image has there), conf/ (login.json among it), and
// what masks the image's secrets (masked/, masked-file).
Status make_own_tree(const SandboxSpec& spec, const std::string& dir);

// SSH in the container `dir`: the cluster's key pair (from `keys`, its
// ssh/ directory) for root and the image's User, a client that binds the container's address on
// `port` and checks host keys against the cluster's CA, and sshd's config
// (conf/sshd_config) on that address with the spec's environment. As its
// own user: sshd on `port` of every address (its node's), and a client
// that finds each peer's node and port in /etc/mpi/ssh_config.
Status write_ssh_config(const SandboxSpec& spec, const std::string& dir, const std::string& keys, int port);

// The login shells' profile, conf/profile.sh (seen at /run/edt/profile.sh,
// which /etc/profile.d/edt.sh links to). A login shell's /etc/profile resets
// PATH (Debian's does), which would lose edt's tools and its venv; this puts
// back the PATH and PYTHONPATH of the spec's environment, what jobs, sshd's
// sessions and notebooks have.
Status write_login_profile(const SandboxSpec& spec, const std::string& dir);

// The directory of links that is the container's /etc, under
// <data_dir>/etc-links/<key>: one per listing of the image's /etc, made
// once (made_once).
Result<std::string> etc_links(const SandboxSpec& spec, const std::string& data_dir);

// The directory `parent`/<key>, <key> a hash of `listing` (what it is
// made from): returned as it is when it exists, else made by `fill` in a
// directory aside (`fill` makes it) and renamed into place, so no reader
// sees it half made and two callers that make it at once both end with
// the same. Returns its path.
Result<std::string> made_once(const std::string& parent, const std::string& listing,
                              const std::function<Status(const std::string&)>& fill);

}  // namespace edt::control

#include "control/backends/local/bwrap_args.h"

#include <unistd.h>

#include <filesystem>
#include <set>

#include "control/backends/local/container_fs.h"
#include "control/backends/local/sandbox_policy.h"
#include "control/backends/local/slurm_files.h"

namespace edt::control {

namespace fs = std::filesystem;

namespace {

using Args = std::vector<std::string>;

void append(Args& a, const Args& more) { a.insert(a.end(), more.begin(), more.end()); }

// Its own UTS, PID and IPC namespaces (and network in bridge mode), and
// the capabilities it keeps; as its own user, a user namespace that maps
// this process's user and group alone, and no capability.
Args namespace_args(const SandboxSpec& spec, const BwrapLayout& layout) {
  Args a = {"/usr/bin/bwrap", "--info-fd", "3", "--seccomp", "4"};
  if (spec.own_user)
    append(a, {"--unshare-user", "--uid", std::to_string(::getuid()), "--gid", std::to_string(::getgid())});
  append(a, {"--unshare-uts", "--unshare-pid", "--unshare-ipc", "--hostname", spec.name, "--cap-drop", "ALL"});
  if (!spec.own_user)
    for (const auto& cap : kept_capabilities()) a.insert(a.end(), {"--cap-add", cap});
  // Bridge mode: start() gives the namespace its interface, then writes fd 5.
  if (layout.own_network) a.insert(a.end(), {"--unshare-net", "--block-fd", "5"});
  return a;
}

// `/path` of the image as it is on the image: a link made in the container
// (never followed on the host), or its directory or file bound read-only.
void image_entry(Args& a, const std::string& root, const std::string& path) {
  const std::string host = root + "/" + path;
  std::error_code ec;
  const auto st = fs::symlink_status(host, ec);
  if (fs::is_symlink(st)) {
    a.insert(a.end(), {"--symlink", fs::read_symlink(host, ec).string(), "/" + path});
  } else if (fs::is_directory(st) || fs::is_regular_file(st)) {
    a.insert(a.end(), {"--ro-bind", host, "/" + path});
  }
}

// The entries of the image's directory `dir` ("" for its top) but `skip`.
// Where edt mounts something of its own below one (its tools at
// /opt/edt/venv, a volume at /workspace/data), that directory is made
// anew in the container and filled entry by entry instead, so edt's mount
// has a place to go and the image's other entries stay.
void image_tree(Args& a, const std::string& root, const std::string& dir, const std::set<std::string>& skip,
                const std::vector<std::string>& edt_paths) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root + "/" + dir, ec)) {
    const std::string path = (dir.empty() ? "" : dir + "/") + entry.path().filename().string();
    if (skip.count(path)) continue;
    bool covered = false, below = false;
    for (const auto& p : edt_paths) {
      covered = covered || p == "/" + path;
      below = below || p.rfind("/" + path + "/", 0) == 0;
    }
    if (covered) continue;
    if (!below) {
      image_entry(a, root, path);
    } else if (fs::is_directory(fs::symlink_status(entry.path(), ec))) {
      a.insert(a.end(), {"--dir", "/" + path});
      image_tree(a, root, path, {}, edt_paths);
    }
  }
}

// The image's /usr, and /bin, /lib... as they are on the image (links or
// directories). An image other than the host's also brings its other
// top-level directories (/opt, /workspace, /app: where images keep their
// software and WorkingDir), read-only: an imported image's root is hard
// links shared with the image store (docs/images.md).
// `home`, when given, is a path edt mounts (the login user's home).
Args image_args(const std::string& root, const std::vector<SandboxMount>& shared, const std::string& home) {
  Args a = {"--ro-bind", root + "/usr", "/usr"};
  for (const char* top : {"bin", "sbin", "lib", "lib32", "lib64", "libx32"}) image_entry(a, root, top);
  if (root.empty()) return a;
  static const std::set<std::string> kOwn = {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "var",
                                             "root", "tmp", "dev", "proc", "sys", "run", "job"};
  std::vector<std::string> edt_paths;
  for (const auto& m : shared) edt_paths.push_back(fs::path(m.path).lexically_normal().string());
  if (!home.empty()) edt_paths.push_back(home);
  image_tree(a, root, "", kOwn, edt_paths);
  return a;
}

// The image's /etc at /run/host/etc with its secrets masked, the links
// over it at /etc, and the container's own files and writable dirs.
Args container_tree_args(const SandboxSpec& spec, const BwrapLayout& layout, const std::string& root) {
  const std::string& dir = layout.dir;
  Args a = {"--ro-bind", root + "/etc", "/run/host/etc"};
  for (const auto& [path, is_dir] : unreadable_entries(root + "/etc"))
    a.insert(a.end(), {"--ro-bind", dir + (is_dir ? "/masked" : "/masked-file"), "/run/host/etc/" + path});
  append(a, {"--ro-bind", layout.etc, "/etc", "--ro-bind", dir + "/etc/hostname", "/etc/hostname", "--ro-bind",
             dir + "/etc/shadow", "/etc/shadow", "--ro-bind", layout.cluster_dir + "/mpi", "/etc/mpi",
             "--bind", dir + "/disk/var", "/var",
             "--bind", dir + "/disk/root", "/root", "--bind", dir + "/disk/tmp", "/tmp", "--dev", "/dev",
             "--proc", "/proc", "--ro-bind", "/sys", "/sys", "--size", std::to_string(spec.shm_bytes), "--tmpfs",
             "/dev/shm", "--dir", "/run/sshd", "--ro-bind", dir + "/conf", "/run/edt"});
  if (spec.job_dir) append(a, {"--ro-bind", layout.cluster_dir + "/mpi", "/job"});
  if (spec.own_user || own_passwd(spec)) append(a, {"--ro-bind", dir + "/etc/passwd", "/etc/passwd"});
  if (spec.own_user) append(a, {"--ro-bind", dir + "/etc/group", "/etc/group"});
  // The image's User at home on the container's disk (container_fs.h).
  if (!spec.login.root()) append(a, {"--bind", dir + "/disk/home", spec.login.home});
  return a;
}

// Its GPUs' device files under the host's names (/dev/nvidia<i>: the
// driver's minor number, which CUDA and NVML match against the driver's
// list; renamed files would be another GPU's), as NVIDIA's container
// toolkit binds them, with the driver's shared devices where the host has
// them. CUDA opens what it finds and numbers it 0..n-1 (container_files.h:
// gpu_env()). A simulated GPU is a stand-in character device.
Args gpu_binds(const std::vector<int>& gpus) {
  Args a;
  std::error_code ec;
  for (int gpu : gpus) {
    const std::string device = "/dev/nvidia" + std::to_string(gpu);
    a.insert(a.end(), {"--dev-bind", fs::exists(device, ec) ? device : "/dev/null", device});
  }
  if (gpus.empty()) return a;
  for (const char* shared : {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"})
    if (fs::exists(shared, ec)) a.insert(a.end(), {"--dev-bind", shared, shared});
  return a;
}

// Its GPUs, the Slurm files, the warm interpreter's socket and `shared`;
// then the root goes read-only.
Args extra_binds(const SandboxSpec& spec, const BwrapLayout& layout, const std::vector<SandboxMount>& shared) {
  Args a = gpu_binds(spec.gpus);
  if (spec.slurm) append(a, slurm_binds(spec, layout.dir, layout.cluster_dir));
  if (std::error_code ec; !layout.warm_dir.empty() && fs::is_directory(layout.warm_dir, ec))
    a.insert(a.end(), {"--ro-bind", layout.warm_dir, "/run/edt-warm"});
  for (const auto& m : shared) a.insert(a.end(), {m.read_only ? "--ro-bind" : "--bind", m.host_path, m.path});
  a.insert(a.end(), {"--remount-ro", "/", "--chdir", "/root"});
  return a;
}

// The directories edt mounts below (/run, and the parents of the tool
// trees, volumes and the login user's home), made first, as --dir makes
// them (0755): where bubblewrap makes a mount point's parents itself, they
// are its root's alone, which a container whose login user is not root
// could not pass through to /opt/edt or /run/edt.
Args mount_point_dirs(const SandboxSpec& spec, const std::vector<SandboxMount>& shared) {
  std::set<std::string> dirs = {"/run"};
  std::vector<std::string> paths;
  for (const auto& m : shared) paths.push_back(fs::path(m.path).lexically_normal().string());
  if (!spec.login.root()) paths.push_back(spec.login.home);
  for (const auto& p : paths)
    for (fs::path up = fs::path(p).parent_path(); up.has_relative_path(); up = up.parent_path()) dirs.insert(up);
  Args a;
  for (const auto& d : dirs) a.insert(a.end(), {"--dir", d});  // sorted: each parent before its children
  return a;
}

// What the sandbox runs: sshd, behind the waits and daemons it needs.
Args command_args(const SandboxSpec& spec, const BwrapLayout& layout) {
  Args a;
  // Bridge mode: bwrap also goes on when edtd dies before writing fd 5 (an
  // EOF), and sshd would listen on an address the namespace lacks; so sshd
  // starts only once eth0 has its default route, edtd's last step.
  if (layout.own_network)
    append(a, {"/bin/sh", "-c",
               "while read -r dev dst rest; do [ \"$dev $dst\" = 'eth0 00000000' ] && exec \"$@\"; "
               "done < /proc/net/route; echo 'edt: eth0 was not configured' >&2; exit 1",
               "sh"});
  if (spec.slurm) append(a, slurm_init_command(spec));
  // edt's sshd runs through its bundle's loader: -r, as it cannot re-exec
  // itself by its own path.
  if (layout.tools) {
    append(a, bundled_argv(*layout.tools, "sshd"));
    a.push_back("-r");
  } else {
    a.push_back("/usr/sbin/sshd");
  }
  append(a, {"-D", "-e", "-f", "/run/edt/sshd_config"});
  return a;
}

}  // namespace

std::vector<std::string> bwrap_args(const SandboxSpec& spec, const BwrapLayout& layout,
                                    const std::vector<SandboxMount>& shared) {
  const std::string root = spec.image_root == "/" ? "" : spec.image_root;
  Args a = namespace_args(spec, layout);
  append(a, mount_point_dirs(spec, shared));
  append(a, image_args(root, shared, spec.login.root() ? "" : spec.login.home));
  append(a, container_tree_args(spec, layout, root));
  append(a, extra_binds(spec, layout, shared));
  append(a, command_args(spec, layout));
  return a;
}

}  // namespace edt::control

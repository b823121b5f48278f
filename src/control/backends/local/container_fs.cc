#include "control/backends/local/container_fs.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/openat2.h>
#include <pwd.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <sstream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/io.h"
#include "common/shell.h"

namespace edt::control {

namespace fs = std::filesystem;

namespace {

// Where a container sees the cluster's known_hosts (its mpi directory).
constexpr std::string_view kKnownHostsInContainer = "/etc/mpi/known_hosts";
// Where a container that runs as its own user sees where each of its
// cluster's peers listens (the cluster's mpi/ssh_config).
constexpr std::string_view kSshConfigInContainer = "/etc/mpi/ssh_config";
// Where a container sees its login profile (conf/ is bound at /run/edt).
constexpr std::string_view kLoginProfileInContainer = "/run/edt/profile.sh";
// The version of etc_links()'s layout, part of its key: a data dir's links
// made by an older edtd are not reused.
constexpr std::string_view kEtcLinksLayout = "2: profile.d";

// What any user may read: a file readable by others, a directory they may
// list and enter; a link is judged where it leads, inside the container.
bool world_readable(const fs::file_status& status) {
  const fs::perms p = status.permissions();
  if (fs::is_symlink(status)) return true;
  if (fs::is_directory(status))
    return (p & fs::perms::others_read) != fs::perms::none && (p & fs::perms::others_exec) != fs::perms::none;
  return (p & fs::perms::others_read) != fs::perms::none;
}

// An /etc/shadow of the container's own for the users of `passwd`: no
// password for anyone (the image's shadow is not the container's to read),
// and no account locked, since sshd refuses a locked account's keys too.
std::string shadow_for(const std::string& passwd) {
  std::istringstream lines(passwd);
  std::string line, out;
  while (std::getline(lines, line)) {
    const size_t colon = line.find(':');
    if (colon != std::string::npos && colon > 0) out += line.substr(0, colon) + ":*:0:0:99999:7:::\n";
  }
  return out;
}

std::string quote_env(const std::string& key, const std::string& value) {
  return "\"" + key + "=" + value + "\"";
}

// The image's root on the host: "" for the host's own.
std::string image_root(const SandboxSpec& spec) { return spec.image_root == "/" ? "" : spec.image_root; }

std::string image_etc(const SandboxSpec& spec) { return image_root(spec) + "/etc"; }

// What etc_links() makes besides the image's links: the mount points of a
// Slurm cluster's files, of a container's own passwd and group when it
// runs as its own user, and of its own passwd (own_passwd()).
struct EtcKind {
  bool slurm = false, own_user = false, own_passwd = false;
};

// The entries of a container's /etc that are its own: bound over the
// shared links (etc_links), or a mount point there.
bool own_etc_entry(const std::string& name, EtcKind kind) {
  return name == "hosts" || name == "hostname" || name == "mpi" || name == "shadow" || name == "profile.d" ||
         (kind.slurm && (name == "slurm" || name == "munge")) ||  // a Slurm cluster's own, bound there
         ((kind.own_user || kind.own_passwd) && name == "passwd") || (kind.own_user && name == "group");
}

// The login shell of the container's own user: the image's bash, or its sh.
std::string own_shell(const SandboxSpec& spec) {
  std::error_code ec;
  const std::string root = image_root(spec);
  return fs::exists(root + "/usr/bin/bash", ec) || fs::exists(root + "/bin/bash", ec) ? "/bin/bash" : "/bin/sh";
}

// The lines of `table` (passwd or group) but those whose name is `name` or
// whose id (the third field) is `id`, and but `drop`'s.
std::string without_entries(const std::string& table, const std::string& name, unsigned id,
                            const std::string& drop = "") {
  std::istringstream lines(table);
  std::string line, out;
  while (std::getline(lines, line)) {
    const std::vector<std::string> f = passwd_fields(line);
    if (f.size() < 3 || f[0] == name || f[0] == drop || f[2] == std::to_string(id)) continue;
    out += line + "\n";
  }
  return out;
}

// Opens `path` (absolute) of the image whose root is `root` ("": the
// host's), its links resolved as inside the image, never out of it; -1 and
// errno when it cannot.
int open_in_image(const std::string& root, const std::string& path, int flags) {
  if (root.empty()) return ::open(path.c_str(), flags | O_CLOEXEC);
  const int dir = ::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return -1;
  struct open_how how {};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  const int fd = static_cast<int>(::syscall(SYS_openat2, dir, path.c_str(), &how, sizeof(how)));
  const int error = errno;
  ::close(dir);
  errno = error;
  return fd;
}

// The image's file `path` (at most 4 MiB, the most a passwd or group
// needs); "" when it has none.
Result<std::string> read_image_file(const std::string& root, const std::string& path) {
  constexpr size_t kMaxBytes = 4 << 20;
  const int fd = open_in_image(root, path, O_RDONLY | O_NOCTTY | O_NONBLOCK);
  if (fd < 0 && errno == ENOENT) return std::string();
  if (fd < 0) return io_error("open the image's " + path, errno);
  std::string text;
  char buf[16384];
  ssize_t n = 0;
  while (text.size() <= kMaxBytes && (n = ::read(fd, buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
  const int error = errno;
  ::close(fd);
  if (n < 0) return io_error("read the image's " + path, error);
  if (text.size() > kMaxBytes) return invalid_argument("the image's " + path + " is larger than 4 MiB");
  return text;
}

// The login shell of the image's User: its passwd's, where that is a shell
// the image has, else the image's bash or sh (a container is worked in:
// nologin and false would shut its sessions out).
std::string login_shell(const SandboxSpec& spec) {
  const std::string& shell = spec.login.shell;
  const bool refuses = shell.empty() || shell.ends_with("/nologin") || shell.ends_with("/false");
  const int fd = refuses ? -1 : open_in_image(image_root(spec), shell, O_PATH);
  if (fd < 0) return own_shell(spec);
  ::close(fd);
  return shell;
}

// Where the login user's home is on the container's disk; bound at its
// home (bwrap_args.h).
std::string home_on_disk(const std::string& dir) { return dir + "/disk/home"; }

// One entry of an image's directory into its copy at `to`: a file or a
// directory with its mode, a link as a link (never followed), a FIFO made
// anew. A socket or a device node is left out: edtd makes no device from
// an image, and a socket is nothing without its process.
Status copy_image_entry(const fs::directory_entry& from, const fs::path& to) {
  std::error_code ec;
  const fs::file_status status = from.symlink_status(ec);
  switch (status.type()) {
    case fs::file_type::symlink: fs::copy_symlink(from.path(), to, ec); break;
    case fs::file_type::directory: fs::create_directory(to, ec); break;
    case fs::file_type::regular: fs::copy_file(from.path(), to, ec); break;
    case fs::file_type::fifo:
      if (::mkfifo(to.c_str(), 0600) != 0) ec = std::error_code(errno, std::generic_category());
      break;
    default: return Status::ok();
  }
  // The mode as the image has it, whatever edtd's umask.
  if (!ec && !fs::is_symlink(status)) fs::permissions(to, status.permissions(), ec);
  if (ec) return Status(StatusCode::kIoError, "copy " + to.string() + ": " + ec.message());
  return Status::ok();
}

// A directory of the image, `path`, copied to `to` (copy_image_entry's way),
// or `to` made empty where the image has none; never writable by others,
// which sshd would refuse of a home.
Status copy_image_dir(const SandboxSpec& spec, const std::string& path, const std::string& to) {
  const int fd = open_in_image(image_root(spec), path, O_PATH | O_DIRECTORY);
  if (fd < 0) return make_dirs(to, 0755);
  // "/." : the directory the descriptor names, not the magic link to it.
  const std::string from = "/proc/self/fd/" + std::to_string(fd) + "/.";
  std::error_code ec;
  Status st = copy_image_entry(fs::directory_entry(from, ec), to);
  for (fs::recursive_directory_iterator it(from, ec), end; st.is_ok() && !ec && it != end; it.increment(ec))
    st = copy_image_entry(*it, to + it->path().string().substr(from.size()));
  ::close(fd);
  if (st.is_ok() && ec) st = Status(StatusCode::kIoError, ec.message());
  if (!st.is_ok()) return st.with_context("copy the image's " + path + " to " + to);
  fs::permissions(to, fs::perms::group_write | fs::perms::others_write, fs::perm_options::remove, ec);
  return Status::ok();
}

// Whether `passwd` has an entry named `name`.
bool has_entry(const std::string& passwd, const std::string& name) {
  return passwd.starts_with(name + ":") || passwd.find("\n" + name + ":") != std::string::npos;
}

// `passwd` with the users edt's sshd needs where the image lacks them:
// root, and sshd (privilege separation's user; a uid the image does not use).
std::string with_sshd_users(std::string passwd, const std::string& shell) {
  if (!passwd.empty() && passwd.back() != '\n') passwd += '\n';
  if (!has_entry(passwd, "root")) passwd = "root:x:0:0:root:/root:" + shell + "\n" + passwd;
  if (has_entry(passwd, "sshd")) return passwd;
  uint32_t uid = 65533;
  while (uid > 1 && passwd.find(":x:" + std::to_string(uid) + ":") != std::string::npos) --uid;
  return passwd + "sshd:x:" + std::to_string(uid) + ":65534::/run/sshd:/usr/sbin/nologin\n";
}

// A container of an image other than the host's, or whose image names a
// User: the image's passwd with root and sshd's users where it lacks them
// and the User's entry (at its login home, with a shell that logs in), its
// shadow, and the User's home on the container's disk.
Status make_own_passwd(const SandboxSpec& spec, const std::string& dir) {
  EDT_ASSIGN_OR_RETURN(std::string passwd, read_image_file(image_root(spec), "/etc/passwd"));
  if (!spec.login.root()) passwd = passwd_with(passwd, spec.login, login_shell(spec));
  passwd = with_sshd_users(passwd, own_shell(spec));
  EDT_RETURN_IF_ERROR(io::write_file(dir + "/etc/passwd", passwd, 0644));
  EDT_RETURN_IF_ERROR(io::write_file(dir + "/etc/shadow", shadow_for(passwd), 0600));
  return spec.login.root() ? Status::ok() : copy_image_dir(spec, spec.login.home, home_on_disk(dir));
}

// A login's SSH files in `ssh` (its ~/.ssh/): the cluster's key pair
// (from `keys`), authorized for it, and the client's `config`. What was
// there goes first, whole: a home copied from an image may hold a link
// there, which host root must never write through.
Status write_user_ssh(const std::string& ssh, const std::string& keys, const std::string& config) {
  std::error_code ec;
  const std::string here = ssh.substr(0, ssh.find_last_not_of('/') + 1);  // a link itself, not where it leads
  fs::remove_all(here, ec);
  if (ec) return Status(StatusCode::kIoError, "remove " + here + ": " + ec.message());
  EDT_RETURN_IF_ERROR(make_dirs(ssh, 0700));
  EDT_RETURN_IF_ERROR(io::write_file(ssh + "id_ed25519", io::read_file(keys + "id_ed25519"), 0600));
  EDT_RETURN_IF_ERROR(io::write_file(ssh + "id_ed25519.pub", io::read_file(keys + "id_ed25519.pub"), 0644));
  EDT_RETURN_IF_ERROR(io::write_file(ssh + "authorized_keys", io::read_file(keys + "id_ed25519.pub"), 0600));
  return io::write_file(ssh + "config", config, 0600);
}

// A container that runs as its own user: the image's passwd and group with
// that user (this process's) and its group in them, at home in /root, the
// container's home. No tty group: sshd gives a session's terminal to it,
// which the user namespace does not map.
Status write_own_user(const SandboxSpec& spec, const std::string& dir) {
  const uid_t uid = ::getuid();
  const gid_t gid = ::getgid();
  const struct passwd* me = ::getpwuid(uid);
  const struct group* mine = ::getgrgid(gid);
  const std::string user = me ? me->pw_name : "edt", group = mine ? mine->gr_name : user;
  const std::string etc = image_etc(spec);
  const std::string passwd = without_entries(io::read_file(etc + "/passwd"), user, uid) + user + ":x:" +
                             std::to_string(uid) + ":" + std::to_string(gid) + ":edt:/root:" + own_shell(spec) + "\n";
  EDT_RETURN_IF_ERROR(io::write_file(dir + "/etc/passwd", passwd, 0644));
  EDT_RETURN_IF_ERROR(io::write_file(dir + "/etc/group",
                                     without_entries(io::read_file(etc + "/group"), group, gid, "tty") + group +
                                         ":x:" + std::to_string(gid) + ":\n",
                                     0644));
  return io::write_file(dir + "/etc/shadow", shadow_for(passwd), 0600);
}

// The names in the image's `dir` (its /etc, or a directory in it) that any
// user may read, sorted; `skip` says which to leave out.
Result<std::vector<std::string>> readable_names(const std::string& dir,
                                                const std::function<bool(const std::string&)>& skip) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename();
    std::error_code status_ec;
    if (!skip(name) && world_readable(entry.symlink_status(status_ec))) names.push_back(std::move(name));
  }
  if (ec && ec != std::errc::no_such_file_or_directory)
    return Status(StatusCode::kIoError, "read " + dir + ": " + ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

Status make_link(const std::string& target, const std::string& path) {
  std::error_code ec;
  fs::create_symlink(target, path, ec);
  if (ec) return Status(StatusCode::kIoError, "link " + path + ": " + ec.message());
  return Status::ok();
}

// What etc_links() makes: the image's /etc's readable `names` and its
// profile.d's `profiles`, each a link into /run/host/etc, edt's login
// profile, and the mount points of the container's own entries.
struct EtcListing {
  std::vector<std::string> names, profiles;
};

// Makes in `dir` the links of etc_links() and the mount points of the
// container's own entries.
Status make_etc_links(const std::string& dir, const EtcListing& listing, EtcKind kind) {
  EDT_RETURN_IF_ERROR(make_dirs(dir + "/mpi", 0755));
  EDT_RETURN_IF_ERROR(make_dirs(dir + "/profile.d", 0755));
  for (const auto& name : listing.names) EDT_RETURN_IF_ERROR(make_link("/run/host/etc/" + name, dir + "/" + name));
  for (const auto& name : listing.profiles)
    EDT_RETURN_IF_ERROR(make_link("/run/host/etc/profile.d/" + name, dir + "/profile.d/" + name));
  EDT_RETURN_IF_ERROR(make_link(std::string(kLoginProfileInContainer), dir + "/profile.d/edt.sh"));
  EDT_RETURN_IF_ERROR(make_link("mpi/hosts", dir + "/hosts"));
  EDT_RETURN_IF_ERROR(io::write_file(dir + "/hostname", "", 0644));
  EDT_RETURN_IF_ERROR(io::write_file(dir + "/shadow", "", 0600));
  if (kind.slurm) {
    for (const char* sub : {"/slurm", "/munge"}) EDT_RETURN_IF_ERROR(make_dirs(dir + sub, 0755));
  }
  if (kind.own_user || kind.own_passwd) EDT_RETURN_IF_ERROR(io::write_file(dir + "/passwd", "", 0644));
  if (kind.own_user) EDT_RETURN_IF_ERROR(io::write_file(dir + "/group", "", 0644));
  return Status::ok();
}

}  // namespace

Status make_dirs(const std::string& path, mode_t mode) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return Status(StatusCode::kIoError, "mkdir " + path + ": " + ec.message());
  ::chmod(path.c_str(), mode);
  return Status::ok();
}

std::vector<std::pair<std::string, bool>> unreadable_entries(const std::string& etc) {
  std::vector<std::pair<std::string, bool>> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(etc, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::file_status status = it->symlink_status(ec);
    if (ec || world_readable(status)) continue;
    const bool is_dir = fs::is_directory(status);
    if (is_dir) it.disable_recursion_pending();
    out.emplace_back(fs::relative(it->path(), etc).string(), is_dir);
  }
  return out;
}

Status hand_over(const std::string& path, uint32_t uid, uint32_t gid) {
  if (::lchown(path.c_str(), uid, gid) != 0) return io_error("chown " + path, errno);
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (::lchown(it->path().c_str(), uid, gid) != 0) return io_error("chown " + it->path().string(), errno);
  if (ec) return Status(StatusCode::kIoError, "read " + path + ": " + ec.message());
  return Status::ok();
}

Status make_own_tree(const SandboxSpec& spec, const std::string& dir) {
  const std::string disk = dir + "/disk";
  // Root's home starts as a copy of the image's /root, as a User's home
  // does (never the host's). Its ~/.ssh is edt's (write_ssh_config), made
  // there after whatever the copy put there, a link included, is gone.
  if (spec.image_root != "/" && spec.login.root() && !spec.own_user)
    EDT_RETURN_IF_ERROR(copy_image_dir(spec, "/root", disk + "/root"));
  for (const char* sub : {"/root", "/tmp", "/var/tmp", "/var/log", "/var/lib", "/var/cache", "/var/spool"})
    EDT_RETURN_IF_ERROR(make_dirs(disk + sub, 0755));
  // sshd records each login there, and says twice per login that it cannot
  // when the file is missing (it never makes it).
  EDT_RETURN_IF_ERROR(io::write_file(disk + "/var/log/lastlog", "", 0644));
  for (const auto& [sub, mode] : {std::pair{"/root", 0700}, {"/tmp", 01777}, {"/var/tmp", 01777}})
    ::chmod((disk + sub).c_str(), mode);
  for (const char* sub : {"/etc", "/conf", "/masked"}) EDT_RETURN_IF_ERROR(make_dirs(dir + sub, 0755));
  ::chmod((dir + "/masked").c_str(), 0555);
  EDT_RETURN_IF_ERROR(io::write_file(dir + "/masked-file", "", 0444));
  std::error_code ec;
  fs::create_symlink("/run", disk + "/var/run", ec);
  fs::create_symlink("/run/lock", disk + "/var/lock", ec);
  if (spec.slurm) EDT_RETURN_IF_ERROR(make_dirs(dir + "/munge-run", 0755));
  EDT_RETURN_IF_ERROR(io::write_file(dir + "/etc/hostname", spec.name + "\n", 0644));
  EDT_RETURN_IF_ERROR(write_login(spec.login, dir));
  if (spec.own_user) return write_own_user(spec, dir);
  if (own_passwd(spec)) return make_own_passwd(spec, dir);
  return io::write_file(dir + "/etc/shadow", shadow_for(io::read_file(image_etc(spec) + "/passwd")), 0600);
}

bool own_passwd(const SandboxSpec& spec) { return !spec.own_user && (spec.image_root != "/" || !spec.login.root()); }

Result<ContainerUser> resolve_in_image(const std::string& root, const std::string& user) {
  if (user.empty()) return ContainerUser{};
  const std::string on_host = root == "/" ? "" : root;
  EDT_ASSIGN_OR_RETURN(const std::string passwd, read_image_file(on_host, "/etc/passwd"));
  EDT_ASSIGN_OR_RETURN(const std::string group, read_image_file(on_host, "/etc/group"));
  return resolve_image_user(user, passwd, group);
}

Result<ContainerUser> image_login(const SandboxSpec& spec) {
  if (spec.own_user) return ContainerUser{};
  return resolve_in_image(spec.image_root, spec.image_user);
}

Status give_home(const SandboxSpec& spec, const std::string& dir, uint32_t first_id) {
  if (spec.login.root()) return Status::ok();
  return hand_over(home_on_disk(dir), first_id + spec.login.uid, first_id + spec.login.gid);
}

Status write_login(const ContainerUser& login, const std::string& dir) {
  const nlohmann::json j = {{"name", login.name}, {"uid", login.uid}, {"gid", login.gid},
                            {"groups", login.groups}, {"home", login.home}};
  return io::write_file(dir + "/conf/login.json", j.dump() + "\n", 0644);
}

ContainerUser read_login(const std::string& dir) {
  const auto j = nlohmann::json::parse(io::read_file(dir + "/conf/login.json"), nullptr, false);
  ContainerUser login;
  if (!j.is_object()) return login;  // a container started before edtd wrote it: root's
  try {
    login.name = j.value("name", login.name);
    login.uid = j.value("uid", 0u);
    login.gid = j.value("gid", 0u);
    login.groups = j.value("groups", std::vector<uint32_t>{});
    login.home = j.value("home", login.home);
  } catch (const nlohmann::json::exception&) {
    return ContainerUser{};
  }
  // Checked again as it is read: the name goes into ssh's argv.
  return valid_login_name(login.name) && login.home.starts_with("/") ? login : ContainerUser{};
}

Status write_ssh_config(const SandboxSpec& spec, const std::string& dir, const std::string& keys, int port_number) {
  const std::string port = std::to_string(port_number);
  // As its own user, the container shares its node's addresses: each peer
  // is at its node's address and a port of its own (the cluster's
  // ssh_config), and sshd listens on its port on every address.
  const std::string client = spec.own_user ? "Include " + std::string(kSshConfigInContainer) + "\nHost *\n  Port " + port
                                           : "Host *\n  Port " + port + "\n  BindAddress " + spec.address;
  const std::string config = client + "\n  IdentityFile ~/.ssh/id_ed25519\n  StrictHostKeyChecking yes\n"
                             "  UserKnownHostsFile " + std::string(kKnownHostsInContainer) + "\n  LogLevel ERROR\n";
  EDT_RETURN_IF_ERROR(write_user_ssh(dir + "/disk/root/.ssh/", keys, config));
  if (!spec.login.root()) EDT_RETURN_IF_ERROR(write_user_ssh(home_on_disk(dir) + "/.ssh/", keys, config));
  std::string set_env;
  for (const auto& [key, value] : spec.env) set_env += " " + quote_env(key, value);
  return io::write_file(dir + "/conf/sshd_config",
                        "ListenAddress " + (spec.own_user ? std::string("0.0.0.0") : spec.address) + ":" + port +
                            "\nHostKey /run/edt/host_ed25519\nHostCertificate /run/edt/host_ed25519-cert.pub\n" +
                            (spec.own_user ? "PermitRootLogin no\n" : "PermitRootLogin prohibit-password\n") +
                            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
                            "PidFile none\nPrintMotd no\nAcceptEnv LANG LC_*\nMaxStartups 100:30:200\n"
                            "SetEnv" + set_env + "\n",
                        0600);
}

Status write_login_profile(const SandboxSpec& spec, const std::string& dir) {
  std::string text =
      "# edt: what a login shell's /etc/profile reset, as jobs and sshd's sessions have it: edt's tools, then its\n"
      "# virtual environment, in front of PATH; edt's Python package on PYTHONPATH.\n";
  for (const char* key : {"PATH", "PYTHONPATH"})
    if (auto it = spec.env.find(key); it != spec.env.end()) text += "export " + std::string(key) + "=" + shell_quote(it->second) + "\n";
  return io::write_file(dir + "/conf/profile.sh", text, 0644);
}

Result<std::string> etc_links(const SandboxSpec& spec, const std::string& data_dir) {
  const std::string etc = image_etc(spec);
  const EtcKind kind{spec.slurm.has_value(), spec.own_user, own_passwd(spec)};
  EtcListing found;
  EDT_ASSIGN_OR_RETURN(found.names, readable_names(etc, [kind](const std::string& n) { return own_etc_entry(n, kind); }));
  EDT_ASSIGN_OR_RETURN(found.profiles, readable_names(etc + "/profile.d", [](const std::string& n) { return n == "edt.sh"; }));
  std::string listing = etc + (kind.slurm ? "\nslurm" : "") + (kind.own_user ? "\nown user" : "") +
                        (kind.own_passwd ? "\nown passwd" : "") + "\n" +
                        std::string(kEtcLinksLayout);
  for (const auto& name : found.names) listing += "\n" + name;
  for (const auto& name : found.profiles) listing += "\nprofile.d/" + name;
  return made_once(data_dir + "/etc-links", listing,
                   [&](const std::string& tmp) { return make_etc_links(tmp, found, kind); });
}

Result<std::string> made_once(const std::string& parent, const std::string& listing,
                              const std::function<Status(const std::string&)>& fill) {
  char key[17];
  std::snprintf(key, sizeof(key), "%016zx", std::hash<std::string>{}(listing));
  const std::string dir = parent + "/" + key;
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return dir;
  const std::string tmp = dir + ".tmp-" + std::to_string(::gettid());
  fs::remove_all(tmp, ec);
  Status made = fill(tmp);
  if (made.is_ok() && ::rename(tmp.c_str(), dir.c_str()) != 0 && !fs::is_directory(dir, ec))
    made = io_error("rename " + tmp, errno);
  fs::remove_all(tmp, ec);
  if (!made.is_ok()) return made;
  return dir;
}

}  // namespace edt::control

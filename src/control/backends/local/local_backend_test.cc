#include "common/io.h"
#include "control/backends/local/bwrap_args.h"
#include "control/backends/local/container_fs.h"
#include "control/backends/local/enter.h"
#include "control/backends/local/proc_scan.h"
#include "control/backends/local/sandbox_process.h"
#include "control/backends/local/sandbox_record.h"
#include "control/backends/local/tool_bundle.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace edt::control {
namespace {

// The first host id of `range` from 2^28; -1 for an error.
int64_t first_of(int64_t range) {
  auto ids = subordinate_ids(1u << 28, range);
  return ids.is_ok() ? int64_t{*ids} : -1;
}

TEST(SubordinateIdsTest, EachRangeIs65536IdsFromTheFirst) {
  EXPECT_EQ(first_of(1), 1 << 28);
  EXPECT_EQ(first_of(2), (1 << 28) + 65536);
  // The last range that fits below 2^32 - 1 (which is no id), and the next.
  const int64_t last = ((int64_t{1} << 32) - (int64_t{1} << 28)) / 65536 - 1;
  EXPECT_EQ(first_of(last), (int64_t{1} << 32) - 2 * 65536);
  auto past = subordinate_ids(1u << 28, last + 1);
  ASSERT_FALSE(past.is_ok());
  EXPECT_NE(past.status().message().find("--user-namespaces"), std::string::npos) << past.status().message();
  EXPECT_EQ(first_of(0), -1);  // an owner with no range
}

// Two tenants' records: alice's acl-worker-0 and bob's bcl-worker-0.
const SandboxRef kAlice{4242, 777}, kBob{5151, 888};
const std::vector<SandboxRecord> kRecords = {{"acl", "acl-worker-0", kAlice}, {"bcl", "bcl-worker-0", kBob}};

// alice's init relabelled as bob's bcl-worker-0 (its environment rewritten
// through /proc/1/mem): what identify_sandbox() sees of it is not its label
// but its cgroup and the records, and those say acl-worker-0.
TEST(LocalBackendIdentifyTest, ARelabelledSandboxIsTheContainerItsCgroupAndRecordName) {
  auto found = identify_sandbox(kAlice, std::string("acl-worker-0"), kRecords);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->cluster, "acl");
  EXPECT_EQ(found->name, "acl-worker-0");
  // Without cgroups: the record of its pid and start time alone.
  found = identify_sandbox(kAlice, std::nullopt, kRecords);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->name, "acl-worker-0");
}

TEST(LocalBackendIdentifyTest, ASandboxNoRecordNamesIsNotAdopted) {
  // Its pid reused, or another start time: no record names it.
  EXPECT_FALSE(identify_sandbox({4242, 778}, std::nullopt, kRecords));
  EXPECT_FALSE(identify_sandbox({9999, 1}, std::nullopt, kRecords));
  // In bob's cgroup, whose record names another init: a stray of his.
  EXPECT_FALSE(identify_sandbox({9999, 1}, std::string("bcl-worker-0"), kRecords));
  // In a cgroup no record is for.
  EXPECT_FALSE(identify_sandbox(kAlice, std::string("zzz-worker-0"), kRecords));
  // Two records naming one process: neither is trusted.
  EXPECT_FALSE(identify_sandbox(kAlice, std::nullopt, {{"acl", "acl-worker-0", kAlice}, {"bcl", "bcl-worker-0", kAlice}}));
}

TEST(LocalBackendIdentifyTest, ASandboxSpawnedBeforeItsPidWasRecordedIsKnownByItsCgroup) {
  const std::vector<SandboxRecord> before_pid = {{"bcl", "bcl-worker-0", {}}};
  auto found = identify_sandbox(kBob, std::string("bcl-worker-0"), before_pid);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->cluster, "bcl");
  EXPECT_EQ(found->ref, kBob);
  // Without a cgroup, such a sandbox is no one's (it is ended, then started again).
  EXPECT_FALSE(identify_sandbox(kBob, std::nullopt, before_pid));
}

TEST(LocalBackendIdentifyTest, TheCgroupIsReadFromTheProcFileOfEitherLayout) {
  EXPECT_EQ(cgroup_container("0::/edt-ab12/acl-worker-0\n", "edt-ab12"), "acl-worker-0");
  EXPECT_EQ(cgroup_container("12:pids:/edt-ab12/bcl-worker-1\n3:cpu,cpuacct:/\n", "edt-ab12"), "bcl-worker-1");
  EXPECT_EQ(cgroup_container("0::/system.slice/edtd.service\n", "edt-ab12"), std::nullopt);
  // Another data dir's edtd, and a cgroup below a container's: not ours.
  EXPECT_EQ(cgroup_container("0::/edt-ffff/acl-worker-0\n", "edt-ab12"), std::nullopt);
  EXPECT_EQ(cgroup_container("0::/edt-ab12/acl-worker-0/sub\n", "edt-ab12"), std::nullopt);
  EXPECT_EQ(cgroup_container("", "edt-ab12"), std::nullopt);
}

// A container that runs as its own user (Slurm's --slurm-mode user): a user
// namespace that maps this process's ids alone, no capability, its own
// passwd and group.
TEST(SandboxOwnUserTest, BubblewrapMapsTheOwnUserAloneAndKeepsNoCapability) {
  SandboxSpec spec;
  spec.name = "c-launcher";
  spec.image_root = "/";
  spec.own_user = true;
  const auto a = bwrap_args(spec, {"/d", "/e", "/cl", "", false}, {});
  auto after = [&](const std::string& flag) {
    auto it = std::find(a.begin(), a.end(), flag);
    return it == a.end() || it + 1 == a.end() ? std::string() : *(it + 1);
  };
  EXPECT_NE(std::find(a.begin(), a.end(), "--unshare-user"), a.end());
  EXPECT_EQ(after("--uid"), std::to_string(::getuid()));
  EXPECT_EQ(after("--gid"), std::to_string(::getgid()));
  EXPECT_EQ(std::find(a.begin(), a.end(), "--cap-add"), a.end());
  EXPECT_EQ(std::find(a.begin(), a.end(), "--unshare-net"), a.end());
  EXPECT_NE(std::find(a.begin(), a.end(), "/d/etc/passwd"), a.end());
  EXPECT_NE(std::find(a.begin(), a.end(), "/d/etc/group"), a.end());
  spec.own_user = false;
  const auto root = bwrap_args(spec, {"/d", "/e", "/cl", "", false}, {});
  EXPECT_EQ(std::find(root.begin(), root.end(), "--unshare-user"), root.end());
  EXPECT_NE(std::find(root.begin(), root.end(), "--cap-add"), root.end());
}

TEST(SandboxOwnUserTest, ItsPasswdHasTheUserAtHomeInRootAndItsGroupHasNoTty) {
  char tmpl[] = "/tmp/edt-own-user-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string top = tmpl, image = top + "/image", dir = top + "/c";
  const std::string uid = std::to_string(::getuid()), gid = std::to_string(::getgid());
  ASSERT_TRUE(make_dirs(image + "/etc", 0755).is_ok());
  // The image names another user with our uid, and has a tty group.
  ASSERT_TRUE(io::write_file(image + "/etc/passwd", "other:x:54321:54321::/home/other:/bin/sh\nimg:x:" + uid +
                                                        ":" + gid + "::/home/img:/bin/sh\n", 0644).is_ok());
  ASSERT_TRUE(io::write_file(image + "/etc/group", "other:x:54321:\ntty:x:5:\n", 0644).is_ok());
  SandboxSpec spec;
  spec.name = "c-launcher";
  spec.image_root = image;
  spec.own_user = true;
  ASSERT_TRUE(make_dirs(dir + "/disk", 0755).is_ok());
  ASSERT_TRUE(make_own_tree(spec, dir).is_ok());
  const std::string passwd = io::read_file(dir + "/etc/passwd"), group = io::read_file(dir + "/etc/group");
  EXPECT_NE(passwd.find("other:x:54321:54321::/home/other:/bin/sh\n"), std::string::npos) << passwd;
  EXPECT_EQ(passwd.find("img:"), std::string::npos) << passwd;
  EXPECT_NE(passwd.find(":x:" + uid + ":" + gid + ":edt:/root:/bin/sh\n"), std::string::npos) << passwd;
  EXPECT_EQ(group.find("tty:"), std::string::npos) << group;
  EXPECT_NE(group.find(":x:" + gid + ":\n"), std::string::npos) << group;
  EXPECT_NE(io::read_file(dir + "/etc/shadow").find("other:*:"), std::string::npos);
  EXPECT_NE(group.find("other:x:54321:\n"), std::string::npos) << group;
  std::error_code ec;
  std::filesystem::remove_all(top, ec);
}

// A container whose image names a User (container_fs.h): the image's links
// are resolved inside the image, never on the host, and nothing of edt's
// is written through a link the image's home holds.
class SandboxImageUserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/edt-image-user-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    top = tmpl;
    image = top + "/image";
    for (const char* d : {"/etc", "/home/trainer", "/usr/bin"}) ASSERT_TRUE(make_dirs(image + d, 0755).is_ok());
    ASSERT_TRUE(make_dirs(top + "/victim", 0755).is_ok());
    ASSERT_TRUE(make_dirs(top + "/keys", 0700).is_ok());
    for (const char* key : {"/keys/id_ed25519", "/keys/id_ed25519.pub"})
      ASSERT_TRUE(io::write_file(top + key, "key\n", 0600).is_ok());
    ASSERT_TRUE(make_dirs(dir() + "/disk", 0755).is_ok());
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(top, ec);
  }
  void link(const std::string& target, const std::string& path) {
    std::filesystem::create_symlink(target, image + path);
  }
  SandboxSpec spec(const std::string& user) {
    SandboxSpec s;
    s.name = "c-worker-0";
    s.address = "127.0.0.2";
    s.image_root = image;
    s.image_user = user;
    auto login = image_login(s);
    EXPECT_TRUE(login.is_ok()) << login.status().message();
    if (login.is_ok()) s.login = *login;
    return s;
  }
  std::string dir() const { return top + "/c"; }
  std::string top, image;
};

TEST_F(SandboxImageUserTest, PasswdAndGroupLinksResolveInsideTheImage) {
  // /etc/passwd links to an absolute path: the image's, not the host's.
  ASSERT_TRUE(io::write_file(image + "/etc/real-passwd", "trainer:x:1234:1234::/home/trainer:/bin/nologin\n", 0644).is_ok());
  link("/etc/real-passwd", "/etc/passwd");
  // /etc/group climbs out to a host file that lists trainer in a group.
  ASSERT_TRUE(io::write_file(top + "/victim/group", "crew:x:77:trainer\n", 0644).is_ok());
  link("../../../../../../../.." + top + "/victim/group", "/etc/group");
  const SandboxSpec s = spec("trainer");
  EXPECT_EQ(s.login.uid, 1234u);
  EXPECT_TRUE(s.login.groups.empty()) << "read the host's " << top << "/victim/group";
  ASSERT_TRUE(make_own_tree(s, dir()).is_ok());
  // A shell that refuses logins is swapped for the image's sh.
  EXPECT_NE(io::read_file(dir() + "/etc/passwd").find("trainer:x:1234:1234::/home/trainer:/bin/sh\n"),
            std::string::npos) << io::read_file(dir() + "/etc/passwd");
  // The users edt's sshd needs, which this image lacks.
  EXPECT_NE(io::read_file(dir() + "/etc/passwd").find("root:x:0:0:root:/root:/bin/sh\n"), std::string::npos);
  EXPECT_NE(io::read_file(dir() + "/etc/passwd").find("sshd:x:65533:65534::/run/sshd:/usr/sbin/nologin\n"),
            std::string::npos);
  const ContainerUser read = read_login(dir());
  EXPECT_EQ(read.name, "trainer");
  EXPECT_EQ(read.uid, 1234u);
  EXPECT_EQ(read.home, "/home/trainer");
}

TEST_F(SandboxImageUserTest, TheHomeIsACopyAndItsLinksAreNeverWrittenThrough) {
  ASSERT_TRUE(io::write_file(image + "/etc/passwd", "trainer:x:1234:1234::/home/trainer:/bin/sh\n", 0644).is_ok());
  ASSERT_TRUE(io::write_file(image + "/home/trainer/notes", "mine\n", 0644).is_ok());
  link(top + "/victim", "/home/trainer/.ssh");
  link("/etc/shadow", "/home/trainer/shadow");
  const SandboxSpec s = spec("trainer");
  ASSERT_TRUE(make_own_tree(s, dir()).is_ok());
  const Status written = write_ssh_config(s, dir(), top + "/keys/", 22);
  ASSERT_TRUE(written.is_ok()) << written.message();
  const std::string home = dir() + "/disk/home";
  EXPECT_EQ(io::read_file(home + "/notes"), "mine\n");
  EXPECT_TRUE(std::filesystem::is_symlink(home + "/shadow"));  // copied as a link, not followed
  EXPECT_TRUE(std::filesystem::is_directory(std::filesystem::symlink_status(home + "/.ssh")));
  EXPECT_EQ(io::read_file(home + "/.ssh/authorized_keys"), "key\n");
  EXPECT_TRUE(std::filesystem::is_empty(top + "/victim")) << "wrote through the image's ~/.ssh link";
  EXPECT_FALSE(std::filesystem::exists(image + "/home/trainer/.ssh/authorized_keys"));
}

// A home may hold what no plain copy takes: a FIFO is made anew, a socket
// left out, and the container starts.
TEST_F(SandboxImageUserTest, TheHomeKeepsItsFifosAndLeavesOutItsSockets) {
  ASSERT_TRUE(io::write_file(image + "/etc/passwd", "trainer:x:1234:1234::/home/trainer:/bin/sh\n", 0644).is_ok());
  ASSERT_TRUE(make_dirs(image + "/home/trainer/run", 0750).is_ok());
  ASSERT_EQ(::chmod((image + "/home/trainer/run").c_str(), 0750), 0);
  ASSERT_EQ(::mkfifo((image + "/home/trainer/run/pipe").c_str(), 0620), 0);
  ASSERT_EQ(::chmod((image + "/home/trainer/run/pipe").c_str(), 0620), 0);  // whatever the umask
  const std::string socket_path = image + "/home/trainer/run/agent.sock";
  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  ASSERT_LT(socket_path.size(), sizeof address.sun_path);
  std::memcpy(address.sun_path, socket_path.c_str(), socket_path.size() + 1);
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ::close(sock);
  ASSERT_TRUE(io::write_file(image + "/home/trainer/run/notes", "mine\n", 0600).is_ok());
  const Status made = make_own_tree(spec("trainer"), dir());
  ASSERT_TRUE(made.is_ok()) << made.message();
  const std::string run = dir() + "/disk/home/run";
  struct stat st {};
  ASSERT_EQ(::lstat((run + "/pipe").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0620u);
  ASSERT_EQ(::lstat(run.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0750u);
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(run + "/agent.sock")));
  EXPECT_EQ(io::read_file(run + "/notes"), "mine\n");
}

// Root's home is a copy of the image's /root (an interpreter installed
// there, its dotfiles), and its ~/.ssh edt's: a link the image has there
// is neither followed nor changed through.
TEST_F(SandboxImageUserTest, RootsHomeIsACopyOfTheImagesRoot) {
  ASSERT_TRUE(io::write_file(image + "/etc/passwd", "root:x:0:0:root:/root:/bin/sh\n", 0644).is_ok());
  ASSERT_TRUE(make_dirs(image + "/root/.pyenv/bin", 0755).is_ok());
  ASSERT_TRUE(io::write_file(image + "/root/.pyenv/bin/python3", "#!/bin/sh\n", 0755).is_ok());
  ASSERT_TRUE(io::write_file(image + "/root/.bashrc", "export PYENV_ROOT=/root/.pyenv\n", 0644).is_ok());
  link(top + "/victim", "/root/.ssh");
  const SandboxSpec s = spec("");
  ASSERT_TRUE(make_own_tree(s, dir()).is_ok());
  const Status written = write_ssh_config(s, dir(), top + "/keys/", 22);
  ASSERT_TRUE(written.is_ok()) << written.message();
  const std::string root = dir() + "/disk/root";
  EXPECT_EQ(io::read_file(root + "/.bashrc"), "export PYENV_ROOT=/root/.pyenv\n");
  EXPECT_EQ(io::read_file(root + "/.pyenv/bin/python3"), "#!/bin/sh\n");
  EXPECT_TRUE(std::filesystem::is_directory(std::filesystem::symlink_status(root + "/.ssh")));
  EXPECT_EQ(io::read_file(root + "/.ssh/authorized_keys"), "key\n");
  EXPECT_TRUE(std::filesystem::is_empty(top + "/victim")) << "wrote through the image's /root/.ssh link";
  struct stat st {};
  ASSERT_EQ(::stat((top + "/victim").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u) << "changed the mode of what the image's /root/.ssh links to";
}

TEST_F(SandboxImageUserTest, AHomeThatLinksOutStartsEmpty) {
  ASSERT_TRUE(io::write_file(top + "/victim/secret", "host\n", 0600).is_ok());
  ASSERT_TRUE(io::write_file(image + "/etc/passwd", "out:x:1300:1300::/home/out:/bin/sh\n", 0644).is_ok());
  link(top + "/victim", "/home/out");
  const SandboxSpec s = spec("out");
  ASSERT_TRUE(make_own_tree(s, dir()).is_ok());
  EXPECT_FALSE(std::filesystem::exists(dir() + "/disk/home/secret"));
  EXPECT_TRUE(std::filesystem::is_directory(dir() + "/disk/home"));
}

TEST_F(SandboxImageUserTest, BubblewrapBindsTheHomeAndTheOwnPasswd) {
  ASSERT_TRUE(io::write_file(image + "/etc/passwd", "trainer:x:1234:1234::/home/trainer:/bin/sh\n", 0644).is_ok());
  const auto a = bwrap_args(spec("trainer"), {"/d", "/e", "/cl", "", false}, {});
  auto bound = [&](const std::string& from, const std::string& to) {
    for (size_t i = 0; i + 2 < a.size(); ++i)
      if ((a[i] == "--bind" || a[i] == "--ro-bind") && a[i + 1] == from && a[i + 2] == to) return true;
    return false;
  };
  EXPECT_TRUE(bound("/d/disk/home", "/home/trainer"));
  EXPECT_TRUE(bound("/d/etc/passwd", "/etc/passwd"));
  EXPECT_FALSE(bound(image + "/home", "/home"));  // the image's /home is filled entry by entry
  EXPECT_FALSE(bound("/d/etc/group", "/etc/group"));
  const auto root = bwrap_args(spec(""), {"/d", "/e", "/cl", "", false}, {});
  EXPECT_EQ(std::find(root.begin(), root.end(), "/d/disk/home"), root.end());
  // An image's container has its own passwd all the same (edt's sshd's users).
  EXPECT_NE(std::find(root.begin(), root.end(), "/d/etc/passwd"), root.end());
}

TEST(EnterUserTest, UserIdsListTheGroups) {
  ContainerUser u;
  u.uid = 1234;
  u.gid = 1234;
  EXPECT_EQ(user_ids(u), "1234:1234");
  u.groups = {44, 2345};
  EXPECT_EQ(user_ids(u), "1234:1234:44,2345");
  auto back = parse_user_ids(user_ids(u));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->uid, 1234u);
  EXPECT_EQ(back->gid, 1234u);
  EXPECT_EQ(back->groups, u.groups);
  EXPECT_TRUE(parse_user_ids("0:0"));
  for (const char* bad : {"", "1234", "1234:", ":1", "1:2:", "1:2:3,", "1:2:,3", "1:2:3:4", "65536:1", "1:x", "-1:0"})
    EXPECT_FALSE(parse_user_ids(bad)) << bad;
}

// edt's OpenSSH (tool_bundle.h): the host's sshd and ssh with their
// libraries and loader, which run from the bundle alone.
TEST(ToolBundleTest, SshRunsFromTheBundleThroughItsLoader) {
  char tmpl[] = "/tmp/edt-tools-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string top = tmpl;
  auto bundle = make_tool_bundle(top);
  ASSERT_TRUE(bundle.is_ok()) << bundle.status().message();
  EXPECT_TRUE(bundle->dir.starts_with(top + "/tools/"));
  EXPECT_TRUE(std::filesystem::exists(bundle->dir + "/libexec/sshd"));
  EXPECT_TRUE(std::filesystem::exists(bundle->dir + "/lib/" + bundle->loader));
  EXPECT_NE(io::read_file(bundle->dir + "/bin/ssh").find("/run/edt-tools/libexec/ssh"), std::string::npos);
  // The same host programs: the same bundle, not a second copy.
  auto again = make_tool_bundle(top);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again->dir, bundle->dir);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(top + "/tools"), {}), 1);
  // ssh -V through the bundle's loader, its libraries only.
  const std::string cmd = bundle->dir + "/lib/" + bundle->loader + " --library-path " + bundle->dir + "/lib " +
                          bundle->dir + "/libexec/ssh -V 2>&1";
  FILE* out = ::popen(cmd.c_str(), "r");
  ASSERT_NE(out, nullptr);
  char buf[256] = {};
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, out);
  EXPECT_EQ(::pclose(out), 0);
  EXPECT_NE(std::string(buf, n).find("OpenSSH"), std::string::npos) << buf;
  const auto argv = bundled_argv(*bundle, "sshd");
  EXPECT_EQ(argv, (std::vector<std::string>{"/run/edt-tools/lib/" + bundle->loader, "--library-path",
                                            "/run/edt-tools/lib", "/run/edt-tools/libexec/sshd"}));
  std::error_code ec;
  std::filesystem::remove_all(top, ec);
}

TEST(ToolBundleTest, AnImageContainerRunsTheBundlesSshdAndGetsItsMountPointsOpen) {
  SandboxSpec spec;
  spec.name = "c-worker-0";
  spec.image_root = "/nonexistent-image";
  BwrapLayout layout{"/d", "/e", "/cl", "", false, ToolBundle{"/t", "ld-linux-x86-64.so.2"}};
  const auto a = bwrap_args(spec, layout, {{"/t", "/run/edt-tools", true}, {"/opt/edt/venv", "/opt/edt/venv", true}});
  auto at = [&](const std::string& word) { return std::find(a.begin(), a.end(), word); };
  ASSERT_NE(at("/run/edt-tools/lib/ld-linux-x86-64.so.2"), a.end());
  EXPECT_EQ(*(at("/run/edt-tools/libexec/sshd") + 1), "-r");
  EXPECT_EQ(at("/usr/sbin/sshd"), a.end());
  // /run, /opt and /opt/edt are made as --dir makes them (0755), before anything is bound there.
  for (const char* dir : {"/run", "/opt", "/opt/edt"}) {
    auto made = std::find(a.begin(), a.end(), std::string(dir));
    ASSERT_NE(made, a.end()) << dir;
    EXPECT_EQ(*(made - 1), "--dir") << dir;
    EXPECT_LT(made - a.begin(), at("/run/edt") - a.begin()) << dir;
  }
  spec.image_root = "/";
  layout.tools.reset();
  const auto host = bwrap_args(spec, layout, {});
  EXPECT_NE(std::find(host.begin(), host.end(), "/usr/sbin/sshd"), host.end());
}

}  // namespace
}  // namespace edt::control

#include "control/model/image_user.h"

#include <gtest/gtest.h>

namespace edt::control {
namespace {

const std::string kPasswd =
    "root:x:0:0:root:/root:/bin/bash\n"
    "# a comment\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    "trainer:x:1000:1000:Trainer:/home/trainer:/bin/bash\n"
    "svc:x:1001:1001::/var/lib/svc:/bin/false\n"
    "rooted:x:1002:1002::/usr/local:/bin/sh\n"
    "broken:x:abc:1:::\n";
const std::string kGroup =
    "root:x:0:\n"
    "video:x:44:trainer,svc\n"
    "trainer:x:1000:\n"
    "staff:x:50:other,trainer\n"
    "svc:x:1001:svc\n";

ContainerUser resolved(std::string_view user) {
  auto found = resolve_image_user(user, kPasswd, kGroup);
  EXPECT_TRUE(found.is_ok()) << found.status().message();
  return found.is_ok() ? *found : ContainerUser{};
}

std::string refusal(std::string_view user) {
  auto found = resolve_image_user(user, kPasswd, kGroup);
  EXPECT_FALSE(found.is_ok()) << user;
  return found.is_ok() ? "" : found.status().message();
}

TEST(ImageUserTest, EmptyIsRoot) {
  EXPECT_EQ(resolved(""), ContainerUser{});
  EXPECT_TRUE(resolved("").root());
  EXPECT_EQ(resolved("0").home, "/root");
}

TEST(ImageUserTest, NameTakesItsEntryAndGroups) {
  const ContainerUser u = resolved("trainer");
  EXPECT_EQ(u.name, "trainer");
  EXPECT_EQ(u.uid, 1000u);
  EXPECT_EQ(u.gid, 1000u);
  EXPECT_EQ(u.groups, (std::vector<uint32_t>{44, 50}));
  EXPECT_EQ(u.home, "/home/trainer");
  EXPECT_EQ(u.shell, "/bin/bash");
  EXPECT_TRUE(u.in_passwd);
}

TEST(ImageUserTest, UidFindsTheSameEntry) { EXPECT_EQ(resolved("1000"), resolved("trainer")); }

TEST(ImageUserTest, GroupByNameOrNumberReplacesThePrimary) {
  EXPECT_EQ(resolved("trainer:staff").gid, 50u);
  EXPECT_EQ(resolved("trainer:staff").groups, (std::vector<uint32_t>{44}));
  EXPECT_EQ(resolved("1000:7").gid, 7u);  // a gid need not be in /etc/group
  EXPECT_EQ(resolved("svc:video").groups, (std::vector<uint32_t>{1001}));
}

TEST(ImageUserTest, AnUnlistedUidRunsAsDockerRunsIt) {
  const ContainerUser u = resolved("4242");
  EXPECT_EQ(u.name, "u4242");
  EXPECT_EQ(u.gid, 0u);
  EXPECT_EQ(u.home, "/home/u4242");
  EXPECT_FALSE(u.in_passwd);
  EXPECT_EQ(resolved("4242:100").gid, 100u);
}

TEST(ImageUserTest, HomesOutsideWhatTheContainerKeepsStay) {
  EXPECT_EQ(resolved("svc").home, "/var/lib/svc");
  EXPECT_EQ(resolved("nobody").home, "/nonexistent");
  EXPECT_EQ(resolved("rooted").home, "/home/rooted");  // /usr is the image's, read-only
  EXPECT_EQ(login_home("a", "/"), "/home/a");
  EXPECT_EQ(login_home("a", "relative"), "/home/a");
  EXPECT_EQ(login_home("a", "/home/../etc/x"), "/home/a");
  EXPECT_EQ(login_home("a", "/root"), "/home/a");
  EXPECT_EQ(login_home("a", "/workspace/a"), "/workspace/a");
}

TEST(ImageUserTest, RefusalsSayWhatAndWhere) {
  EXPECT_NE(refusal("ghost").find("no user 'ghost' in the image's /etc/passwd"), std::string::npos);
  EXPECT_NE(refusal("trainer:ghosts").find("no group 'ghosts' in the image's /etc/group"), std::string::npos);
  EXPECT_NE(refusal("broken").find("no numeric uid"), std::string::npos);
  EXPECT_NE(refusal("70000").find("below 65536"), std::string::npos);
  EXPECT_NE(refusal("1000:70000").find("below 65536"), std::string::npos);
  for (const char* bad : {":", "trainer:", ":staff", "a:b:c"})
    EXPECT_NE(refusal(bad).find("not one of user, uid"), std::string::npos) << bad;
  EXPECT_NE(refusal("ghost").find("the image's User 'ghost'"), std::string::npos);
}

// An image's name reaches ssh's user@host argument: one that ssh would read
// as an option (-oProxyCommand=..., run by edtd's terminal) is refused.
TEST(ImageUserTest, ANameSshWouldReadAsAnOptionIsRefused) {
  const std::string passwd = "-oProxyCommand=touch /tmp/x:x:1000:1000::/home/x:/bin/sh\n";
  for (const char* user : {"1000", "-oProxyCommand=touch /tmp/x"}) {
    auto found = resolve_image_user(user, passwd, "");
    ASSERT_FALSE(found.is_ok()) << user;
    EXPECT_NE(found.status().message().find("is not a name a login may have"), std::string::npos) << user;
  }
  for (const char* ok : {"trainer", "_apt", "jovyan", "a.b-c_d", "u4242"}) EXPECT_TRUE(valid_login_name(ok)) << ok;
  for (const char* bad : {"", "-x", ".x", "1x", "a b", "a@b", "a:b", "a/b", "a\nb", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"})
    EXPECT_FALSE(valid_login_name(bad)) << bad;
}

TEST(ImageUserTest, PasswdWithReplacesOrAddsTheEntry) {
  const std::string replaced = passwd_with(kPasswd, resolved("rooted"), "/bin/bash");
  EXPECT_NE(replaced.find("rooted:x:1002:1002::/home/rooted:/bin/bash\n"), std::string::npos);
  EXPECT_EQ(replaced.find("/usr/local"), std::string::npos);
  EXPECT_NE(replaced.find("trainer:x:1000"), std::string::npos);
  const std::string added = passwd_with(kPasswd, resolved("4242"), "/bin/sh");
  EXPECT_NE(added.find("u4242:x:4242:0:edt:/home/u4242:/bin/sh\n"), std::string::npos);
  EXPECT_EQ(added.substr(0, kPasswd.size()), kPasswd);
}

}  // namespace
}  // namespace edt::control

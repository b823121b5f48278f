#include "launcher/hostfile.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace edt::launcher {
namespace {

std::vector<HostSlots> parse_ok(std::string_view text) {
  auto hosts = parse_hostfile(text, "hosts");
  EXPECT_TRUE(hosts.is_ok()) << hosts.status().to_string();
  return hosts.is_ok() ? hosts.value() : std::vector<HostSlots>{};
}

std::string parse_error(std::string_view text) {
  auto hosts = parse_hostfile(text, "hosts");
  EXPECT_FALSE(hosts.is_ok());
  if (!hosts.is_ok()) {
    EXPECT_EQ(hosts.status().code(), StatusCode::kInvalidArgument);
  }
  return hosts.is_ok() ? "" : hosts.status().message();
}

TEST(Hostfile, EveryFormatCommentsAndBlankLines) {
  auto hosts = parse_ok(
      "# cluster tthvd\n"
      "\n"
      "tthvd-launcher slots=1\n"
      "  worker-0 slots=4 max_slots=8   # OpenMPI\n"
      "worker-1:2\n"
      "worker-2\n"
      "10.0.0.7 max-slots=3\n"
      "::1\n"
      "[fe80::2]:3\n"
      "fe80::3 slots=5\n"
      "\t\n");
  std::vector<HostSlots> expected = {{"tthvd-launcher", 1}, {"worker-0", 4}, {"worker-1", 2}, {"worker-2", 1},
                                     {"10.0.0.7", 1},       {"::1", 1},      {"fe80::2", 3}, {"fe80::3", 5}};
  EXPECT_EQ(hosts, expected);
}

TEST(Hostfile, NoTrailingNewlineAndCrlf) {
  EXPECT_EQ(parse_ok("a slots=2\r\nb:3"), (std::vector<HostSlots>{{"a", 2}, {"b", 3}}));
}

TEST(Hostfile, DuplicateHostNamesBothLines) {
  std::string error = parse_error("a slots=2\n# x\nb\na:1\n");
  EXPECT_NE(error.find("hosts:4"), std::string::npos) << error;
  EXPECT_NE(error.find("first at hosts:1"), std::string::npos) << error;
  EXPECT_NE(error.find("'a'"), std::string::npos) << error;
}

TEST(Hostfile, MalformedLinesNameTheLineAndTheFix) {
  struct Case {
    const char* line;
    const char* says;
  } cases[] = {
      {"a slots=0", "slot count"},
      {"a slots=-1", "slot count"},
      {"a slots=two", "slot count"},
      {"a slots=", "slot count"},
      {"a:0", "slot count"},
      {"a:", "slot count"},
      {"a:x", "slot count"},
      {"a:2 slots=2", "slots are given twice"},
      {"a slots=2 slots=3", "slots are given twice"},
      {"a slots=4 max_slots=2", "more than max_slots"},
      {"a max_slots=1 max_slots=2", "max_slots is given twice"},
      {"a b", "unexpected 'b'"},
      {"a cpus=2", "unexpected 'cpus=2'"},
      {"a slots 2", "unexpected 'slots'"},
      {"-oProxyCommand=x", "not a host name"},
      {"a/b:2", "not a host name"},
      {"user@host", "not a host name"},
      {"[::1", "without ']'"},
      {"[host]:2", "not an IPv6 address"},
      {"[::1]x", "unexpected 'x'"},
      {"a:b:c", "neither 'host:N' nor an IPv6 address"},
      {"a:99999999", "slot count"},
  };
  for (const auto& c : cases) {
    std::string error = parse_error(std::string("ok slots=1\n\n") + c.line + "\n");
    EXPECT_EQ(error.rfind("hosts:3: '", 0), 0u) << c.line << " -> " << error;
    EXPECT_NE(error.find(c.says), std::string::npos) << c.line << " -> " << error;
    EXPECT_NE(error.find("write 'host slots=N', 'host:N' or 'host'"), std::string::npos) << error;
  }
}

// Found by fuzz/hostfile: inet_pton() stops at a NUL, so "::\0..." passed
// as the address "::" and the NUL went on into the host name.
TEST(Hostfile, ANulByteIsNoAddress) {
  EXPECT_FALSE(parse_hostfile(std::string("::\0\0\0\x1b", 6), "h").is_ok());
  EXPECT_FALSE(parse_host_list(std::string("[::1\0]:2", 8)).is_ok());
  EXPECT_TRUE(parse_host_list("[::1]:2").is_ok());
}

TEST(Hostfile, EmptyIsAnError) {
  EXPECT_NE(parse_error("# nothing\n\n").find("no hosts"), std::string::npos);
  EXPECT_NE(parse_error("").find("no hosts"), std::string::npos);
}

TEST(Hostfile, ReadFromFileNamesThePath) {
  std::string path = testing::TempDir() + "/edt_hostfile_test";
  std::ofstream(path) << "n1 slots=2\nn2:x\n";
  auto hosts = read_hostfile(path);
  ASSERT_FALSE(hosts.is_ok());
  EXPECT_EQ(hosts.status().message().rfind(path + ":2: 'n2:x'", 0), 0u) << hosts.status().message();
  std::remove(path.c_str());
  auto missing = read_hostfile(path);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find(path), std::string::npos);
}

TEST(HostList, SameFormatsAsHostfile) {
  auto hosts = parse_host_list("127.0.0.2:2, 127.0.0.3 ,b slots=3,[::1]:2");
  ASSERT_TRUE(hosts.is_ok()) << hosts.status().to_string();
  EXPECT_EQ(hosts.value(), (std::vector<HostSlots>{{"127.0.0.2", 2}, {"127.0.0.3", 1}, {"b", 3}, {"::1", 2}}));
  EXPECT_EQ(format_host_list(hosts.value()), "127.0.0.2:2,127.0.0.3:1,b:3,[::1]:2");
}

TEST(HostList, ErrorsNameTheEntry) {
  auto bad = parse_host_list("a:1,b:x");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().message().rfind("-H entry 2: 'b:x': the count after ':' 'x' is not a slot count", 0), 0u) << bad.status().message();
  auto duplicate = parse_host_list("a:1,b,a:2");
  ASSERT_FALSE(duplicate.is_ok());
  EXPECT_NE(duplicate.status().message().find("-H entry 3: host 'a' is listed again (first at -H entry 1)"),
            std::string::npos)
      << duplicate.status().message();
  auto empty = parse_host_list("a,,b");
  ASSERT_FALSE(empty.is_ok());
  EXPECT_NE(empty.status().message().find("-H entry 2 is empty"), std::string::npos);
}

}  // namespace
}  // namespace edt::launcher

#include "launcher/output.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <vector>

namespace edt::launcher {
namespace {

struct Captured {
  std::vector<std::string> out, err;
  LinePrefixer sink{[this](Stream s, std::string_view line) { (s == Stream::kStdout ? out : err).emplace_back(line); }};
};

TEST(LinePrefixer, WholeLinesWithRankAndStream) {
  Captured c;
  c.sink.write(0, Stream::kStdout, "hel");
  c.sink.write(1, Stream::kStdout, "other\nsec");
  c.sink.write(0, Stream::kStdout, "lo\nworld\n");
  c.sink.write(1, Stream::kStderr, "warn\n\n");
  c.sink.close(1, Stream::kStdout);
  c.sink.close(0, Stream::kStdout);
  EXPECT_EQ(c.out, (std::vector<std::string>{"[1]<stdout>: other\n", "[0]<stdout>: hello\n", "[0]<stdout>: world\n",
                                             "[1]<stdout>: sec\n"}));
  EXPECT_EQ(c.err, (std::vector<std::string>{"[1]<stderr>: warn\n", "[1]<stderr>: \n"}));
}

TEST(LinePrefixer, OverlongLinesAreSplit) {
  Captured c;
  std::string big(LinePrefixer::kMaxLine + 10, 'x');
  c.sink.write(2, Stream::kStdout, big + "\n");
  ASSERT_EQ(c.out.size(), 2u);
  EXPECT_EQ(c.out[0].size(), std::string("[2]<stdout>: ").size() + LinePrefixer::kMaxLine + 1);
  EXPECT_EQ(c.out[1], "[2]<stdout>: xxxxxxxxxx\n");
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(DirectoryOutput, OneFolderPerRankWithRawStreams) {
  std::string dir = testing::TempDir() + "/edt_output_test";
  auto sink = directory_output(dir, 2);
  ASSERT_TRUE(sink.is_ok()) << sink.status().to_string();
  sink.value()->write(1, Stream::kStdout, "a\nb");
  sink.value()->write(1, Stream::kStderr, "e\n");
  sink.value()->close(1, Stream::kStdout);
  sink = directory_output(dir + "/rank.0/stdout/x", 1);  // a file in the way
  EXPECT_FALSE(sink.is_ok());
  EXPECT_EQ(read_file(dir + "/rank.1/stdout"), "a\nb");
  EXPECT_EQ(read_file(dir + "/rank.1/stderr"), "e\n");
  EXPECT_EQ(read_file(dir + "/rank.0/stdout"), "");
}

}  // namespace
}  // namespace edt::launcher

// References as Docker reads them, and the refusals that must not echo
// what was given (a reference may hold a password by mistake). The pulls
// themselves, against a real registry, are tests/images.
#include "image/registry.h"

#include <gtest/gtest.h>

#include "image/http.h"

namespace edt::image {
namespace {

TEST(Reference, ReadsAsDockerDoes) {
  auto r = parse_reference("nvcr.io/nvidia/pytorch:24.05-py3");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->registry, "nvcr.io");
  EXPECT_EQ(r->repository, "nvidia/pytorch");
  EXPECT_EQ(r->tag, "24.05-py3");
  r = parse_reference("ubuntu");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->str(), "docker.io/library/ubuntu:latest");
  r = parse_reference("horovod/horovod:0.28.1");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->str(), "docker.io/horovod/horovod:0.28.1");
  r = parse_reference("127.0.0.1:5000/edt/a");
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->registry, "127.0.0.1:5000");
  EXPECT_EQ(r->tag, "latest");
  const std::string hex(64, 'a');
  r = parse_reference("localhost/x@sha256:" + hex);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->registry, "localhost");
  EXPECT_TRUE(r->tag.empty());
  EXPECT_EQ(r->digest->hex, hex);
}

TEST(Reference, RefusesWithoutEchoing) {
  for (const char* bad : {"", "user:hunter2@registry.example/x", "Registry.example/UPPER", "a//b", "r.io/x:bad tag",
                          "r.io/x:.dot", "r.io/x@sha256:short"}) {
    auto r = parse_reference(bad);
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_EQ(r.status().field(), "reference");
    EXPECT_EQ(r.status().message().find("hunter2"), std::string::npos) << r.status().message();
  }
}

TEST(Http, Base64AndEscapes) {
  EXPECT_EQ(base64(""), "");
  EXPECT_EQ(base64("f"), "Zg==");
  EXPECT_EQ(base64("fo"), "Zm8=");
  EXPECT_EQ(base64("foo"), "Zm9v");
  EXPECT_EQ(base64("user:pa:ss"), "dXNlcjpwYTpzcw==");
  EXPECT_EQ(url_escape("repository:a/b:pull"), "repository%3Aa%2Fb%3Apull");
}

TEST(Http, AnUnreachableServerIsUnavailable) {
  HttpClient client({});
  HttpRequest request;
  request.url = "https://127.0.0.1:1/v2/";
  auto r = client.get(request);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace edt::image

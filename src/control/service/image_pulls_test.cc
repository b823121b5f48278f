#include "control/service/image_pulls.h"

#include <gtest/gtest.h>

namespace edt::control {
namespace {

TEST(ImagePullsTest, APullIsListedWithItsPhaseWhileItsTicketLives) {
  ImagePulls pulls;
  {
    auto ticket = pulls.start("pytorch", "registry.example/pytorch:2", 1700000000);
    ASSERT_TRUE(ticket.is_ok());
    auto& pull = ticket->pull();
    auto only = [&] {
      auto listed = pulls.list();
      EXPECT_EQ(listed.size(), 1u);
      return listed.empty() ? ImagePullState{} : listed[0];
    };
    EXPECT_EQ(only().phase, "waiting");
    EXPECT_EQ(only().reference, "registry.example/pytorch:2");
    EXPECT_EQ(only().started_at, 1700000000);
    pull.in_store = true;
    EXPECT_EQ(only().phase, "resolving");
    pull.progress.layers = 2;
    pull.progress.bytes = 300;
    pull.progress.bytes_fetched = 100;
    pull.progress.bytes_streaming = 50;
    EXPECT_EQ(only().phase, "fetching");
    EXPECT_EQ(only().bytes_fetched, 150u);
    pull.progress.layers_fetched = 2;
    pull.progress.bytes_streaming = 500;  // a moment's overlap never shows more than the whole
    EXPECT_EQ(only().phase, "unpacking");
    EXPECT_EQ(only().bytes_fetched, 300u);
  }
  EXPECT_TRUE(pulls.list().empty());
}

TEST(ImagePullsTest, ASecondPullOfOneNameIsRefusedUntilTheFirstEnds) {
  ImagePulls pulls;
  {
    auto first = pulls.start("pytorch", "a/pytorch:1", 1);
    ASSERT_TRUE(first.is_ok());
    auto second = pulls.start("pytorch", "b/pytorch:2", 2);
    ASSERT_FALSE(second.is_ok());
    EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(second.status().message().find("is being pulled"), std::string::npos);
    auto other = pulls.start("tensorflow", "a/tensorflow:1", 3);
    ASSERT_TRUE(other.is_ok());
    ASSERT_EQ(pulls.list().size(), 2u);
    EXPECT_EQ(pulls.list()[0].name, "pytorch");  // oldest first
  }
  EXPECT_TRUE(pulls.start("pytorch", "b/pytorch:2", 4).is_ok());
}

}  // namespace
}  // namespace edt::control

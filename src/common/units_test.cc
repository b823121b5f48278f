#include "common/units.h"

#include <gtest/gtest.h>

namespace edt {

TEST(Units, ParsesSizes) {
  EXPECT_EQ(parse_size("0").value(), 0u);
  EXPECT_EQ(parse_size("4").value(), 4u);
  EXPECT_EQ(parse_size("512M").value(), 512ull << 20);
  EXPECT_EQ(parse_size("1Gi").value(), 1ull << 30);
  EXPECT_EQ(parse_size("64KiB").value(), 64ull << 10);
  EXPECT_EQ(parse_size("1.5k").value(), 1536u);
}

TEST(Units, RejectsBadSizes) {
  EXPECT_EQ(parse_size("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parse_size("M").status().code(), StatusCode::kInvalidArgument);
  auto bad = parse_size("12Q");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("unknown size unit 'q'"), std::string::npos);
}

TEST(Units, ParsesDurations) {
  EXPECT_EQ(parse_duration("30s").value().count(), 30000);
  EXPECT_EQ(parse_duration("500ms").value().count(), 500);
  EXPECT_EQ(parse_duration("2m").value().count(), 120000);
  EXPECT_EQ(parse_duration("7").value().count(), 7000);
  EXPECT_FALSE(parse_duration("soon").is_ok());
  EXPECT_FALSE(parse_duration("3days").is_ok());
}

// Found by fuzz/units: a size past 2^63 bytes and a duration past 2^63 ms
// came back as garbage (a negative duration), not as a value or an error.
TEST(Units, HugeValuesReadExactlyOrAreRefused) {
  EXPECT_EQ(parse_size("10000000T").value(), 10000000ull << 40);
  EXPECT_FALSE(parse_size("20000000T").is_ok());
  EXPECT_EQ(parse_duration("1000000000000h").value().count(), 3600000000000000000);
  auto too_long = parse_duration("9555555555555555H");
  ASSERT_FALSE(too_long.is_ok());
  EXPECT_NE(too_long.status().message().find("too long a duration"), std::string::npos);
}

TEST(Units, FormatsSizes) {
  EXPECT_EQ(format_size(4), "4 B");
  EXPECT_EQ(format_size(1536), "1.5 KiB");
  EXPECT_EQ(format_size(64ull << 20), "64 MiB");
}

}  // namespace edt

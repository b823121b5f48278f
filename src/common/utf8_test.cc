#include "common/utf8.h"

#include <gtest/gtest.h>

namespace edt::utf8 {
namespace {

TEST(Utf8, WellFormedTextPasses) {
  EXPECT_TRUE(is_valid(""));
  EXPECT_TRUE(is_valid("plain ascii\n"));
  EXPECT_TRUE(is_valid("gr\xC3\xBC\xC3\x9F"));                // U+00FC U+00DF
  EXPECT_TRUE(is_valid("\xE2\x82\xAC"));                      // U+20AC
  EXPECT_TRUE(is_valid("\xF0\x9F\x98\x80"));                  // U+1F600
  EXPECT_TRUE(is_valid("\xF4\x8F\xBF\xBF"));                  // U+10FFFF, the last
  EXPECT_TRUE(is_valid(std::string_view("nul\0inside", 10)));  // U+0000 is a character
}

TEST(Utf8, IllFormedBytesAreFoundWhereTheyStart) {
  EXPECT_EQ(first_invalid("\xFF"), 0u);
  EXPECT_EQ(first_invalid("ab\xFF"), 2u);
  EXPECT_EQ(first_invalid("a\xC3"), 1u);              // truncated
  EXPECT_EQ(first_invalid("\xC0\xAF"), 0u);           // overlong '/'
  EXPECT_EQ(first_invalid("\xE0\x80\xAF"), 0u);       // overlong
  EXPECT_EQ(first_invalid("\xED\xA0\x80"), 0u);       // a surrogate
  EXPECT_EQ(first_invalid("\xF4\x90\x80\x80"), 0u);   // above U+10FFFF
  EXPECT_EQ(first_invalid("\xF5\x80\x80\x80"), 0u);   // no such lead byte
  EXPECT_EQ(first_invalid("ok\xE2\x82x"), 2u);        // a continuation byte missing
  EXPECT_EQ(first_invalid("\x80"), 0u);               // a continuation byte alone
}

TEST(Utf8, SanitizedReplacesEachBadByteAndKeepsTheRest) {
  EXPECT_EQ(sanitized("fine \xE2\x82\xAC"), "fine \xE2\x82\xAC");
  EXPECT_EQ(sanitized("a\xFF" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(sanitized("\xC3"), "\xEF\xBF\xBD");
  EXPECT_EQ(sanitized("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_TRUE(is_valid(sanitized("\xFF\xFE\xC0\xAF\xF4\x90")));
}

}  // namespace
}  // namespace edt::utf8

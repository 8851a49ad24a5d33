#include "missile/common/quote.h"

#include "gtest/gtest.h"

namespace missile {
namespace {

TEST(QuoteStringTest, EscapesWhatJsonAndTomlRequire) {
  EXPECT_EQ(QuoteString(""), "\"\"");
  EXPECT_EQ(QuoteString("plain text"), "\"plain text\"");
  EXPECT_EQ(QuoteString("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(QuoteString("x\ny\tz"), "\"x\\ny\\tz\"");
  EXPECT_EQ(QuoteString(std::string("\x01\x1f\x7f", 3)), "\"\\u0001\\u001f\\u007f\"");
  EXPECT_EQ(QuoteString("GPU-é"), "\"GPU-é\"");  // UTF-8 passes through
}

}  // namespace
}  // namespace missile

#include "missile/common/size.h"

#include <cstdint>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace missile {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

uint64_t Size(std::string_view text) {
  absl::StatusOr<uint64_t> bytes = ParseSize(text);
  EXPECT_TRUE(bytes.ok()) << text << ": " << bytes.status();
  return bytes.value_or(0);
}

std::string SizeError(std::string_view text) {
  absl::StatusOr<uint64_t> bytes = ParseSize(text);
  EXPECT_FALSE(bytes.ok()) << text << " parsed as " << bytes.value_or(0);
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(bytes.status().message());
}

TEST(ParseSizeTest, PlainBytes) {
  EXPECT_EQ(Size("0"), 0u);
  EXPECT_EQ(Size("1048576"), 1048576u);
  EXPECT_EQ(Size("  42\t"), 42u);
  EXPECT_EQ(Size("42B"), 42u);
  EXPECT_EQ(Size("42 b"), 42u);
  EXPECT_EQ(Size("007"), 7u);
}

TEST(ParseSizeTest, UnitsAreBinaryInEveryForm) {
  for (std::string_view unit : {"M", "m", "MB", "mb", "MiB", "mib", "MIB", "Mb"}) {
    EXPECT_EQ(Size(std::string("512") + std::string(unit)), 512 * kMiB) << unit;
    EXPECT_EQ(Size(std::string("512 ") + std::string(unit)), 512 * kMiB) << unit;
  }
  EXPECT_EQ(Size("64K"), 64 * kKiB);
  EXPECT_EQ(Size("64KiB"), 64 * kKiB);
  EXPECT_EQ(Size("2GiB"), 2 * kGiB);
  EXPECT_EQ(Size("2gb"), 2 * kGiB);
  EXPECT_EQ(Size("3T"), 3 * kTiB);
  EXPECT_EQ(Size("3   TiB"), 3 * kTiB);
}

TEST(ParseSizeTest, FractionsRoundDown) {
  EXPECT_EQ(Size("1.5G"), kGiB + kGiB / 2);
  EXPECT_EQ(Size("1.5K"), 1536u);
  EXPECT_EQ(Size("0.5B"), 0u);
  EXPECT_EQ(Size("1.9"), 1u);
  EXPECT_EQ(Size("0.001K"), 1u);               // 1.024 bytes
  EXPECT_EQ(Size("0.0009K"), 0u);              // 0.9216 bytes
  EXPECT_EQ(Size("143.7GiB"), 154296700108u);  // floor(143.7 * 2^30) = floor(154296700108.8)
  // 2^-40 TiB is exactly one byte: the fraction is computed exactly, not in floating point.
  EXPECT_EQ(Size("0.0000000000009094947017729282379150390625T"), 1u);
  EXPECT_EQ(Size("0.0000000000009094947017729282379150390624T"), 0u);
}

TEST(ParseSizeTest, LargestValues) {
  EXPECT_EQ(Size("18446744073709551615"), kMax);
  EXPECT_EQ(Size("16777215T"), 16777215 * kTiB);
  EXPECT_EQ(Size("16777215.999999T"), 16777215 * kTiB + 1099510528264u);
  EXPECT_EQ(Size("16777215.9999999999999T"), kMax);  // Just below 2^64 before rounding down.
}

TEST(ParseSizeTest, RejectsOverflowPast2To64) {
  EXPECT_THAT(SizeError("18446744073709551616"), HasSubstr("too large"));
  EXPECT_THAT(SizeError("16777216T"), HasSubstr("too large"));
  EXPECT_THAT(SizeError("16777216.5T"), HasSubstr("too large"));
  EXPECT_THAT(SizeError("99999999999999999999999999G"), HasSubstr("too large"));
}

TEST(ParseSizeTest, RejectsBadTextAndQuotesIt) {
  EXPECT_THAT(SizeError(""), HasSubstr("invalid size \"\": empty"));
  EXPECT_THAT(SizeError("   "), HasSubstr("empty"));
  EXPECT_THAT(SizeError("-1"), HasSubstr("\"-1\": must not be negative"));
  EXPECT_THAT(SizeError("-1G"), HasSubstr("negative"));
  EXPECT_THAT(SizeError("12X"), HasSubstr("unknown unit \"X\""));
  EXPECT_THAT(SizeError("12 KiBs"), HasSubstr("unknown unit \"KiBs\""));
  EXPECT_THAT(SizeError("12P"), HasSubstr("\"12P\""));
  EXPECT_THAT(SizeError("12iB"), HasSubstr("unknown unit"));
  EXPECT_THAT(SizeError("G"), HasSubstr("\"G\": expected a number"));
  EXPECT_THAT(SizeError("+5"), HasSubstr("expected a number"));
  EXPECT_THAT(SizeError(".5G"), HasSubstr("expected a number"));
  EXPECT_THAT(SizeError("5.G"), HasSubstr("expected a number"));
  EXPECT_THAT(SizeError("1e9"), HasSubstr("unknown unit \"e9\""));
  EXPECT_THAT(SizeError("1,000"), HasSubstr("unknown unit"));
  EXPECT_THAT(SizeError("50%"), HasSubstr("unknown unit \"%\""));
  EXPECT_THAT(SizeError("1 2"), HasSubstr("unknown unit \"2\""));
  EXPECT_THAT(SizeError(std::string_view("1\x01", 2)), HasSubstr("\"1\\x01\""));
}

TEST(ParseSizeOrPercentTest, Sizes) {
  absl::StatusOr<SizeOrFraction> value = ParseSizeOrPercent("2GiB");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, SizeOrFraction::Bytes(2 * kGiB));
  EXPECT_FALSE(value->is_fraction);
  EXPECT_EQ(value->Resolve(kGiB), 2 * kGiB);  // Not clamped to the whole.

  value = ParseSizeOrPercent("0");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, SizeOrFraction::Bytes(0));
}

TEST(ParseSizeOrPercentTest, Percentages) {
  absl::StatusOr<SizeOrFraction> value = ParseSizeOrPercent("50%");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_TRUE(value->is_fraction);
  EXPECT_DOUBLE_EQ(value->fraction, 0.5);
  EXPECT_EQ(value->Resolve(1000), 500u);
  EXPECT_EQ(value->Resolve(1001), 500u);  // Rounded down.

  value = ParseSizeOrPercent(" 12.5 % ");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_DOUBLE_EQ(value->fraction, 0.125);

  value = ParseSizeOrPercent("100%");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(value->Resolve(kMax), kMax);
  EXPECT_EQ(value->Resolve(143 * kGiB + 12345), 143 * kGiB + 12345);

  value = ParseSizeOrPercent("95%");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(value->Resolve(100 * kGiB), 95 * kGiB);
  EXPECT_EQ(value->Resolve(0), 0u);

  value = ParseSizeOrPercent("0.0001%");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(value->Resolve(1000000), 1u);
}

// Resolve rounds the exact product down, despite 0.95 etc. not being exact in binary.
TEST(ParseSizeOrPercentTest, ResolveMatchesExactArithmetic) {
  struct Case {
    std::string_view text;
    uint64_t numerator;
    uint64_t denominator;
  };
  for (const Case& c : {Case{"95%", 95, 100}, Case{"33%", 33, 100}, Case{"12.5%", 125, 1000},
                        Case{"0.1%", 1, 1000}, Case{"70%", 70, 100}, Case{"99.9%", 999, 1000},
                        Case{"12.3%", 123, 1000}, Case{"0.7 %", 7, 1000}}) {
    absl::StatusOr<SizeOrFraction> value = ParseSizeOrPercent(c.text);
    ASSERT_TRUE(value.ok()) << value.status();
    for (uint64_t base : {uint64_t{0}, kMiB, 80 * kGiB, 141 * kGiB, 4 * kTiB}) {
      for (uint64_t whole = base; whole < base + 2000; ++whole) {
        const uint64_t exact = static_cast<uint64_t>(static_cast<unsigned __int128>(whole) *
                                                     c.numerator / c.denominator);
        ASSERT_EQ(value->Resolve(whole), exact) << c.text << " of " << whole;
      }
    }
  }
}

TEST(ParseSizeOrPercentTest, RejectsBadPercentages) {
  for (std::string_view text : {"0%", "0.0%", "100.01%", "150%", "-5%", "%", "abc%", "5%%", "1e2%",
                                "nan%", "inf%", "5G%", ".5%"}) {
    absl::StatusOr<SizeOrFraction> value = ParseSizeOrPercent(text);
    ASSERT_FALSE(value.ok()) << text;
    EXPECT_EQ(value.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(value.status().message(), HasSubstr("\"" + std::string(text) + "\"")) << text;
  }
  EXPECT_THAT(ParseSizeOrPercent("150%").status().message(), HasSubstr("at most 100%"));
  EXPECT_THAT(ParseSizeOrPercent("-5%").status().message(), HasSubstr("negative"));
  EXPECT_THAT(ParseSizeOrPercent("12Q").status().message(), HasSubstr("unknown unit"));
  EXPECT_FALSE(ParseSizeOrPercent("").ok());
}

TEST(FormatSizeTest, HumanReadable) {
  EXPECT_EQ(FormatSize(0), "0 B");
  EXPECT_EQ(FormatSize(512), "512 B");
  EXPECT_EQ(FormatSize(1023), "1023 B");
  EXPECT_EQ(FormatSize(1024), "1.0 KiB");
  EXPECT_EQ(FormatSize(1536), "1.5 KiB");
  EXPECT_EQ(FormatSize(2 * kMiB), "2.0 MiB");
  EXPECT_EQ(FormatSize(154296700108u), "143.7 GiB");
  EXPECT_EQ(FormatSize(kMiB - 1), "1.0 MiB");  // 1023.999 KiB rounds up into the next unit.
  EXPECT_EQ(FormatSize(kMiB - 60), "1023.9 KiB");
  EXPECT_EQ(FormatSize(5 * kTiB), "5.0 TiB");
  EXPECT_EQ(FormatSize(kMax), "16.0 EiB");
}

TEST(FormatSizeTest, ParseSizeReadsItBack) {
  for (uint64_t bytes : {uint64_t{512}, 2 * kMiB, 154296700108u, 3 * kTiB + kTiB / 2}) {
    const uint64_t back = Size(FormatSize(bytes));
    EXPECT_LE(back > bytes ? back - bytes : bytes - back, bytes / 1000) << FormatSize(bytes);
  }
}

TEST(FormatSizeExactTest, RoundTrips) {
  EXPECT_EQ(FormatSizeExact(0), "0");
  EXPECT_EQ(FormatSizeExact(4097), "4097B");
  EXPECT_EQ(FormatSizeExact(64 * kKiB), "64KiB");
  EXPECT_EQ(FormatSizeExact(2 * kMiB), "2MiB");
  EXPECT_EQ(FormatSizeExact(kGiB + kGiB / 2), "1536MiB");
  EXPECT_EQ(FormatSizeExact(2 * kGiB), "2GiB");
  EXPECT_EQ(FormatSizeExact(1024 * kTiB), "1024TiB");
  for (uint64_t bytes : {uint64_t{0}, uint64_t{1}, uint64_t{4097}, 64 * kKiB, kGiB + kGiB / 2,
                         7 * kTiB, kMax, kMax - 1023}) {
    EXPECT_EQ(Size(FormatSizeExact(bytes)), bytes) << FormatSizeExact(bytes);
  }
}

// missiled's configuration and missilectl read sizes alike: a bare number other than 0 is
// refused (`--quota 95` once set a 95-byte quota), a unit or a percent sign says which.
TEST(ParseSizeOrPercentWithUnitTest, ABareNumberIsRefused) {
  for (std::string_view text : {"95", " 95 ", "1.5", "007"}) {
    absl::StatusOr<SizeOrFraction> value = ParseSizeOrPercentWithUnit(text);
    ASSERT_FALSE(value.ok()) << text;
    EXPECT_THAT(value.status().message(), HasSubstr("a number without a unit is ambiguous"));
  }
  EXPECT_THAT(ParseSizeOrPercentWithUnit("95").status().message(),
              HasSubstr("\"95%\", \"95GiB\" or \"95B\""));
  EXPECT_EQ(*ParseSizeOrPercentWithUnit("95B"), SizeOrFraction::Bytes(95));
  EXPECT_EQ(*ParseSizeOrPercentWithUnit("8G"), SizeOrFraction::Bytes(8 * kGiB));
  EXPECT_EQ(*ParseSizeOrPercentWithUnit("50%"), SizeOrFraction::Fraction(0.5));
  EXPECT_EQ(*ParseSizeOrPercentWithUnit("0"), SizeOrFraction::Bytes(0));
  EXPECT_EQ(*ParseSizeOrPercentWithUnit("0.0"), SizeOrFraction::Bytes(0));
  EXPECT_FALSE(ParseSizeOrPercentWithUnit("150%").ok());
  EXPECT_FALSE(ParseSizeOrPercentWithUnit("-1G").ok());
  EXPECT_FALSE(IsBareNonZeroNumber("95MiB"));
  EXPECT_FALSE(IsBareNonZeroNumber("0"));
  EXPECT_FALSE(IsBareNonZeroNumber(""));
}

TEST(FormatSizeOrPercentTest, Both) {
  EXPECT_EQ(FormatSizeOrPercent(SizeOrFraction::Fraction(0.95)), "95%");
  EXPECT_EQ(FormatSizeOrPercent(SizeOrFraction::Fraction(0.125)), "12.5%");
  EXPECT_EQ(FormatSizeOrPercent(SizeOrFraction::Fraction(1.0)), "100%");
  // Found by config_fuzzer: "%g" wrote "1e-09%", which the parser (no exponents) refuses.
  EXPECT_EQ(FormatSizeOrPercent(SizeOrFraction::Fraction(1e-11)), "0.000000001%");
  for (double f : {1e-11, 0.1234567890123, 1.0 / 3, 5e-324, 0.999999999999}) {
    absl::StatusOr<SizeOrFraction> back =
        ParseSizeOrPercent(FormatSizeOrPercent(SizeOrFraction::Fraction(f)));
    ASSERT_TRUE(back.ok()) << f << ": " << back.status();
    EXPECT_EQ(back->fraction, f);
  }
  EXPECT_EQ(FormatSizeOrPercent(SizeOrFraction::Fraction(1.0)), "100%");
  EXPECT_EQ(FormatSizeOrPercent(SizeOrFraction::Bytes(2 * kGiB)), "2GiB");
  EXPECT_EQ(FormatSizeOrPercent(SizeOrFraction::Bytes(0)), "0");
  absl::StatusOr<SizeOrFraction> back = ParseSizeOrPercent("95%");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*ParseSizeOrPercent(FormatSizeOrPercent(*back)), *back);
}

}  // namespace
}  // namespace missile

#include "missile/common/size.h"

#include <charconv>
#include <cmath>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "missile/common/status_macros.h"

namespace missile {
namespace {

constexpr std::string_view kSpaces = " \t\n\r\f\v";

std::string_view Trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(kSpaces);
  if (begin == std::string_view::npos) return {};
  const size_t end = s.find_last_not_of(kSpaces);
  return s.substr(begin, end - begin + 1);
}

// Debian's Abseil has its own string_view: StrCat takes std::string_view only through this.
absl::string_view AsAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

char ToLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// The text between double quotes, with anything unprintable escaped, so that a message never
// carries control characters from a config file into a log.
std::string Quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u >= 0x7f) {
      out += "\\x";
      out += absl::BytesToHexString(absl::string_view(&c, 1));
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

absl::Status Invalid(std::string_view what, std::string_view text, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("invalid ", AsAbsl(what), " ", Quote(text), ": ", AsAbsl(why)));
}

// A decimal number as written: digits, optionally "." and more digits.
struct Number {
  std::string_view integer;
  std::string_view fraction;  // Empty when there is no ".".
  std::string_view text;      // Both, with the ".".
};

// Reads a number from the front of `s` and removes it. False when `s` does not start with one.
bool ConsumeNumber(std::string_view& s, Number* number) {
  size_t i = 0;
  while (i < s.size() && IsDigit(s[i])) ++i;
  if (i == 0) return false;
  number->integer = s.substr(0, i);
  number->fraction = {};
  if (i < s.size() && s[i] == '.') {
    size_t j = i + 1;
    while (j < s.size() && IsDigit(s[j])) ++j;
    if (j == i + 1) return false;  // "1." is not a number.
    number->fraction = s.substr(i + 1, j - i - 1);
    i = j;
  }
  number->text = s.substr(0, i);
  s.remove_prefix(i);
  return true;
}

// 1 for "", "b"; 2^10 for "k", "kb", "kib"; and so on up to "t". 0 when unknown.
uint64_t UnitMultiplier(std::string_view unit) {
  std::string lower;
  for (char c : unit) lower += ToLower(c);
  if (lower.empty() || lower == "b") return 1;
  static constexpr std::string_view kPrefixes = "kmgt";
  const size_t power = kPrefixes.find(lower[0]);
  if (power == std::string_view::npos) return 0;
  const std::string_view rest = std::string_view(lower).substr(1);
  if (!rest.empty() && rest != "b" && rest != "ib") return 0;
  return uint64_t{1} << (10 * (power + 1));
}

// floor(0.<digits> * multiplier), exactly: multiplies the decimal digits by `multiplier` from
// the last digit up; what carries out of the first digit is the integer part.
uint64_t FractionTimes(std::string_view digits, uint64_t multiplier) {
  uint64_t carry = 0;  // < multiplier <= 2^40, so digit * multiplier + carry fits.
  for (size_t i = digits.size(); i-- > 0;) {
    const uint64_t t = static_cast<uint64_t>(digits[i] - '0') * multiplier + carry;
    carry = t / 10;
  }
  return carry;
}

constexpr std::string_view kSizeSyntax =
    "expected a number of bytes with an optional unit (B, K/KB/KiB, M/MB/MiB, G/GB/GiB, "
    "T/TB/TiB; all binary), e.g. \"512MiB\"";

absl::StatusOr<uint64_t> ParseSizeImpl(std::string_view what, std::string_view original) {
  std::string_view s = Trim(original);
  if (s.empty()) return Invalid(what, original, "empty");
  if (s[0] == '-') return Invalid(what, original, "must not be negative");
  Number number;
  if (!ConsumeNumber(s, &number)) return Invalid(what, original, kSizeSyntax);
  const std::string_view unit = Trim(s);
  const uint64_t multiplier = UnitMultiplier(unit);
  if (multiplier == 0) {
    return Invalid(what, original,
                   absl::StrCat("unknown unit ", Quote(unit), "; ", AsAbsl(kSizeSyntax)));
  }
  const std::string_view too_large = "too large (at most 2^64 - 1 bytes)";
  uint64_t integer = 0;
  const auto [end, ec] = std::from_chars(number.integer.data(),
                                         number.integer.data() + number.integer.size(), integer);
  if (ec == std::errc::result_out_of_range) return Invalid(what, original, too_large);
  if (ec != std::errc() || end != number.integer.data() + number.integer.size()) {
    return Invalid(what, original, kSizeSyntax);
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(integer, multiplier, &bytes) ||
      __builtin_add_overflow(bytes, FractionTimes(number.fraction, multiplier), &bytes)) {
    return Invalid(what, original, too_large);
  }
  return bytes;
}

}  // namespace

absl::StatusOr<uint64_t> ParseSize(std::string_view text) { return ParseSizeImpl("size", text); }

absl::StatusOr<SizeOrFraction> ParseSizeOrPercent(std::string_view text) {
  const std::string_view trimmed = Trim(text);
  if (trimmed.empty() || trimmed.back() != '%') {
    MISSILE_ASSIGN_OR_RETURN(uint64_t bytes, ParseSizeImpl("size or percentage", text));
    return SizeOrFraction::Bytes(bytes);
  }
  std::string_view s = Trim(trimmed.substr(0, trimmed.size() - 1));
  if (!s.empty() && s[0] == '-') return Invalid("percentage", text, "must not be negative");
  Number number;
  if (!ConsumeNumber(s, &number) || !s.empty()) {
    return Invalid("percentage", text, "expected a number followed by %, e.g. \"50%\"");
  }
  // The double nearest to p/100 (p / 100.0 could round twice and miss it: see Resolve).
  const std::string over_100 = std::string(number.text) + "e-2";
  double fraction = 0;
  const auto [end, ec] =
      std::from_chars(over_100.data(), over_100.data() + over_100.size(), fraction);
  if ((ec != std::errc() && ec != std::errc::result_out_of_range) ||
      end != over_100.data() + over_100.size()) {
    return Invalid("percentage", text, "expected a number");
  }
  // Out of range: too small to be told from 0%, or too large for a double; both are rejected.
  if (ec != std::errc() || !(fraction > 0.0 && fraction <= 1.0)) {
    return Invalid("percentage", text, "must be more than 0% and at most 100%");
  }
  return SizeOrFraction::Fraction(fraction);
}

bool IsBareNonZeroNumber(std::string_view text) {
  bool digits = false;
  bool nonzero = false;
  for (char c : text) {
    if (IsDigit(c)) {
      digits = true;
      nonzero = nonzero || c != '0';
    } else if (c != '.' && c != ' ' && c != '\t') {
      return false;  // a unit, a sign or anything else: the size parser says what it means
    }
  }
  return digits && nonzero;
}

absl::StatusOr<SizeOrFraction> ParseSizeOrPercentWithUnit(std::string_view text) {
  if (IsBareNonZeroNumber(text)) {
    const std::string_view n = Trim(text);
    return Invalid("size or percentage", text,
                   absl::StrCat("a number without a unit is ambiguous: write it with one, such "
                                "as \"",
                                AsAbsl(n), "%\", \"", AsAbsl(n), "GiB\" or \"", AsAbsl(n), "B\""));
  }
  return ParseSizeOrPercent(text);
}

uint64_t SizeOrFraction::Resolve(uint64_t whole) const {
  if (!is_fraction) return bytes;
  if (fraction >= 1.0) return whole;
  if (!(fraction > 0.0)) return 0;
  // Exact arithmetic on the shortest decimal that reads back as `fraction`, i.e. the percentage
  // as written over 100: 95% of 100 GiB is exactly 95 GiB although 0.95 is not exact in binary,
  // and a product in floating point would come out a byte short.
  char buffer[512];  // The longest fixed-notation double below 1 is about 330 characters.
  const auto [end, ec] =
      std::to_chars(buffer, buffer + sizeof buffer, fraction, std::chars_format::fixed);
  const std::string_view text(buffer, ec == std::errc() ? end - buffer : 0);
  const size_t point = text.find('.');
  if (point == std::string_view::npos) {  // Not expected; fall back to floating point.
    return static_cast<uint64_t>(std::floor(static_cast<long double>(whole) * fraction));
  }
  const std::string_view digits = text.substr(point + 1);
  // More than 38 decimals means more than 21 leading zeros (a double has at most 17 significant
  // digits): fraction < 1e-21 and whole < 2^64 < 1e20, so the product is below one byte.
  if (digits.size() > 38) return 0;
  unsigned __int128 numerator = 0;    // < 10^17 once leading zeros are skipped
  unsigned __int128 denominator = 1;  // <= 10^38 < 2^128
  for (char c : digits) {
    numerator = numerator * 10 + static_cast<unsigned>(c - '0');
    denominator *= 10;
  }
  return static_cast<uint64_t>(static_cast<unsigned __int128>(whole) * numerator / denominator);
}

std::string FormatSize(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  static constexpr int kLastUnit = 6;
  if (bytes < kKiB) return absl::StrCat(bytes, " B");
  int unit = 1;
  while (unit < kLastUnit && (bytes >> (10 * (unit + 1))) != 0) ++unit;
  auto tenths_in = [bytes](int u) {
    const unsigned __int128 size = static_cast<unsigned __int128>(1) << (10 * u);
    return static_cast<uint64_t>((static_cast<unsigned __int128>(bytes) * 10 + size / 2) / size);
  };
  uint64_t tenths = tenths_in(unit);
  if (tenths >= 10240 && unit < kLastUnit) tenths = tenths_in(++unit);  // 1023.96 KiB: 1.0 MiB
  return absl::StrCat(tenths / 10, ".", tenths % 10, " ", kUnits[unit]);
}

std::string FormatSizeExact(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"", "KiB", "MiB", "GiB", "TiB"};
  if (bytes == 0) return "0";
  for (int unit = 4; unit >= 1; --unit) {
    const uint64_t size = uint64_t{1} << (10 * unit);
    if (bytes % size == 0) return absl::StrCat(bytes / size, kUnits[unit]);
  }
  // With its unit: a bare number in a size field is refused as ambiguous (bytes or percent?).
  return absl::StrCat(bytes, "B");
}

std::string FormatSizeOrPercent(const SizeOrFraction& value) {
  if (!value.is_fraction) return FormatSizeExact(value.bytes);
  // The fraction's shortest exact decimal, its point moved two places: ParseSizeOrPercent reads
  // it back to the same double, where "%g" gave "1e-09%" (no exponents there) or lost digits.
  char buf[512];
  const auto [end, ec] =
      std::to_chars(buf, buf + sizeof(buf), value.fraction, std::chars_format::fixed);
  std::string text(buf, ec == std::errc() ? end : buf);
  size_t dot = text.find('.');
  if (dot == std::string::npos) dot = text.size();
  std::string digits = text.substr(0, dot) + (dot < text.size() ? text.substr(dot + 1) : "");
  const size_t point = dot + 2;
  if (digits.size() < point) digits.append(point - digits.size(), '0');
  std::string out = digits.substr(0, point);
  if (point < digits.size()) out += "." + digits.substr(point);
  while (out.size() > 1 && out[0] == '0' && out[1] != '.') out.erase(0, 1);
  return out + "%";
}

}  // namespace missile

// Byte sizes as people write them in config files and flags, and as logs show them.
//
// Units are ALWAYS binary: K, M, G and T mean 2^10, 2^20, 2^30 and 2^40 bytes, with or without a
// trailing "B" or "iB" and in any case ("512M" == "512MB" == "512MiB" == "512mib" == 512 * 2^20).
// GPU memory is sized in powers of two, and nobody means 10^9 when writing "80GB" for a GPU.
// A bare number (or the unit "B") is bytes.
//
// Syntax: optional surrounding whitespace, a number (digits, optionally "." and more digits),
// optional spaces, an optional unit. A fraction is rounded down to a whole byte ("1.5K" = 1536,
// "0.5B" = 0). No sign, no exponent, no thousands separators.
//
// Errors: InvalidArgument, with the text quoted in the message. Pure functions: thread-safe.
#ifndef MISSILE_COMMON_SIZE_H_
#define MISSILE_COMMON_SIZE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace missile {

inline constexpr uint64_t kKiB = uint64_t{1} << 10;
inline constexpr uint64_t kMiB = uint64_t{1} << 20;
inline constexpr uint64_t kGiB = uint64_t{1} << 30;
inline constexpr uint64_t kTiB = uint64_t{1} << 40;

// "1048576", "512M", "512 MiB", "1.5G", "64kb" -> bytes. Rejects empty text, a sign, an unknown
// unit, and values of 2^64 bytes or more.
absl::StatusOr<uint64_t> ParseSize(std::string_view text);

// A size, or a fraction of some whole that is known only later (e.g. a GPU's memory).
struct SizeOrFraction {
  bool is_fraction = false;
  uint64_t bytes = 0;     // Meaningful when !is_fraction.
  double fraction = 0.0;  // In (0, 1] when is_fraction.

  static SizeOrFraction Bytes(uint64_t bytes) { return {false, bytes, 0.0}; }
  static SizeOrFraction Fraction(double fraction) { return {true, 0, fraction}; }

  // `bytes`, or floor(whole * fraction) (exactly `whole` for 100%). Does not clamp `bytes` to
  // `whole`: callers that need a cap apply it.
  uint64_t Resolve(uint64_t whole) const;

  bool operator==(const SizeOrFraction&) const = default;
};

// ParseSize, or a percentage "50%", "12.5 %" with 0 < p <= 100 (a fraction in (0, 1]).
absl::StatusOr<SizeOrFraction> ParseSizeOrPercent(std::string_view text);

// True for a bare number other than 0 ("95", " 1.5 "): bytes or percent? `pool_limit = 95` was
// once read as 95 bytes. missiled's configuration and missilectl refuse such a size.
bool IsBareNonZeroNumber(std::string_view text);

// ParseSizeOrPercent as missiled's configuration reads a size or percentage: a bare number
// other than 0 is refused as ambiguous ("95%", "95GiB" or "95B" say which).
absl::StatusOr<SizeOrFraction> ParseSizeOrPercentWithUnit(std::string_view text);

// For people: "512 B", "2.0 MiB", "143.7 GiB" (one decimal, rounded to nearest, binary units up
// to EiB). ParseSize reads it back, to within the rounding.
std::string FormatSize(uint64_t bytes);

// Exact and parseable: the largest binary unit that divides `bytes` ("2GiB", "1536MiB", "4097B",
// "0"). ParseSize(FormatSizeExact(n)) == n.
std::string FormatSizeExact(uint64_t bytes);

// "95%", "12.5%" for fractions (percent with up to 6 significant digits), FormatSizeExact for
// sizes. ParseSizeOrPercent reads it back (percentages to within the rounding).
std::string FormatSizeOrPercent(const SizeOrFraction& value);

}  // namespace missile

#endif  // MISSILE_COMMON_SIZE_H_

// What the settings tables of missiled.toml have in common: units, the conversion of a key's
// value to the field that holds it, and the plain-value descriptor of one setting. The tables
// themselves: compute_settings.h ([compute]) and pcie_settings.h ([pcie]). Constant data and
// pure functions: thread-safe.
#ifndef MISSILE_COMMON_SETTINGS_H_
#define MISSILE_COMMON_SETTINGS_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

#include "missile/common/size.h"

namespace missile::settings {

// kBytes: a size, written in the file as missile::ParseSize reads it ("2MiB"); the others are
// integers (or true/false for kBool).
enum class Unit { kBool, kCount, kTpcs, kPercent, kMicroseconds, kMilliseconds, kBytes };

// The nanoseconds in one `unit` for a time, else 1: a key's value times this is its field's.
constexpr uint64_t Scale(Unit unit) {
  switch (unit) {
    case Unit::kMicroseconds:
      return 1'000;
    case Unit::kMilliseconds:
      return 1'000'000;
    default:
      return 1;
  }
}

// What a value is, as missilectl's range messages say it ("microseconds in [0, 1000000]").
constexpr const char* UnitNoun(Unit unit) {
  switch (unit) {
    case Unit::kBool:
      return "on or off";
    case Unit::kCount:
      return "a count";
    case Unit::kTpcs:
      return "a TPC count";
    case Unit::kPercent:
      return "percent";
    case Unit::kMicroseconds:
      return "microseconds";
    case Unit::kMilliseconds:
      return "milliseconds";
    case Unit::kBytes:
      return "a size";
  }
  return "";
}

// A key's value (in its unit) as its field holds it: a bool, a fraction for a percentage held
// in a floating-point field, or scaled to nanoseconds for a time.
template <typename Field, typename Value>
constexpr Field ToField(Value v, Unit unit) {
  if constexpr (std::is_same_v<Field, bool>) {
    return v != 0;
  } else if constexpr (std::is_floating_point_v<Field>) {
    const Field scaled = static_cast<Field>(v) * static_cast<Field>(Scale(unit));
    return unit == Unit::kPercent ? scaled / 100 : scaled;
  } else {
    return static_cast<Field>(static_cast<uint64_t>(v) * Scale(unit));
  }
}

// A field's value in its key's unit (a bool stays one).
template <typename Field>
constexpr auto FromField(Field v, Unit unit) {
  if constexpr (std::is_same_v<Field, bool>) {
    return v;
  } else {
    return static_cast<uint64_t>(v) / Scale(unit);
  }
}

struct Setting {
  const char* section;  // "compute", "pcie"
  const char* key;      // the TOML key
  Unit unit;
  int64_t min;  // the range, inclusive, in `unit`
  int64_t max;
  int64_t default_value;
  bool live;  // changed by missilectl set and a reload, no restart
  const char* flag;  // missilectl set's option; nullptr for none
  const char* help;  // one line
  // A value must be a multiple of this (a size: in bytes).
  int64_t multiple = 1;
  // What 0 means when 0 lies outside [min, max] and is accepted all the same ("pcie.chunk":
  // that key's value), shown as a note beside it in the description; nullptr: 0 is held to the
  // range like any other value.
  const char* zero = nullptr;
};

// The entry of [section] `key` in `table`; nullptr when it has none.
constexpr const Setting* FindSetting(std::span<const Setting> table, std::string_view section,
                                     std::string_view key) {
  for (const Setting& s : table) {
    if (std::string_view(s.section) == section && std::string_view(s.key) == key) return &s;
  }
  return nullptr;
}

}  // namespace missile::settings

#endif  // MISSILE_COMMON_SETTINGS_H_

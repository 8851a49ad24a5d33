// The settings defined once in compute_settings.inc, as a table of plain values: what the
// configuration's description, missilectl's usage and range messages, and the tests read. The
// code that holds and moves the values (config fields, PacingSettings, PacingChange, the proto
// conversion) is generated from the .inc itself with MISSILE_COMPUTE_SETTING. Constant data:
// thread-safe.
#ifndef MISSILE_COMMON_COMPUTE_SETTINGS_H_
#define MISSILE_COMMON_COMPUTE_SETTINGS_H_

#include <cstdint>
#include <string_view>
#include <type_traits>

namespace missile::settings {

enum class Unit { kBool, kCount, kTpcs, kPercent, kMicroseconds, kMilliseconds };

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
  }
  return "";
}

// A key's value (in its unit) as its field holds it: a bool, or scaled to nanoseconds for a time.
template <typename Field, typename Value>
constexpr Field ToField(Value v, Unit unit) {
  if constexpr (std::is_same_v<Field, bool>) {
    return v != 0;
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
  const char* section;  // "compute"
  const char* key;      // the TOML key
  Unit unit;
  int64_t min;
  int64_t max;
  int64_t default_value;
  bool live;  // changed by missilectl set and a reload, no restart
  const char* flag;  // missilectl set's option
  const char* help;  // one line
};

inline constexpr Setting kComputeSettings[] = {
#define MISSILE_COMPUTE_SETTING(key, field, type, unit, min, max, def, live, flag, help) \
  {"compute", #key, Unit::unit, min, max, def, live, flag, help},
#include "missile/common/compute_settings.inc"
#undef MISSILE_COMPUTE_SETTING
};

// The entry of [section] `key`; nullptr when the table has none.
constexpr const Setting* FindSetting(std::string_view section, std::string_view key) {
  for (const Setting& s : kComputeSettings) {
    if (std::string_view(s.section) == section && std::string_view(s.key) == key) return &s;
  }
  return nullptr;
}

}  // namespace missile::settings

#endif  // MISSILE_COMMON_COMPUTE_SETTINGS_H_

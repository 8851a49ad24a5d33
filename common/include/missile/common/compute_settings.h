// The settings defined once in compute_settings.inc, as a table of plain values: what the
// configuration's description, missilectl's usage and range messages, and the tests read. The
// code that holds and moves the values (config fields, PacingSettings, PacingChange, the proto
// conversion) is generated from the .inc itself with MISSILE_COMPUTE_SETTING. Constant data:
// thread-safe.
#ifndef MISSILE_COMMON_COMPUTE_SETTINGS_H_
#define MISSILE_COMMON_COMPUTE_SETTINGS_H_

#include "missile/common/settings.h"

namespace missile::settings {

inline constexpr Setting kComputeSettings[] = {
#define MISSILE_COMPUTE_SETTING(key, field, type, unit, min, max, def, live, flag, help) \
  {"compute", #key, Unit::unit, min, max, def, live, flag, help},
#include "missile/common/compute_settings.inc"
#undef MISSILE_COMPUTE_SETTING
};

}  // namespace missile::settings

#endif  // MISSILE_COMMON_COMPUTE_SETTINGS_H_

// The settings defined once in pcie_settings.inc, as a table of plain values: what the
// configuration's parser and description, the reload and the tests read. The code that holds
// and moves the values (PcieSection, the arbiter's options) is generated from the .inc itself
// with MISSILE_PCIE_SETTING. Constant data: thread-safe.
#ifndef MISSILE_COMMON_PCIE_SETTINGS_H_
#define MISSILE_COMMON_PCIE_SETTINGS_H_

#include "missile/common/settings.h"

namespace missile::settings {

inline constexpr Setting kPcieSettings[] = {
#define MISSILE_PCIE_SETTING(key, field, type, unit, min, max, multiple, zero, def, live, help) \
  {"pcie", #key, Unit::unit, min, max, def, live, nullptr, help, multiple, zero},
#include "missile/common/pcie_settings.inc"
#undef MISSILE_PCIE_SETTING
};

}  // namespace missile::settings

#endif  // MISSILE_COMMON_PCIE_SETTINGS_H_

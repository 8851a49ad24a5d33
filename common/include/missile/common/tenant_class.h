// The two tenant classes, the one vocabulary every Missile component uses: the VRAM pool, the
// colour policy, the PCIe scheduler, the daemon and the CLI. The protobuf enum
// (missile.v1.TenantClass) is converted to and from this at the gRPC edge only.
// Thread safety: plain values and pure functions.
#ifndef MISSILE_COMMON_TENANT_CLASS_H_
#define MISSILE_COMMON_TENANT_CLASS_H_

#include <string_view>

#include "absl/status/statusor.h"

namespace missile {

enum class TenantClass { kLatencySensitive, kBestEffort };

// "ls", "be": the short names people type and the logs print.
const char* TenantClassName(TenantClass cls);

// "ls" or "be"; INVALID_ARGUMENT otherwise ("'x' is not ls or be").
absl::StatusOr<TenantClass> ParseTenantClass(std::string_view name);

}  // namespace missile

#endif  // MISSILE_COMMON_TENANT_CLASS_H_

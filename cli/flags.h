// The tenant class names as missilectl and missile-run read and print them (their command lines
// are parsed by common/flags). Pure functions: thread-safe.
#ifndef MISSILE_CLI_FLAGS_H_
#define MISSILE_CLI_FLAGS_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "missile/common/tenant_class.h"
#include "missile/v1/missile.pb.h"

namespace missile::cli {

// The class a flag names ("ls", "be": common's ParseTenantClass), as the proto enum; anything
// else is InvalidArgument naming `flag`.
inline absl::StatusOr<v1::TenantClass> ParseClass(std::string_view flag, std::string_view text) {
  absl::StatusOr<TenantClass> cls = ParseTenantClass(text);
  if (!cls.ok()) return absl::InvalidArgumentError(std::string(flag) + ": " +
                                                   std::string(cls.status().message()));
  return *cls == TenantClass::kLatencySensitive ? v1::LATENCY_SENSITIVE : v1::BEST_EFFORT;
}

// The short name people type (common's TenantClassName); "?" for an unspecified or unknown
// class.
inline std::string ClassName(v1::TenantClass cls) {
  switch (cls) {
    case v1::LATENCY_SENSITIVE:
      return TenantClassName(TenantClass::kLatencySensitive);
    case v1::BEST_EFFORT:
      return TenantClassName(TenantClass::kBestEffort);
    default:
      return "?";
  }
}

}  // namespace missile::cli

#endif  // MISSILE_CLI_FLAGS_H_

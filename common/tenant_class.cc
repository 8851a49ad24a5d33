#include "missile/common/tenant_class.h"

#include <string>

namespace missile {

const char* TenantClassName(TenantClass cls) {
  return cls == TenantClass::kLatencySensitive ? "ls" : "be";
}

absl::StatusOr<TenantClass> ParseTenantClass(std::string_view name) {
  if (name == "ls") return TenantClass::kLatencySensitive;
  if (name == "be") return TenantClass::kBestEffort;
  return absl::InvalidArgumentError("'" + std::string(name) + "' is not ls or be");
}

}  // namespace missile

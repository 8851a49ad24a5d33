// Shared helpers for the command-line parsers of missilectl and missile-run: reading
// "--flag VALUE" and "--flag=VALUE" from an argument list, and the tenant class names.
// Pure functions: thread-safe.
#ifndef MISSILE_CLI_FLAGS_H_
#define MISSILE_CLI_FLAGS_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "missile/common/tenant_class.h"
#include "missile/v1/missile.pb.h"

namespace missile::cli {

// A walk over arguments (without argv[0]). Options are "--name", "--name VALUE" or
// "--name=VALUE"; a value is taken verbatim, even when it starts with '-' ("--priority -5").
class ArgReader {
 public:
  explicit ArgReader(const std::vector<std::string>& args) : args_(args) {}

  bool Done() const { return pos_ >= args_.size(); }
  // The current argument, and the option name in it ("--quota=8G" -> "--quota").
  const std::string& Current() const { return args_[pos_]; }
  std::string_view CurrentName() const {
    std::string_view arg = args_[pos_];
    return arg.substr(0, arg.find('='));
  }
  // Consumes a flag that takes no value; "--json=x" is an error.
  absl::Status TakeSwitch() {
    std::string_view arg = args_[pos_];
    if (arg.find('=') != std::string_view::npos) {
      return absl::InvalidArgumentError(std::string(CurrentName()) + " takes no value");
    }
    ++pos_;
    return absl::OkStatus();
  }
  // Consumes an option and its value (inline after '=' or the next argument).
  absl::StatusOr<std::string> TakeValue() {
    std::string_view arg = args_[pos_];
    std::string name(CurrentName());
    ++pos_;
    if (size_t eq = arg.find('='); eq != std::string_view::npos) {
      return std::string(arg.substr(eq + 1));
    }
    if (Done()) return absl::InvalidArgumentError(name + " needs a value");
    return args_[pos_++];
  }
  // Consumes the current argument as is (a positional one).
  const std::string& TakePositional() { return args_[pos_++]; }
  // The arguments not consumed yet.
  std::vector<std::string> Rest() const {
    return std::vector<std::string>(args_.begin() + static_cast<std::ptrdiff_t>(pos_), args_.end());
  }

 private:
  const std::vector<std::string>& args_;
  size_t pos_ = 0;
};

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

#include "missile/common/k8s_identity.h"

#include "absl/strings/escaping.h"
#include "missile/common/status_macros.h"

namespace missile {
namespace {

// The value with quotes, backslashes and bytes outside printable ASCII C-escaped.
std::string Escaped(std::string_view value) {
  std::string out;
  for (unsigned char c : value) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c >= 0x7f) {
      out += "\\x";
      out += absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(&c), 1));
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

bool Allowed(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

}  // namespace

absl::Status ValidateK8sField(std::string_view what, std::string_view value, size_t max_len) {
  if (value.empty()) return absl::OkStatus();
  if (value.size() > max_len) {
    return absl::InvalidArgumentError(std::string(what) + ": " + std::to_string(value.size()) +
                                      " characters, more than " + std::to_string(max_len));
  }
  for (char c : value) {
    if (!Allowed(c)) {
      return absl::InvalidArgumentError(
          std::string(what) + " '" + Escaped(value) +
          "' has a character other than letters, digits, '-', '_' and '.'");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateK8sIdentity(const K8sIdentity& id) {
  MISSILE_RETURN_IF_ERROR(ValidateK8sField("pod", id.pod, kMaxPodName));
  MISSILE_RETURN_IF_ERROR(ValidateK8sField("namespace", id.k8s_namespace, kMaxNamespace));
  return ValidateK8sField("container", id.container, kMaxContainerName);
}

absl::Status ValidateK8sDeviceIds(const std::vector<std::string>& ids) {
  if (ids.size() > kMaxK8sDeviceIds) {
    return absl::InvalidArgumentError(std::to_string(ids.size()) + " device IDs, more than " +
                                      std::to_string(kMaxK8sDeviceIds));
  }
  for (const std::string& id : ids) {
    if (id.empty() || id.size() > kMaxK8sDeviceIdLength) {
      return absl::InvalidArgumentError("a device ID of " + std::to_string(id.size()) +
                                        " characters (1 to " +
                                        std::to_string(kMaxK8sDeviceIdLength) + " allowed)");
    }
    for (char c : id) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-';
      if (!ok) {
        return absl::InvalidArgumentError("device ID '" + Escaped(id) +
                                          "' has a character other than letters, digits and '-'");
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace missile

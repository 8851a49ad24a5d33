#include "config.h"

#include <cerrno>
#include <cstdlib>
#include <string_view>
#include <utility>

#include "missile/common/size.h"

namespace missile::shim {
namespace {

bool ParseLogLevel(std::string_view text, LogLevel* level) {
  static constexpr std::pair<std::string_view, LogLevel> kLevels[] = {
      {"trace", LogLevel::kTrace}, {"debug", LogLevel::kDebug}, {"info", LogLevel::kInfo},
      {"warn", LogLevel::kWarn},   {"warning", LogLevel::kWarn}, {"error", LogLevel::kError},
      {"off", LogLevel::kOff},
  };
  for (const auto& [name, value] : kLevels) {
    if (text == name) {
      *level = value;
      return true;
    }
  }
  return false;
}

// A variable that is one of two words: `*on` is whether it is `on_word`; unset keeps `*on`
// false, any other word warns and does too.
void ReadEitherWord(const GetEnvFn& getenv_fn, const char* name, std::string_view off_word,
                    std::string_view on_word, bool* on, Config* config) {
  const char* v = getenv_fn(name);
  if (v == nullptr || *v == '\0') return;
  const std::string_view s(v);
  if (s == on_word) {
    *on = true;
  } else if (s != off_word) {
    config->warnings.push_back(std::string(name) + "='" + std::string(s) + "' is not " +
                               std::string(off_word) + " or " + std::string(on_word) +
                               "; using " + std::string(off_word));
  }
}

// What the shim asks of missiled and does without it: quota, block layout, how long it waits
// for the daemon, what it does when there is none; and how an LS marks its work.
void ReadDaemonSettings(const GetEnvFn& getenv_fn, Config* config) {
  if (const char* v = getenv_fn("MISSILE_QUOTA"); v != nullptr && *v != '\0') {
    absl::StatusOr<uint64_t> bytes = ParseSize(v);
    if (bytes.ok()) {
      config->quota_bytes = *bytes;
    } else {
      config->warnings.push_back("MISSILE_QUOTA: " + std::string(bytes.status().message()) +
                                "; using the class default");
    }
  }
  if (const char* v = getenv_fn("MISSILE_BLOCKS"); v != nullptr && *v != '\0') {
    std::string_view s(v);
    if (s == "single") {
      config->blocks = Config::Blocks::kSingle;
    } else if (s == "chunks") {
      config->blocks = Config::Blocks::kChunks;
    } else if (s != "auto") {
      config->warnings.push_back("MISSILE_BLOCKS='" + std::string(s) +
                                "' is not auto, single or chunks; using auto");
    }
  }
  ReadEitherWord(getenv_fn, "MISSILE_LS_MARKS", "waits", "every", &config->ls_marks_every, config);
  if (const char* v = getenv_fn("MISSILE_DAEMON_TIMEOUT_MS"); v != nullptr && *v != '\0') {
    char* end = nullptr;
    errno = 0;
    long ms = strtol(v, &end, 10);
    if (errno != 0 || *end != '\0' || ms < 100 || ms > 600000) {
      config->warnings.push_back("MISSILE_DAEMON_TIMEOUT_MS='" + std::string(v) +
                                "' is not a number of milliseconds from 100 to 600000; using " +
                                std::to_string(config->daemon_timeout_ms));
    } else {
      config->daemon_timeout_ms = static_cast<int>(ms);
    }
  }
  ReadEitherWord(getenv_fn, "MISSILE_NO_DAEMON", "passthrough", "refuse",
                 &config->refuse_without_daemon, config);
}

// The Kubernetes identity; a bad field is dropped (the others are kept) with a warning.
void ReadK8sIdentity(const GetEnvFn& getenv_fn, Config* config) {
  struct Field {
    const char* env;
    const char* what;
    size_t max_len;
    std::string K8sIdentity::*slot;
  };
  static constexpr Field kFields[] = {
      {"MISSILE_K8S_POD", "pod", kMaxPodName, &K8sIdentity::pod},
      {"MISSILE_K8S_NAMESPACE", "namespace", kMaxNamespace, &K8sIdentity::k8s_namespace},
      {"MISSILE_K8S_CONTAINER", "container", kMaxContainerName, &K8sIdentity::container},
  };
  for (const Field& f : kFields) {
    const char* v = getenv_fn(f.env);
    if (v == nullptr || *v == '\0') continue;
    if (absl::Status s = ValidateK8sField(f.what, v, f.max_len); !s.ok()) {
      config->warnings.push_back(std::string(f.env) + ": " + std::string(s.message()) +
                                 "; not sent to missiled");
      continue;
    }
    config->k8s.*f.slot = v;
  }
  // The device plugin's allocated IDs: all kept, or (any one bad) none, with a warning.
  const char* v = getenv_fn("MISSILE_K8S_DEVICES");
  if (v == nullptr || *v == '\0') return;
  std::vector<std::string> ids;
  std::string_view rest(v);
  // Stop splitting past the bound: the check below refuses the list anyway.
  while (ids.size() <= kMaxK8sDeviceIds) {
    const size_t comma = rest.find(',');
    ids.emplace_back(rest.substr(0, comma));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (absl::Status s = ValidateK8sDeviceIds(ids); !s.ok()) {
    config->warnings.push_back("MISSILE_K8S_DEVICES: " + std::string(s.message()) +
                               "; not sent to missiled");
    return;
  }
  config->k8s_devices = std::move(ids);
}

}  // namespace

Config ParseConfig(const GetEnvFn& getenv_fn) {
  Config config;
  if (const char* v = getenv_fn("MISSILE_DISABLE"); v != nullptr && *v != '\0') {
    std::string_view s(v);
    if (s == "1" || s == "true" || s == "yes") {
      config.disabled = true;
    } else if (!(s == "0" || s == "false" || s == "no")) {
      config.warnings.push_back("MISSILE_DISABLE='" + std::string(s) +
                                "' is not one of 1/0/true/false/yes/no; hooks stay enabled");
    }
  }
  if (const char* v = getenv_fn("MISSILE_LOG_LEVEL"); v != nullptr && *v != '\0') {
    if (!ParseLogLevel(v, &config.log_level)) {
      config.warnings.push_back(std::string("MISSILE_LOG_LEVEL='") + v +
                                "' is not one of trace/debug/info/warn/error/off; using warn");
    }
  }
  if (const char* v = getenv_fn("MISSILE_REAL_LIBCUDA"); v != nullptr && *v != '\0') {
    if (v[0] != '/') {
      config.warnings.push_back(std::string("MISSILE_REAL_LIBCUDA='") + v +
                                "' is not an absolute path; searching for the driver instead");
    } else {
      config.real_driver_path = v;
    }
  }
  if (const char* v = getenv_fn("MISSILE_REPORT"); v != nullptr && *v != '\0') {
    config.report = v;
  }
  if (const char* v = getenv_fn("MISSILE_SOCKET"); v != nullptr && *v != '\0') {
    config.socket_path = v;
  }
  if (const char* v = getenv_fn("MISSILE_TENANT_NAME"); v != nullptr && *v != '\0') {
    config.tenant_name = v;
  }
  if (const char* v = getenv_fn("MISSILE_TENANT_CLASS"); v != nullptr && *v != '\0') {
    std::string_view s(v);
    if (s == "ls" || s == "LS") {
      config.latency_sensitive = true;
    } else if (!(s == "be" || s == "BE")) {
      config.warnings.push_back("MISSILE_TENANT_CLASS='" + std::string(s) +
                                "' is not ls or be; registering as be");
    }
  }
  ReadDaemonSettings(getenv_fn, &config);
  ReadK8sIdentity(getenv_fn, &config);
  return config;
}

std::string ExpandReportPath(const std::string& pattern, int pid) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'p') {
      out += std::to_string(pid);
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

}  // namespace missile::shim

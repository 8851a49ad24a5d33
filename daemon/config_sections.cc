// The sections of the file and their keys: which keys each table holds, their ranges, and
// the keys read by their own rules (socket mode, log level, device list).
#include <algorithm>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/internal/config_parser.h"
#include "missile/common/compute_settings.h"
#include "missile/common/pcie_settings.h"
#include "missile/common/quote.h"

namespace missile::daemon::config_internal {
namespace {

constexpr int kMinPriority = -20;  // Like nice(1), and pcie::kMinPriority.
constexpr int kMaxPriority = 19;
constexpr int kMaxDeviceOrdinal = 1023;
constexpr int kMaxColourIndex = 63;  // colorer::ColourSet holds colours 0..63.

constexpr const char* kLogLevels[] = {"trace", "debug", "info", "warn", "error", "off"};
constexpr size_t kMaxPathBytes = 4095;  // PATH_MAX less the NUL

}  // namespace

void Parser::ParseRoot(const toml::table& root) {
  Table(root, "",
        {{"daemon", [this](Node n, Key k) { ParseDaemon(n, k); }},
         {"gpu", [this](Node n, Key k) { ParseGpu(n, k); }},
         {"classes", [this](Node n, Key k) { ParseClasses(n, k); }},
         {"pcie", [this](Node n, Key k) { ParsePcie(n, k); }},
         {"compute", [this](Node n, Key k) { ParseCompute(n, k); }},
         {"metrics", [this](Node n, Key k) { ParseMetrics(n, k); }},
         {"limits", [this](Node n, Key k) { ParseLimits(n, k); }},
         {"kubernetes", [this](Node n, Key k) { ParseKubernetes(n, k); }}});
}

void Parser::ParseClasses(const toml::node& node, const std::string& path) {
  Table(node, path,
        {{"ls", [this](Node n, Key k) { ParseClass(n, k, &c_->classes.ls); }},
         {"be", [this](Node n, Key k) { ParseClass(n, k, &c_->classes.be); }}});
}

void Parser::ParseDaemon(const toml::node& node, const std::string& path) {
  DaemonSection& d = c_->daemon;
  Table(node, path,
        {{"socket",
          [&](Node n, Key k) {
            std::string v;
            if (GetString(n, k, &v) && CheckAbsolutePath(n, k, v, false, kMaxSocketPathBytes)) {
              d.socket = v;
            }
          }},
         {"fd_socket",
          [&](Node n, Key k) {
            std::string v;
            if (GetString(n, k, &v) && CheckAbsolutePath(n, k, v, true, kMaxSocketPathBytes)) {
              d.fd_socket = v;
            }
          }},
         {"socket_group",
          [&](Node n, Key k) {
            std::string v;
            if (GetString(n, k, &v) && CheckGroup(n, k, v)) d.socket_group = v;
          }},
         {"socket_mode", [&](Node n, Key k) { ParseSocketMode(n, k); }},
         {"admin_group",
          [&](Node n, Key k) {
            std::string v;
            if (GetString(n, k, &v) && CheckGroup(n, k, v)) d.admin_group = v;
          }},
         {"log_level", [&](Node n, Key k) { ParseLogLevel(n, k); }},
         {"state_file", [&](Node n, Key k) {
            std::string v;
            if (GetString(n, k, &v) && CheckAbsolutePath(n, k, v, true, 4096)) d.state_file = v;
          }}});
}

void Parser::ParseGpu(const toml::node& node, const std::string& path) {
  GpuSection& g = c_->gpu;
  Table(node, path,
        {{"devices", [&](Node n, Key k) { ParseDevices(n, k); }},
         {"pool_limit",
          [&](Node n, Key k) {
            SizeOrFraction v;
            if (!GetSizeOrPercent(n, k, &v)) return;
            if (!v.is_fraction && v.bytes == 0) return Fail(n, k, "must not be 0");
            g.pool_limit = v;
          }},
         {"prealloc", [&](Node n, Key k) { GetSizeOrPercent(n, k, &g.prealloc); }},
         {"cache_limit", [&](Node n, Key k) { GetSize(n, k, &g.cache_limit); }},
         {"scrub_on_release", [&](Node n, Key k) { GetBool(n, k, &g.scrub_on_release); }},
         {"profile_dir",
          [&](Node n, Key k) {
            std::string v;
            if (GetString(n, k, &v) && CheckAbsolutePath(n, k, v, true, kMaxPathBytes)) {
              g.profile_dir = v;
            }
          }},
         {"ls_colours", [&](Node n, Key k) { GetInt(n, k, 0, kMaxColourIndex, &g.ls_colours); }}});
}

void Parser::ParseClass(const toml::node& node, const std::string& path, ClassSection* cls) {
  auto quota = [this](Node n, Key k, SizeOrFraction* out) {
    SizeOrFraction v;
    if (!GetSizeOrPercent(n, k, &v)) return;
    if (!v.is_fraction && v.bytes == 0) return Fail(n, k, "must not be 0");
    *out = v;
  };
  Table(node, path,
        {{"priority",
          [&](Node n, Key k) { GetInt(n, k, kMinPriority, kMaxPriority, &cls->priority); }},
         {"tenant_quota", [&](Node n, Key k) { quota(n, k, &cls->tenant_quota); }},
         {"class_quota", [&](Node n, Key k) { quota(n, k, &cls->class_quota); }}});
}

// The keys as pcie_settings.inc defines them.
void Parser::ParsePcie(const toml::node& node, const std::string& path) {
  PcieSection& p = c_->pcie;
  auto get = [this](Node n, Key k, std::string_view name, auto* out) {
    GetSetting(n, k, *settings::FindSetting(settings::kPcieSettings, "pcie", name), out);
  };
  Table(node, path,
        {
#define MISSILE_PCIE_SETTING(key, field, type, unit, min, max, multiple, zero, def, live, help) \
  {#key, [&](Node n, Key k) { get(n, k, #key, &p.key); }},
#include "missile/common/pcie_settings.inc"
#undef MISSILE_PCIE_SETTING
        });
}

// The pacing settings as compute_settings.inc defines them, then the MPS keys.
void Parser::ParseCompute(const toml::node& node, const std::string& path) {
  ComputeSection& c = c_->compute;
  auto get = [this](Node n, Key k, std::string_view name, auto* out) {
    GetSetting(n, k, *settings::FindSetting(settings::kComputeSettings, "compute", name), out);
  };
  Table(node, path,
        {
#define MISSILE_COMPUTE_SETTING(key, field, type, unit, min, max, def, live, flag, help) \
  {#key, [&](Node n, Key k) { get(n, k, #key, &c.key); }},
#include "missile/common/compute_settings.inc"
#undef MISSILE_COMPUTE_SETTING
         {"mps",
          [&](Node n, Key k) {
            std::string v;
            if (!GetString(n, k, &v)) return;
            if (v != "off" && v != "start") {
              Fail(n, k, "must be \"off\" or \"start\"");
              return;
            }
            c.mps = v;
          }},
         {"mps_pipe_directory",
          [&](Node n, Key k) {
            std::string v;
            if (GetString(n, k, &v) && CheckAbsolutePath(n, k, v, false, kMaxSocketPathBytes)) {
              c.mps_pipe_directory = v;
            }
          }},
         {"mps_log_directory",
          [&](Node n, Key k) {
            std::string v;
            if (GetString(n, k, &v) && CheckAbsolutePath(n, k, v, false, 4096)) {
              c.mps_log_directory = v;
            }
          }},
         {"mps_control", [&](Node n, Key k) {
            std::string v;
            if (!GetString(n, k, &v)) return;
            if (v.empty() || v.size() > 4096) {
              Fail(n, k, "must name the MPS control program (a name in PATH or a path)");
              return;
            }
            c.mps_control = v;
          }}});
}

void Parser::ParseSocketMode(const toml::node& node, const std::string& key) {
  const std::string expect =
      "must be an octal string of permissions such as \"0660\" (at most \"0777\")";
  const toml::value<std::string>* value = node.as_string();
  if (value == nullptr) return Fail(node, key, absl::StrCat(expect, ", got ", Got(node)));
  const std::string& text = value->get();
  const bool octal = (text.size() == 3 || (text.size() == 4 && text[0] == '0')) &&
                     text.find_first_not_of("01234567") == std::string::npos;
  if (!octal) return Fail(node, key, absl::StrCat(expect, ", got ", QuoteString(text)));
  const auto mode = static_cast<uint32_t>(std::stoul(text, nullptr, 8));
  if (mode & 0002) {
    return Fail(node, key,
                absl::StrCat("must not let others write (o+w), or any local user could use the "
                             "GPUs, got ",
                             QuoteString(text)));
  }
  c_->daemon.socket_mode = mode;
}

void Parser::ParseLogLevel(const toml::node& node, const std::string& key) {
  std::string level;
  if (!GetString(node, key, &level)) return;
  if (std::find(std::begin(kLogLevels), std::end(kLogLevels), level) == std::end(kLogLevels)) {
    return Fail(node, key,
                absl::StrCat("must be one of ", absl::StrJoin(kLogLevels, ", "), ", got ",
                             QuoteString(level)));
  }
  c_->daemon.log_level = level;
}

void Parser::ParseDevices(const toml::node& node, const std::string& key) {
  const std::string expect = "must be \"all\" or an array of CUDA device ordinals such as [0, 1]";
  if (const toml::value<std::string>* value = node.as_string()) {
    if (value->get() != "all") return Fail(node, key, absl::StrCat(expect, ", got ", Got(node)));
    c_->gpu.devices.reset();
    return;
  }
  const toml::array* array = node.as_array();
  if (array == nullptr) return Fail(node, key, absl::StrCat(expect, ", got ", Got(node)));
  if (array->empty()) return Fail(node, key, "must not be empty (\"all\" means every GPU)");
  std::vector<int> devices;
  bool ok = true;
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::node& element = (*array)[i];
    int ordinal = 0;
    if (!GetInt(element, absl::StrCat(key, "[", i, "]"), 0, kMaxDeviceOrdinal, &ordinal)) {
      ok = false;
    } else if (std::find(devices.begin(), devices.end(), ordinal) != devices.end()) {
      Fail(element, key, absl::StrCat("lists device ", ordinal, " twice"));
      ok = false;
    } else {
      devices.push_back(ordinal);
    }
  }
  if (ok) c_->gpu.devices = std::move(devices);
}

}  // namespace missile::daemon::config_internal

#include "plugin_config.h"

#include <charconv>
#include <functional>
#include <map>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "missile/common/status_macros.h"
#include "missile/flags/parse.h"

namespace missile::deviceplugin {

absl::StatusOr<uint64_t> ClassResource::SlotQuota(uint64_t pool_bytes) const {
  if (!quota_per_slot.is_fraction) return quota_per_slot.bytes;
  if (pool_bytes == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(resource, ": the quota per slot is ", FormatSizeOrPercent(quota_per_slot),
                     " of the GPU's pool, and missiled reported no pool size for this GPU"));
  }
  return quota_per_slot.Resolve(pool_bytes);
}

std::vector<ClassResource> PluginConfig::Resources() const {
  std::vector<ClassResource> out;
  if (ls.slots_per_gpu > 0) out.push_back(ls);
  if (be.slots_per_gpu > 0) out.push_back(be);
  return out;
}

namespace {

absl::StatusOr<uint32_t> ParseCount(const std::string& flag, const std::string& text,
                                    uint32_t min, uint32_t max) {
  uint32_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < min || value > max) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": '", text, "' is not a whole number in ",
                                                   min, "..", max));
  }
  return value;
}

absl::StatusOr<SizeOrFraction> ParseQuota(const std::string& flag, const std::string& text) {
  absl::StatusOr<SizeOrFraction> quota = ParseSizeOrPercent(text);
  if (!quota.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", quota.status().message(), " (a size, or a percentage of the "
                     "GPU's pool such as 12%)"));
  }
  // The bound keeps quota x slots (at most 1000) far from overflowing 64 bits.
  if (!quota->is_fraction && (quota->bytes == 0 || quota->bytes > 16 * kTiB)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": '", text, "' is not in 1B..16TiB"));
  }
  return *quota;
}

// A container given every slot of a class on a GPU asks for at most the whole pool.
absl::Status CheckPercentages(const ClassResource& r, const char* slots_flag,
                              const char* quota_flag) {
  if (!r.quota_per_slot.is_fraction || r.slots_per_gpu == 0) return absl::OkStatus();
  double total = r.quota_per_slot.fraction * r.slots_per_gpu;
  if (total > 1.0 + 1e-9) {
    return absl::InvalidArgumentError(absl::StrCat(
        slots_flag, " ", r.slots_per_gpu, " x ", quota_flag, " ",
        FormatSizeOrPercent(r.quota_per_slot), " is ",
        absl::SixDigits(total * 100),
        "% of the GPU's pool: a container given every slot would be promised more than the pool"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ParsePath(const std::string& flag, const std::string& text) {
  if (text.empty() || text[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": '", text, "' is not an absolute path"));
  }
  return text;
}

using Setter = std::function<absl::Status(PluginConfig&, const std::string&, const std::string&)>;

// Stores a parsed value through `field` of the configuration.
template <typename T, typename Parse>
Setter Set(T PluginConfig::*field, Parse parse) {
  return [field, parse](PluginConfig& c, const std::string& flag, const std::string& text) {
    auto value = parse(flag, text);
    if (!value.ok()) return value.status();
    c.*field = static_cast<T>(*value);
    return absl::OkStatus();
  };
}

Setter SetPath(std::string PluginConfig::*field) { return Set(field, ParsePath); }

Setter SetSlots(ClassResource PluginConfig::*res) {
  return [res](PluginConfig& c, const std::string& flag, const std::string& text) {
    MISSILE_ASSIGN_OR_RETURN(uint32_t n, ParseCount(flag, text, 0, 1000));
    (c.*res).slots_per_gpu = n;
    return absl::OkStatus();
  };
}

Setter SetQuota(ClassResource PluginConfig::*res) {
  return [res](PluginConfig& c, const std::string& flag, const std::string& text) {
    MISSILE_ASSIGN_OR_RETURN(SizeOrFraction q, ParseQuota(flag, text));
    (c.*res).quota_per_slot = q;
    return absl::OkStatus();
  };
}

const std::map<std::string, Setter, std::less<>>& Setters() {
  static const auto* setters = new std::map<std::string, Setter, std::less<>>{
      {"--kubelet-dir", SetPath(&PluginConfig::kubelet_dir)},
      {"--kubelet-socket", SetPath(&PluginConfig::kubelet_socket)},
      {"--missiled-socket", SetPath(&PluginConfig::missiled_socket)},
      {"--ls-slots", SetSlots(&PluginConfig::ls)},
      {"--be-slots", SetSlots(&PluginConfig::be)},
      {"--ls-quota-per-slot", SetQuota(&PluginConfig::ls)},
      {"--be-quota-per-slot", SetQuota(&PluginConfig::be)},
      {"--shim-host-dir", SetPath(&PluginConfig::shim_host_dir)},
      {"--shim-container-dir", SetPath(&PluginConfig::shim_container_dir)},
      {"--socket-host-dir", SetPath(&PluginConfig::socket_host_dir)},
      {"--socket-container-dir", SetPath(&PluginConfig::socket_container_dir)},
      {"--device-root", SetPath(&PluginConfig::device_root)},
      {"--poll-ms",
       [](PluginConfig& c, const std::string& flag, const std::string& text) {
         MISSILE_ASSIGN_OR_RETURN(uint32_t ms, ParseCount(flag, text, 10, 60000));
         c.poll_interval = std::chrono::milliseconds(ms);
         return absl::OkStatus();
       }},
      {"--unhealthy-after",
       [](PluginConfig& c, const std::string& flag, const std::string& text) {
         MISSILE_ASSIGN_OR_RETURN(uint32_t n, ParseCount(flag, text, 1, 100));
         c.failures_before_unhealthy = n;
         return absl::OkStatus();
       }},
  };
  return *setters;
}

}  // namespace

absl::StatusOr<PluginArgs> ParsePluginArgs(const std::vector<std::string>& args) {
  PluginArgs out;
  CLI::App app;
  flags::Configure(app);
  app.add_flag("-h,--help", out.help);
  app.add_flag("--version", out.version);
  std::map<std::string, std::string, std::less<>> values;
  for (const auto& [name, setter] : Setters()) app.add_option(name, values[name]);
  MISSILE_RETURN_IF_ERROR(flags::Parse(app, args));
  for (const auto& [name, setter] : Setters()) {
    if (app.count(name) > 0) MISSILE_RETURN_IF_ERROR(setter(out.config, name, values[name]));
  }
  if (out.config.Resources().empty() && !out.help && !out.version) {
    return absl::InvalidArgumentError("--ls-slots and --be-slots are both 0: nothing to advertise");
  }
  if (absl::Status s = CheckPercentages(out.config.ls, "--ls-slots", "--ls-quota-per-slot");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckPercentages(out.config.be, "--be-slots", "--be-quota-per-slot");
      !s.ok()) {
    return s;
  }
  return out;
}

}  // namespace missile::deviceplugin

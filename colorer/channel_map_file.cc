#include "missile/colorer/channel_map_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "missile/common/status_macros.h"
#include "toml++/toml.h"

namespace missile::colorer {
namespace {

absl::Status KeyError(absl::string_view key, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("channel map key '", key, "': ", what));
}

constexpr const char* kKeys[] = {"format_version",
                                 "gpu_name",
                                 "uuid",
                                 "driver_version",
                                 "tool_version",
                                 "date",
                                 "granularity_bytes",
                                 "low_bit",
                                 "high_bit",
                                 "masks",
                                 "channel_groups",
                                 "source",
                                 "method",
                                 "confidence",
                                 "agreement",
                                 "observations",
                                 "verification_accuracy",
                                 "verification_observations",
                                 "pair_accuracy",
                                 "pair_observations",
                                 "seconds"};

// Typed access to the root table, naming the key in every error.
class Reader {
 public:
  explicit Reader(const toml::table& t) : t_(t) {}

  absl::Status OnlyKnownKeys() const {
    for (const auto& [key, node] : t_) {
      bool known = false;
      for (const char* k : kKeys) known = known || key.str() == k;
      if (!known)
        return KeyError(absl::string_view(key.str().data(), key.str().size()), "unknown key");
    }
    return absl::OkStatus();
  }
  absl::StatusOr<const toml::node*> Get(const char* key) const {
    const toml::node* n = t_.get(key);
    if (n == nullptr) return KeyError(key, "missing");
    return n;
  }
  absl::StatusOr<std::string> String(const char* key) const {
    auto n = Get(key);
    if (!n.ok()) return n.status();
    if (!(*n)->is_string()) return KeyError(key, "must be a string");
    return std::string((*n)->as_string()->get());
  }
  absl::StatusOr<int64_t> Int(const char* key, int64_t lo, int64_t hi) const {
    auto n = Get(key);
    if (!n.ok()) return n.status();
    if (!(*n)->is_integer()) return KeyError(key, "must be an integer");
    const int64_t v = (*n)->as_integer()->get();
    if (v < lo || v > hi) return KeyError(key, absl::StrCat("must be in [", lo, ", ", hi, "]"));
    return v;
  }
  absl::StatusOr<double> Number(const char* key) const {
    auto n = Get(key);
    if (!n.ok()) return n.status();
    if ((*n)->is_floating_point()) return (*n)->as_floating_point()->get();
    if ((*n)->is_integer()) return static_cast<double>((*n)->as_integer()->get());
    return KeyError(key, "must be a number");
  }

 private:
  const toml::table& t_;
};

// long: one read per key in file order; each is two lines of status plumbing.
absl::StatusOr<ChannelMapFile> Read(const toml::table& root) {
  Reader r(root);
  MISSILE_RETURN_IF_ERROR(r.OnlyKnownKeys());
  auto version = r.Int("format_version", kChannelMapFileVersion, kChannelMapFileVersion);
  if (!version.ok()) return version.status();
  ChannelMapFile f;
  std::pair<const char*, std::string*> strings[] = {{"gpu_name", &f.gpu_name},
                                                    {"uuid", &f.uuid},
                                                    {"driver_version", &f.driver_version},
                                                    {"tool_version", &f.tool_version},
                                                    {"date", &f.date},
                                                    {"source", &f.source},
                                                    {"method", &f.method}};
  for (auto& [key, out] : strings) {
    auto v = r.String(key);
    if (!v.ok()) return v.status();
    *out = *v;
  }
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  auto granularity = r.Int("granularity_bytes", 1, kMax);
  auto low = r.Int("low_bit", 0, 63);
  auto high = r.Int("high_bit", 1, 63);
  auto groups = r.Int("channel_groups", 1, kMax);
  auto observations = r.Int("observations", 0, std::numeric_limits<int>::max());
  auto verification_observations =
      r.Int("verification_observations", 0, std::numeric_limits<int>::max());
  auto pair_observations = r.Int("pair_observations", 0, std::numeric_limits<int>::max());
  for (const absl::Status& s :
       {granularity.status(), low.status(), high.status(), groups.status(), observations.status(),
        verification_observations.status(), pair_observations.status()}) {
    if (!s.ok()) return s;
  }
  f.granularity_bytes = static_cast<uint64_t>(*granularity);
  f.fit.low_bit = static_cast<int>(*low);
  f.fit.high_bit = static_cast<int>(*high);
  f.fit.observations = static_cast<int>(*observations);
  f.verification_observations = static_cast<int>(*verification_observations);
  f.pair_observations = static_cast<int>(*pair_observations);
  auto masks = r.Get("masks");
  if (!masks.ok()) return masks.status();
  if (!(*masks)->is_array()) return KeyError("masks", "must be an array");
  for (const toml::node& m : *(*masks)->as_array()) {
    if (!m.is_integer() || m.as_integer()->get() <= 0) {
      return KeyError("masks", "every entry must be a positive integer");
    }
    f.fit.masks.push_back(static_cast<uint64_t>(m.as_integer()->get()));
  }
  std::pair<const char*, double*> numbers[] = {{"confidence", &f.fit.confidence},
                                               {"agreement", &f.fit.agreement},
                                               {"verification_accuracy", &f.verification_accuracy},
                                               {"pair_accuracy", &f.pair_accuracy},
                                               {"seconds", &f.seconds}};
  for (auto& [key, out] : numbers) {
    auto v = r.Number(key);
    if (!v.ok()) return v.status();
    *out = *v;
  }
  if (static_cast<uint64_t>(*groups) != f.fit.groups()) {
    return KeyError("channel_groups", absl::StrCat(*groups, " but masks give 2^", f.fit.rank(),
                                                   " = ", f.fit.groups()));
  }
  MISSILE_RETURN_IF_ERROR(ValidateChannelMapFile(f));
  return f;
}

}  // namespace

bool operator==(const ChannelMapFile& a, const ChannelMapFile& b) {
  return a.gpu_name == b.gpu_name && a.uuid == b.uuid && a.driver_version == b.driver_version &&
         a.tool_version == b.tool_version && a.date == b.date &&
         a.granularity_bytes == b.granularity_bytes && a.source == b.source &&
         a.method == b.method && a.fit.low_bit == b.fit.low_bit &&
         a.fit.high_bit == b.fit.high_bit && a.fit.masks == b.fit.masks &&
         a.fit.observations == b.fit.observations && a.fit.agreement == b.fit.agreement &&
         a.fit.confidence == b.fit.confidence &&
         a.verification_accuracy == b.verification_accuracy &&
         a.verification_observations == b.verification_observations &&
         a.pair_accuracy == b.pair_accuracy && a.pair_observations == b.pair_observations &&
         a.seconds == b.seconds;
}

std::string ChannelMapPath(std::string_view dir, std::string_view uuid) {
  return absl::StrCat(absl::string_view(dir.data(), dir.size()), "/",
                      absl::string_view(uuid.data(), uuid.size()), ".channels.toml");
}

absl::Status ValidateChannelMapFile(const ChannelMapFile& f) {
  if (!std::has_single_bit(f.granularity_bytes) || f.granularity_bytes >> 62 != 0) {
    return KeyError("granularity_bytes", "must be a power of two below 2^62");
  }
  if (f.fit.low_bit < 0 || f.fit.high_bit <= f.fit.low_bit || f.fit.high_bit > 63) {
    return KeyError("high_bit", "the bit range [low_bit, high_bit) must be non-empty below 63");
  }
  const uint64_t range =
      ((uint64_t{1} << f.fit.high_bit) - 1) & ~((uint64_t{1} << f.fit.low_bit) - 1);
  if (f.fit.masks.size() > 16) return KeyError("masks", "more than 16 masks");
  for (uint64_t m : f.fit.masks) {
    if (m == 0 || (m & ~range) != 0) {
      return KeyError("masks", absl::StrCat("0x", absl::Hex(m), " is outside bits [", f.fit.low_bit,
                                            ", ", f.fit.high_bit, ")"));
    }
  }
  if (Gf2Basis(f.fit.masks).rows() != f.fit.masks) {
    return KeyError("masks", "must be a reduced basis (independent, pivots cleared, sorted)");
  }
  std::pair<const char*, double> fractions[] = {{"confidence", f.fit.confidence},
                                                {"agreement", f.fit.agreement},
                                                {"verification_accuracy", f.verification_accuracy}};
  for (const auto& [key, v] : fractions) {
    if (!(v >= 0 && v <= 1)) return KeyError(key, "must be in [0, 1]");
  }
  if (!(f.pair_accuracy == -1 || (f.pair_accuracy >= 0 && f.pair_accuracy <= 1))) {
    return KeyError("pair_accuracy", "must be in [0, 1], or -1 for not measured");
  }
  if (!(f.seconds >= 0) || !std::isfinite(f.seconds)) return KeyError("seconds", "must be >= 0");
  if (f.uuid.empty()) return KeyError("uuid", "must not be empty");
  return absl::OkStatus();
}

absl::StatusOr<ChannelMapFile> ParseChannelMapFile(std::string_view toml_text) {
  // toml++ throws on syntax errors: caught here, at this module's edge.
  try {
    toml::table root = toml::parse(toml_text, std::string_view("channel map"));
    return Read(root);
  } catch (const toml::parse_error& e) {
    return absl::InvalidArgumentError(
        absl::StrFormat("channel map: TOML syntax error at line %d, column %d: %s",
                        e.source().begin.line, e.source().begin.column, e.description()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("channel map: ", e.what()));
  }
}

absl::StatusOr<ChannelMapFile> LoadChannelMapFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat("no channel map ", path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::FailedPreconditionError(absl::StrCat("cannot open channel map ", path));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("reading channel map ", path));
  absl::StatusOr<ChannelMapFile> f = ParseChannelMapFile(text.str());
  if (!f.ok())
    return absl::Status(f.status().code(), absl::StrCat(path, ": ", f.status().message()));
  return f;
}

absl::StatusOr<std::string> FormatChannelMapFile(const ChannelMapFile& f) {
  MISSILE_RETURN_IF_ERROR(ValidateChannelMapFile(f));
  try {
    toml::table root;
    root.insert("format_version", kChannelMapFileVersion);
    root.insert("gpu_name", f.gpu_name);
    root.insert("uuid", f.uuid);
    root.insert("driver_version", f.driver_version);
    root.insert("tool_version", f.tool_version);
    root.insert("date", f.date);
    root.insert("granularity_bytes", static_cast<int64_t>(f.granularity_bytes));
    root.insert("low_bit", f.fit.low_bit);
    root.insert("high_bit", f.fit.high_bit);
    toml::array masks;
    for (uint64_t m : f.fit.masks) {
      toml::value<int64_t> v(static_cast<int64_t>(m));
      v.flags(toml::value_flags::format_as_hexadecimal);
      masks.push_back(std::move(v));
    }
    root.insert("masks", std::move(masks));
    root.insert("channel_groups", static_cast<int64_t>(f.fit.groups()));
    root.insert("source", f.source);
    root.insert("method", f.method);
    root.insert("confidence", f.fit.confidence);
    root.insert("agreement", f.fit.agreement);
    root.insert("observations", f.fit.observations);
    root.insert("verification_accuracy", f.verification_accuracy);
    root.insert("verification_observations", f.verification_observations);
    root.insert("pair_accuracy", f.pair_accuracy);
    root.insert("pair_observations", f.pair_observations);
    root.insert("seconds", f.seconds);
    std::ostringstream out;
    out << "# Missile VRAM channel map (see colorer/include/missile/colorer/channel_map_file.h).\n"
        << root << "\n";
    return out.str();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("channel map: formatting failed: ", e.what()));
  }
}

absl::Status SaveChannelMapFile(const ChannelMapFile& file, const std::string& path) {
  MISSILE_ASSIGN_OR_RETURN(std::string text, FormatChannelMapFile(file));
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("creating ", tmp));
  absl::Status s;
  std::string_view rest = text;
  while (s.ok() && !rest.empty()) {
    const ssize_t n = ::write(fd, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      s = absl::ErrnoToStatus(errno, absl::StrCat("writing ", tmp));
      break;
    }
    rest.remove_prefix(static_cast<size_t>(n));
  }
  if (s.ok() && ::fsync(fd) != 0) s = absl::ErrnoToStatus(errno, absl::StrCat("syncing ", tmp));
  if (::close(fd) != 0 && s.ok()) s = absl::ErrnoToStatus(errno, absl::StrCat("closing ", tmp));
  if (s.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    s = absl::ErrnoToStatus(errno, absl::StrCat("renaming ", tmp, " to ", path));
  }
  if (!s.ok()) std::remove(tmp.c_str());
  return s;
}

absl::StatusOr<std::string> ExplainColours(const ChannelMapFile& file, uint64_t granularity_bytes) {
  MISSILE_ASSIGN_OR_RETURN(GranularityColours colours,
                           ColoursAtGranularity(file.fit, granularity_bytes));
  return absl::StrFormat(
      "channel map (%s, %d groups over bits %d-%d, confidence %.2f, held-back accuracy %.2f): %s",
      file.source, file.fit.groups(), file.fit.low_bit, file.fit.high_bit - 1, file.fit.confidence,
      file.verification_accuracy, colours.reason);
}

}  // namespace missile::colorer

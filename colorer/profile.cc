#include "missile/colorer/profile.h"

#include <fcntl.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <exception>
#include <initializer_list>
#include <limits>
#include <memory>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "missile/common/status_macros.h"
#include "toml++/toml.h"

namespace missile::colorer {
namespace {

constexpr uint64_t kMaxTomlInt = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

absl::Status KeyError(absl::string_view key, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("profile key '", key, "': ", what));
}

absl::string_view TypeName(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table:
      return "table";
    case toml::node_type::array:
      return "array";
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer";
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    case toml::node_type::date:
      return "date";
    case toml::node_type::time:
      return "time";
    case toml::node_type::date_time:
      return "date-time";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

// Typed, key-naming access to one TOML table. `prefix` names the table in messages
// ("", "channel_map.", "evidence[2].").
class TableReader {
 public:
  TableReader(const toml::table& table, std::string prefix)
      : table_(table), prefix_(std::move(prefix)) {}

  std::string Name(absl::string_view key) const { return absl::StrCat(prefix_, key); }

  absl::Status OnlyKeys(std::initializer_list<absl::string_view> allowed) const {
    for (const auto& [key, node] : table_) {
      const absl::string_view name(key.str().data(), key.str().size());
      bool known = false;
      for (absl::string_view a : allowed) known = known || name == a;
      if (!known) return KeyError(Name(name), "unknown key");
    }
    return absl::OkStatus();
  }

  absl::StatusOr<const toml::node*> Required(absl::string_view key) const {
    const toml::node* node = table_.get(std::string_view(key.data(), key.size()));
    if (node == nullptr) return KeyError(Name(key), "missing");
    return node;
  }

  absl::StatusOr<std::string> String(absl::string_view key) const {
    absl::StatusOr<const toml::node*> node = Required(key);
    if (!node.ok()) return node.status();
    if (!(*node)->is_string()) return WrongType(key, **node, "a string");
    return std::string((*node)->as_string()->get());
  }

  // An integer in [lo, hi].
  absl::StatusOr<int64_t> Int(absl::string_view key, int64_t lo, int64_t hi) const {
    absl::StatusOr<const toml::node*> node = Required(key);
    if (!node.ok()) return node.status();
    return IntValue(**node, Name(key), lo, hi);
  }

  // A float, or an integer taken as one.
  absl::StatusOr<double> Number(absl::string_view key) const {
    absl::StatusOr<const toml::node*> node = Required(key);
    if (!node.ok()) return node.status();
    if ((*node)->is_floating_point()) return (*node)->as_floating_point()->get();
    if ((*node)->is_integer()) return static_cast<double>((*node)->as_integer()->get());
    return WrongType(key, **node, "a number");
  }

  absl::StatusOr<const toml::array*> Array(absl::string_view key) const {
    absl::StatusOr<const toml::node*> node = Required(key);
    if (!node.ok()) return node.status();
    if (!(*node)->is_array()) return WrongType(key, **node, "an array");
    return (*node)->as_array();
  }

  absl::StatusOr<const toml::table*> Table(absl::string_view key) const {
    absl::StatusOr<const toml::node*> node = Required(key);
    if (!node.ok()) return node.status();
    if (!(*node)->is_table()) return WrongType(key, **node, "a table");
    return (*node)->as_table();
  }

  static absl::StatusOr<int64_t> IntValue(const toml::node& node, absl::string_view name,
                                          int64_t lo, int64_t hi) {
    if (!node.is_integer()) {
      return KeyError(name, absl::StrCat("must be an integer, got ", TypeName(node)));
    }
    const int64_t v = node.as_integer()->get();
    if (v < lo || v > hi) {
      return KeyError(name, absl::StrCat("must be in [", lo, ", ", hi, "], got ", v));
    }
    return v;
  }

 private:
  absl::Status WrongType(absl::string_view key, const toml::node& node,
                         absl::string_view expected) const {
    return KeyError(Name(key), absl::StrCat("must be ", expected, ", got ", TypeName(node)));
  }

  const toml::table& table_;
  std::string prefix_;
};

absl::StatusOr<ChannelMapSpec> ReadChannelMap(const toml::table& table) {
  TableReader r(table, "channel_map.");
  ChannelMapSpec spec;
  MISSILE_ASSIGN_OR_RETURN(std::string kind_name, r.String("kind"));
  absl::StatusOr<ChannelMapSpec::Kind> kind = ParseKind(kind_name);
  if (!kind.ok()) return KeyError(r.Name("kind"), kind.status().message());
  spec.kind = *kind;
  switch (spec.kind) {
    case ChannelMapSpec::Kind::kUniform: {
      MISSILE_RETURN_IF_ERROR(r.OnlyKeys({"kind", "channels"}));
      MISSILE_ASSIGN_OR_RETURN(int64_t channels, r.Int("channels", 1, kMaxChannels));
      spec.channels = static_cast<int>(channels);
      break;
    }
    case ChannelMapSpec::Kind::kXor: {
      MISSILE_RETURN_IF_ERROR(r.OnlyKeys({"kind", "masks"}));
      MISSILE_ASSIGN_OR_RETURN(const toml::array* masks, r.Array("masks"));
      for (size_t i = 0; i < (masks)->size(); ++i) {
        MISSILE_ASSIGN_OR_RETURN(
            int64_t mask,
            TableReader::IntValue(*(masks)->get(i), absl::StrCat(r.Name("masks"), "[", i, "]"), 1,
                                  std::numeric_limits<int64_t>::max()));
        spec.masks.push_back(static_cast<uint64_t>(mask));
      }
      break;
    }
    case ChannelMapSpec::Kind::kLookupTable: {
      MISSILE_RETURN_IF_ERROR(r.OnlyKeys({"kind", "granule_shift", "table"}));
      MISSILE_ASSIGN_OR_RETURN(int64_t shift, r.Int("granule_shift", 0, 63));
      spec.granule_shift = static_cast<int>(shift);
      MISSILE_ASSIGN_OR_RETURN(const toml::array* values, r.Array("table"));
      for (size_t i = 0; i < (values)->size(); ++i) {
        MISSILE_ASSIGN_OR_RETURN(
            int64_t v,
            TableReader::IntValue(*(values)->get(i), absl::StrCat(r.Name("table"), "[", i, "]"), 0,
                                  kMaxChannels - 1));
        spec.table.push_back(static_cast<int>(v));
      }
      break;
    }
  }
  return spec;
}

absl::StatusOr<GpuColourProfile> ReadProfile(const toml::table& root) {
  TableReader r(root, "");
  MISSILE_RETURN_IF_ERROR(
      r.OnlyKeys({"format_version", "gpu_name", "uuid", "driver_version", "tool_version", "date",
                  "granularity_bytes", "colours", "channel_map", "evidence"}));
  // Only the one supported version passes.
  MISSILE_RETURN_IF_ERROR(
      r.Int("format_version", kProfileFormatVersion, kProfileFormatVersion).status());

  GpuColourProfile p;
  std::pair<absl::string_view, std::string*> strings[] = {{"gpu_name", &p.gpu_name},
                                                          {"uuid", &p.uuid},
                                                          {"driver_version", &p.driver_version},
                                                          {"tool_version", &p.tool_version},
                                                          {"date", &p.date}};
  for (auto& [key, out] : strings) {
    absl::StatusOr<std::string> v = r.String(key);
    if (!v.ok()) return v.status();
    *out = *std::move(v);
  }
  MISSILE_ASSIGN_OR_RETURN(int64_t granularity,
                           r.Int("granularity_bytes", 1, std::numeric_limits<int64_t>::max()));
  p.granularity_bytes = static_cast<uint64_t>(granularity);
  MISSILE_ASSIGN_OR_RETURN(int64_t colours, r.Int("colours", 1, kMaxChannels));
  p.colours = static_cast<int>(colours);

  absl::StatusOr<const toml::table*> map_table = r.Table("channel_map");
  if (!map_table.ok()) return map_table.status();
  absl::StatusOr<ChannelMapSpec> map = ReadChannelMap(**map_table);
  if (!map.ok()) return map.status();
  p.channel_map = *std::move(map);

  if (root.contains("evidence")) {  // optional: zero entries may be left out
    MISSILE_ASSIGN_OR_RETURN(const toml::array* entries, r.Array("evidence"));
    for (size_t i = 0; i < (entries)->size(); ++i) {
      const toml::node& node = *(entries)->get(i);
      const std::string name = absl::StrCat("evidence[", i, "]");
      if (!node.is_table()) {
        return KeyError(name, absl::StrCat("must be a table, got ", TypeName(node)));
      }
      TableReader e(*node.as_table(), name + ".");
      MISSILE_RETURN_IF_ERROR(e.OnlyKeys({"name", "value", "unit"}));
      EvidenceEntry entry;
      absl::StatusOr<std::string> entry_name = e.String("name");
      if (!entry_name.ok()) return entry_name.status();
      entry.name = *std::move(entry_name);
      MISSILE_ASSIGN_OR_RETURN(double value, e.Number("value"));
      entry.value = value;
      absl::StatusOr<std::string> unit = e.String("unit");
      if (!unit.ok()) return unit.status();
      entry.unit = *std::move(unit);
      p.evidence.push_back(std::move(entry));
    }
  }
  MISSILE_RETURN_IF_ERROR(ValidateProfile(p));
  return p;
}

toml::table ToToml(const GpuColourProfile& p) {
  toml::table root;
  root.insert("format_version", kProfileFormatVersion);
  root.insert("gpu_name", p.gpu_name);
  root.insert("uuid", p.uuid);
  root.insert("driver_version", p.driver_version);
  root.insert("tool_version", p.tool_version);
  root.insert("date", p.date);
  root.insert("granularity_bytes", static_cast<int64_t>(p.granularity_bytes));
  root.insert("colours", p.colours);

  const ChannelMapSpec& spec = p.channel_map;
  toml::table map;
  map.insert("kind", std::string(KindName(spec.kind)));
  switch (spec.kind) {
    case ChannelMapSpec::Kind::kUniform:
      map.insert("channels", spec.channels);
      break;
    case ChannelMapSpec::Kind::kXor: {
      toml::array masks;
      for (uint64_t m : spec.masks) {
        toml::value<int64_t> v(static_cast<int64_t>(m));
        v.flags(toml::value_flags::format_as_hexadecimal);
        masks.push_back(std::move(v));
      }
      map.insert("masks", std::move(masks));
      break;
    }
    case ChannelMapSpec::Kind::kLookupTable: {
      map.insert("granule_shift", spec.granule_shift);
      toml::array table;
      for (int c : spec.table) table.push_back(c);
      map.insert("table", std::move(table));
      break;
    }
  }
  root.insert("channel_map", std::move(map));

  if (!p.evidence.empty()) {
    toml::array entries;
    for (const EvidenceEntry& e : p.evidence) {
      entries.push_back(toml::table{{"name", e.name}, {"value", e.value}, {"unit", e.unit}});
    }
    root.insert("evidence", std::move(entries));
  }
  return root;
}

absl::Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      return absl::ErrnoToStatus(err, absl::StrCat("writing ", path));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

}  // namespace

GpuColourProfile DefaultProfile() {
  GpuColourProfile p;
  p.tool_version = "built-in default";
  p.is_default = true;
  return p;
}

absl::Status ValidateProfile(const GpuColourProfile& p) {
  if (!std::has_single_bit(p.granularity_bytes) || p.granularity_bytes > kMaxTomlInt) {
    return KeyError("granularity_bytes",
                    absl::StrCat("must be a power of two below 2^63, got ", p.granularity_bytes));
  }
  if (p.colours < 1 || p.colours > kMaxChannels) {
    return KeyError("colours", absl::StrCat("must be in [1, 64], got ", p.colours));
  }
  for (size_t i = 0; i < p.channel_map.masks.size(); ++i) {
    if (p.channel_map.masks[i] > kMaxTomlInt) {
      return KeyError(absl::StrCat("channel_map.masks[", i, "]"),
                      "has bit 63 set, which a TOML integer cannot hold");
    }
  }
  absl::StatusOr<std::unique_ptr<ChannelMap>> map = MakeChannelMap(p.channel_map);
  if (!map.ok()) return KeyError("channel_map", map.status().message());
  absl::StatusOr<int> distinguishable = DistinguishableColours(**map, p.granularity_bytes);
  if (!distinguishable.ok()) return KeyError("channel_map", distinguishable.status().message());
  if (*distinguishable != p.colours) {
    return KeyError(
        "colours",
        absl::StrCat(p.colours, " colours, but channel_map gives ", *distinguishable,
                     " distinguishable colour(s) at granularity_bytes = ", p.granularity_bytes));
  }
  for (size_t i = 0; i < p.evidence.size(); ++i) {
    if (p.evidence[i].name.empty()) {
      return KeyError(absl::StrCat("evidence[", i, "].name"), "must not be empty");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<GpuColourProfile> ParseProfile(std::string_view toml_text) {
  // toml++ is built with exceptions here (Debian's shared library): catch them all at this edge.
  try {
    toml::table root = toml::parse(toml_text, std::string_view("profile"));
    return ReadProfile(root);
  } catch (const toml::parse_error& e) {
    return absl::InvalidArgumentError(
        absl::StrFormat("profile: TOML syntax error at line %d, column %d: %s",
                        e.source().begin.line, e.source().begin.column, e.description()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("profile: ", e.what()));
  }
}

absl::StatusOr<GpuColourProfile> LoadProfile(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  if (file == nullptr) {
    const int err = errno;
    return absl::ErrnoToStatus(err, absl::StrCat("opening profile ", path));
  }
  std::string text;
  char buffer[8192];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file.get())) > 0) text.append(buffer, n);
  if (std::ferror(file.get())) {
    return absl::DataLossError(absl::StrCat("reading profile ", path));
  }
  absl::StatusOr<GpuColourProfile> profile = ParseProfile(text);
  if (!profile.ok()) {
    return absl::Status(profile.status().code(),
                        absl::StrCat(path, ": ", profile.status().message()));
  }
  return profile;
}

absl::StatusOr<std::string> FormatProfile(const GpuColourProfile& profile) {
  MISSILE_RETURN_IF_ERROR(ValidateProfile(profile));
  try {
    std::ostringstream out;
    out << "# Missile GPU colour profile (see colorer/include/missile/colorer/profile.h).\n"
        << ToToml(profile) << "\n";
    return out.str();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("profile: formatting failed: ", e.what()));
  }
}

absl::Status SaveProfile(const GpuColourProfile& profile, const std::string& path) {
  MISSILE_ASSIGN_OR_RETURN(std::string text, FormatProfile(profile));
  const std::string tmp = path + ".tmp";
  // Each failing call's errno is read before anything else can overwrite it.
  auto failed = [](int err, absl::string_view what, const std::string& file) {
    return absl::ErrnoToStatus(err, absl::StrCat(what, " ", file));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return failed(errno, "creating", tmp);
  absl::Status s = WriteAll(fd, text, tmp);
  if (s.ok() && ::fsync(fd) != 0) s = failed(errno, "syncing", tmp);
  if (::close(fd) != 0 && s.ok()) s = failed(errno, "closing", tmp);
  if (s.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    s = failed(errno, "renaming to " + path, tmp);
  }
  if (!s.ok()) std::remove(tmp.c_str());
  return s;
}

absl::StatusOr<ColourScheme> SchemeFromProfile(const GpuColourProfile& profile) {
  MISSILE_RETURN_IF_ERROR(ValidateProfile(profile));
  absl::StatusOr<std::unique_ptr<ChannelMap>> map = MakeChannelMap(profile.channel_map);
  if (!map.ok()) return map.status();
  return ColourScheme::ForGranularity(std::shared_ptr<const ChannelMap>(*std::move(map)),
                                      profile.granularity_bytes);
}

}  // namespace missile::colorer

#include "daemon/config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <exception>
#include <functional>
#include <initializer_list>
#include <map>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "missile/common/quote.h"

namespace missile::daemon {
namespace {

// A config file is a few kilobytes; anything near this is a mistake (the wrong file).
constexpr size_t kMaxConfigBytes = size_t{1} << 20;

constexpr int kMinPriority = -20;  // Like nice(1), and pcie::kMinPriority.
constexpr int kMaxPriority = 19;
constexpr int kMaxDeviceOrdinal = 1023;
constexpr int kMaxColourIndex = 63;  // colorer::ColourSet holds colours 0..63.
constexpr int kMaxInflight = 64;
constexpr uint64_t kChunkAlign = 4 * kKiB;
constexpr uint64_t kMinChunk = 64 * kKiB;
constexpr uint64_t kMaxChunk = 64 * kMiB;

constexpr const char* kLogLevels[] = {"trace", "debug", "info", "warn", "error", "off"};
constexpr size_t kMaxPathBytes = 4095;  // PATH_MAX less the NUL

// Debian's Abseil has its own string_view: StrCat takes std::string_view only through this.
absl::string_view AsAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// What a value is, for "got ..." in messages: `integer 25`, `string "x"`, `a table`.
std::string Got(const toml::node& node) {
  std::ostringstream out;
  switch (node.type()) {
    case toml::node_type::integer:
      out << "integer " << *node.as_integer();
      break;
    case toml::node_type::floating_point:
      out << "float " << absl::StrCat(node.as_floating_point()->get());
      break;
    case toml::node_type::string:
      out << "string " << QuoteString(node.as_string()->get());
      break;
    case toml::node_type::boolean:
      out << "boolean " << *node.as_boolean();
      break;
    case toml::node_type::date:
      out << "date " << *node.as_date();
      break;
    case toml::node_type::time:
      out << "time " << *node.as_time();
      break;
    case toml::node_type::date_time:
      out << "date-time " << *node.as_date_time();
      break;
    case toml::node_type::array:
      out << "an array";
      break;
    case toml::node_type::table:
      out << "a table";
      break;
    case toml::node_type::none:
      out << "nothing";
      break;
  }
  return out.str();
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string OctalMode(uint32_t mode) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "%04o", mode);
  return buffer;
}

// Walks the parsed TOML into a DaemonConfig, collecting every problem.
class Parser {
 public:
  explicit Parser(DaemonConfig* config) : c_(config) {}

  void ParseRoot(const toml::table& root);
  // The cross-field rules; meaningful only once every field parsed cleanly.
  void CheckRules();

  struct Problem {
    uint32_t line = 0;  // 0: unknown
    std::string text;   // "key: what"
  };
  std::vector<Problem>& problems() { return problems_; }

 private:
  using Node = const toml::node&;
  using Key = const std::string&;  // The full key, "classes.ls.priority".
  using Reader = std::function<void(Node, Key)>;
  struct Field {
    std::string_view name;
    Reader read;
  };

  // Calls each field's reader for the keys present in the table `node` (named `path`); any other
  // key is a problem.
  void Table(const toml::node& node, const std::string& path, std::initializer_list<Field> fields);
  void ParseDaemon(const toml::node& node, const std::string& path);
  void ParseGpu(const toml::node& node, const std::string& path);
  void ParseClasses(const toml::node& node, const std::string& path);
  void ParseClass(const toml::node& node, const std::string& path, ClassSection* cls);
  void ParsePcie(const toml::node& node, const std::string& path);
  void ParseCompute(const toml::node& node, const std::string& path);
  // A PCIe chunk size: a multiple of 4 KiB in [64 KiB, 64 MiB] (or 0 when zero_ok).
  void GetChunk(const toml::node& node, const std::string& key, bool zero_ok, uint64_t* out);
  void ParseSocketMode(const toml::node& node, const std::string& key);
  void ParseLogLevel(const toml::node& node, const std::string& key);
  void ParseDevices(const toml::node& node, const std::string& key);

  // Typed reads: true and *out set, or false and a problem recorded.
  bool GetString(const toml::node& node, const std::string& key, std::string* out);
  bool GetBool(const toml::node& node, const std::string& key, bool* out);
  bool GetInt(const toml::node& node, const std::string& key, int min, int max, int* out);
  bool GetSize(const toml::node& node, const std::string& key, uint64_t* out);
  bool GetSizeOrPercent(const toml::node& node, const std::string& key, SizeOrFraction* out);

  // Field-specific checks on a value already read.
  bool CheckAbsolutePath(const toml::node& node, const std::string& key, const std::string& path,
                         bool allow_empty, size_t max_bytes);
  bool CheckGroup(const toml::node& node, const std::string& key, const std::string& group);

  void Fail(const toml::node& node, const std::string& key, std::string_view what) {
    problems_.push_back({node.source().begin.line, absl::StrCat(key, ": ", AsAbsl(what))});
  }
  // A rule between `key` and `other`: reported at `key`'s line, or `other`'s if only it was set.
  void FailRule(const std::string& key, const std::string& other, std::string_view what) {
    uint32_t line = 0;
    if (auto it = lines_.find(key); it != lines_.end()) {
      line = it->second;
    } else if (auto other_it = lines_.find(other); other_it != lines_.end()) {
      line = other_it->second;
    }
    problems_.push_back({line, absl::StrCat(key, ": ", AsAbsl(what))});
  }

  DaemonConfig* c_;
  std::vector<Problem> problems_;
  std::map<std::string, uint32_t> lines_;  // key -> line, for every key present
};

void Parser::Table(const toml::node& node, const std::string& path,
                   std::initializer_list<Field> fields) {
  const toml::table* table = node.as_table();
  if (table == nullptr) {
    Fail(node, path, absl::StrCat("must be a table, got ", Got(node)));
    return;
  }
  for (auto&& [name, value] : *table) {
    const std::string key =
        path.empty() ? std::string(name.str()) : absl::StrCat(path, ".", AsAbsl(name.str()));
    lines_[key] = value.source().begin.line;
    const Field* field = nullptr;
    for (const Field& f : fields) {
      if (f.name == name.str()) field = &f;
    }
    if (field != nullptr) {
      field->read(value, key);
      continue;
    }
    std::string message =
        absl::StrCat("unknown ", value.is_table() ? "table" : "key", " '", key, "'");
    for (const Field& f : fields) {
      if (EditDistance(name.str(), f.name) <= 2) {
        absl::StrAppend(&message, " (did you mean '", path.empty() ? "" : path + ".",
                        AsAbsl(f.name), "'?)");
        break;
      }
    }
    problems_.push_back({value.source().begin.line, std::move(message)});
  }
}

void Parser::ParseRoot(const toml::table& root) {
  Table(root, "",
        {{"daemon", [this](Node n, Key k) { ParseDaemon(n, k); }},
         {"gpu", [this](Node n, Key k) { ParseGpu(n, k); }},
         {"classes", [this](Node n, Key k) { ParseClasses(n, k); }},
         {"pcie", [this](Node n, Key k) { ParsePcie(n, k); }},
         {"compute", [this](Node n, Key k) { ParseCompute(n, k); }}});
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
         {"log_level", [&](Node n, Key k) { ParseLogLevel(n, k); }}});
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

void Parser::GetChunk(const toml::node& node, const std::string& key, bool zero_ok,
                      uint64_t* out) {
  uint64_t v = 0;
  if (!GetSize(node, key, &v)) return;
  if (zero_ok && v == 0) {
    *out = 0;
    return;
  }
  if (v % kChunkAlign != 0 || v < kMinChunk || v > kMaxChunk) {
    return Fail(node, key,
                absl::StrCat("must be a multiple of 4KiB in [64KiB, 64MiB]", zero_ok ? " or 0" : "",
                             ", got ", FormatSizeExact(v)));
  }
  *out = v;
}

void Parser::ParsePcie(const toml::node& node, const std::string& path) {
  PcieSection& p = c_->pcie;
  Table(node, path,
        {{"chunk", [&](Node n, Key k) { GetChunk(n, k, /*zero_ok=*/false, &p.chunk); }},
         {"be_chunk", [&](Node n, Key k) { GetChunk(n, k, /*zero_ok=*/true, &p.be_chunk); }},
         {"max_inflight_chunks",
          [&](Node n, Key k) { GetInt(n, k, 1, kMaxInflight, &p.max_inflight_chunks); }},
         {"max_inflight_per_tenant",
          [&](Node n, Key k) { GetInt(n, k, 1, kMaxInflight, &p.max_inflight_per_tenant); }},
         {"bypass_below", [&](Node n, Key k) { GetSize(n, k, &p.bypass_below); }},
         {"ls_first", [&](Node n, Key k) { GetBool(n, k, &p.ls_first); }},
         {"spin_us", [&](Node n, Key k) { GetInt(n, k, 0, 100000, &p.spin_us); }},
         {"ls_spin_us", [&](Node n, Key k) { GetInt(n, k, 0, 1000000, &p.ls_spin_us); }},
         {"ls_quiet_ms", [&](Node n, Key k) { GetInt(n, k, 0, 600000, &p.ls_quiet_ms); }}});
}

// The ranges are also those of ApplyPacingChange (daemon/pacing_domain.cc: missilectl set).
void Parser::ParseCompute(const toml::node& node, const std::string& path) {
  ComputeSection& c = c_->compute;
  Table(node, path,
        {{"pacing", [&](Node n, Key k) { GetBool(n, k, &c.pacing); }},
         {"window_items", [&](Node n, Key k) { GetInt(n, k, 1, 1024, &c.window_items); }},
         {"window_us", [&](Node n, Key k) { GetInt(n, k, 0, 1000000, &c.window_us); }},
         {"ls_idle_us", [&](Node n, Key k) { GetInt(n, k, 0, 1000000, &c.ls_idle_us); }},
         {"ls_stale_ms", [&](Node n, Key k) { GetInt(n, k, 1, 600000, &c.ls_stale_ms); }},
         {"max_hold_ms", [&](Node n, Key k) { GetInt(n, k, 0, 600000, &c.max_hold_ms); }},
         {"unknown_us", [&](Node n, Key k) { GetInt(n, k, 0, 1000000, &c.unknown_us); }},
         {"share_slack_us",
          [&](Node n, Key k) { GetInt(n, k, 0, 1000000, &c.share_slack_us); }},
         {"refill_us", [&](Node n, Key k) { GetInt(n, k, 0, 1000000, &c.refill_us); }},
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

bool Parser::GetString(const toml::node& node, const std::string& key, std::string* out) {
  const toml::value<std::string>* value = node.as_string();
  if (value == nullptr) {
    Fail(node, key, absl::StrCat("must be a string, got ", Got(node)));
    return false;
  }
  *out = value->get();
  return true;
}

bool Parser::GetBool(const toml::node& node, const std::string& key, bool* out) {
  const toml::value<bool>* value = node.as_boolean();
  if (value == nullptr) {
    Fail(node, key, absl::StrCat("must be true or false, got ", Got(node)));
    return false;
  }
  *out = value->get();
  return true;
}

bool Parser::GetInt(const toml::node& node, const std::string& key, int min, int max, int* out) {
  const toml::value<int64_t>* value = node.as_integer();
  if (value == nullptr || value->get() < min || value->get() > max) {
    Fail(node, key,
         absl::StrCat("must be an integer in [", min, ", ", max, "], got ",
                      value != nullptr ? absl::StrCat(value->get()) : Got(node)));
    return false;
  }
  *out = static_cast<int>(value->get());
  return true;
}

bool Parser::GetSize(const toml::node& node, const std::string& key, uint64_t* out) {
  if (const toml::value<int64_t>* value = node.as_integer();
      value != nullptr && value->get() >= 0) {
    *out = static_cast<uint64_t>(value->get());
    return true;
  }
  const toml::value<std::string>* text = node.as_string();
  if (text == nullptr) {
    Fail(node, key,
         absl::StrCat("must be a size such as \"2MiB\" or a number of bytes, got ", Got(node)));
    return false;
  }
  absl::StatusOr<uint64_t> bytes = ParseSize(text->get());
  if (!bytes.ok()) {
    Fail(node, key, std::string(bytes.status().message()));
    return false;
  }
  *out = *bytes;
  return true;
}

bool Parser::GetSizeOrPercent(const toml::node& node, const std::string& key, SizeOrFraction* out) {
  if (const toml::value<int64_t>* value = node.as_integer();
      value != nullptr && value->get() >= 0) {
    *out = SizeOrFraction::Bytes(static_cast<uint64_t>(value->get()));
    return true;
  }
  const toml::value<std::string>* text = node.as_string();
  if (text == nullptr) {
    Fail(node, key,
         absl::StrCat("must be a size such as \"2GiB\", a number of bytes or a percentage such "
                      "as \"50%\", got ",
                      Got(node)));
    return false;
  }
  absl::StatusOr<SizeOrFraction> value = ParseSizeOrPercent(text->get());
  if (!value.ok()) {
    Fail(node, key, std::string(value.status().message()));
    return false;
  }
  *out = *value;
  return true;
}

bool Parser::CheckAbsolutePath(const toml::node& node, const std::string& key,
                               const std::string& path, bool allow_empty, size_t max_bytes) {
  if (path.empty() && allow_empty) return true;
  if (path.empty() || path[0] != '/') {
    Fail(node, key,
         absl::StrCat("must be an absolute path", allow_empty ? " or \"\"" : "", ", got ",
                      QuoteString(path)));
    return false;
  }
  if (path.size() > max_bytes) {
    Fail(node, key, absl::StrCat("must be at most ", max_bytes, " bytes long, got ", path.size()));
    return false;
  }
  if (path.find('\0') != std::string::npos) {
    Fail(node, key, "must not contain a NUL character");
    return false;
  }
  return true;
}

bool Parser::CheckGroup(const toml::node& node, const std::string& key, const std::string& group) {
  const bool bad = std::any_of(group.begin(), group.end(), [](char c) {
    return c == ':' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
  if (bad || (!group.empty() && (group.front() == ' ' || group.back() == ' '))) {
    Fail(node, key,
         absl::StrCat("must be a group name (no ':', control characters or surrounding "
                      "spaces) or \"\", got ",
                      QuoteString(group)));
    return false;
  }
  return true;
}

void Parser::CheckRules() {
  const DaemonSection& d = c_->daemon;
  if (d.fd_socket.empty() && d.FdSocketPath().size() > kMaxSocketPathBytes) {
    FailRule("daemon.fd_socket", "daemon.socket",
             absl::StrCat("daemon.socket + \".fd\" would be longer than ", kMaxSocketPathBytes,
                          " bytes: set daemon.fd_socket"));
  }
  if (d.FdSocketPath() == d.socket) {
    FailRule("daemon.fd_socket", "daemon.socket", "must differ from daemon.socket");
  }
  const GpuSection& g = c_->gpu;
  if (g.prealloc.is_fraction == g.pool_limit.is_fraction &&
      (g.prealloc.is_fraction ? g.prealloc.fraction > g.pool_limit.fraction
                              : g.prealloc.bytes > g.pool_limit.bytes)) {
    FailRule("gpu.prealloc", "gpu.pool_limit",
             absl::StrCat("must be at most gpu.pool_limit (", FormatSizeOrPercent(g.pool_limit),
                          "), got ", FormatSizeOrPercent(g.prealloc)));
  }
  for (const auto& [name, cls] :
       {std::pair<std::string, const ClassSection*>{"ls", &c_->classes.ls},
        {"be", &c_->classes.be}}) {
    const SizeOrFraction& tenant = cls->tenant_quota;
    const SizeOrFraction& whole = cls->class_quota;
    if (tenant.is_fraction == whole.is_fraction &&
        (tenant.is_fraction ? whole.fraction < tenant.fraction : whole.bytes < tenant.bytes)) {
      const std::string prefix = "classes." + name + ".";
      FailRule(prefix + "class_quota", prefix + "tenant_quota",
               absl::StrCat("must be at least ", prefix, "tenant_quota (",
                            FormatSizeOrPercent(tenant), "), got ", FormatSizeOrPercent(whole)));
    }
  }
  const PcieSection& p = c_->pcie;
  if (p.max_inflight_per_tenant > p.max_inflight_chunks) {
    FailRule("pcie.max_inflight_per_tenant", "pcie.max_inflight_chunks",
             absl::StrCat("must be at most pcie.max_inflight_chunks (", p.max_inflight_chunks,
                          "), got ", p.max_inflight_per_tenant));
  }
  if (p.bypass_below > p.chunk) {
    FailRule("pcie.bypass_below", "pcie.chunk",
             absl::StrCat("must be at most pcie.chunk (", FormatSizeExact(p.chunk), "), got ",
                          FormatSizeExact(p.bypass_below)));
  } else if (p.be_chunk != 0 && p.bypass_below > p.be_chunk) {
    FailRule("pcie.bypass_below", "pcie.be_chunk",
             absl::StrCat("must be at most pcie.be_chunk (", FormatSizeExact(p.be_chunk),
                          "), got ", FormatSizeExact(p.bypass_below)));
  }
}

// "<path>:<line>: " or "line <line>: " (nothing known: "<path>: " or "").
std::string Where(const std::string& path, uint32_t line) {
  if (path.empty()) return line == 0 ? "" : absl::StrCat("line ", line, ": ");
  return line == 0 ? absl::StrCat(path, ": ") : absl::StrCat(path, ":", line, ": ");
}

// `path` names the text in messages ("" for text that came from no file).
absl::StatusOr<DaemonConfig> ParseNamed(std::string_view text, const std::string& path) {
  try {
    toml::table root = toml::parse(text, std::string_view(path));
    DaemonConfig config;
    Parser parser(&config);
    parser.ParseRoot(root);
    if (parser.problems().empty()) parser.CheckRules();
    std::vector<Parser::Problem>& problems = parser.problems();
    if (problems.empty()) return config;
    std::stable_sort(problems.begin(), problems.end(), [](const auto& a, const auto& b) {
      return (a.line == 0 ? UINT32_MAX : a.line) < (b.line == 0 ? UINT32_MAX : b.line);
    });
    std::vector<std::string> lines;
    for (const Parser::Problem& problem : problems) {
      lines.push_back(Where(path, problem.line) + problem.text);
    }
    return absl::InvalidArgumentError(absl::StrJoin(lines, "\n"));
  } catch (const toml::parse_error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(path, e.source().begin.line), "invalid TOML at column ",
                     e.source().begin.column, ": ", AsAbsl(e.description())));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(path.empty() ? "config" : path, ": ", e.what()));
  }
}

// Closes a file descriptor on every path out.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::string DaemonSection::FdSocketPath() const {
  return fd_socket.empty() ? socket + ".fd" : fd_socket;
}

uint64_t GpuSection::PoolLimitBytes(uint64_t gpu_bytes) const {
  return std::min(pool_limit.Resolve(gpu_bytes), gpu_bytes);
}

uint64_t GpuSection::PreallocBytes(uint64_t gpu_bytes) const {
  return std::min(prealloc.Resolve(gpu_bytes), PoolLimitBytes(gpu_bytes));
}

ClassQuotaBytes ClassSection::ResolveQuotas(uint64_t pool_bytes) const {
  ClassQuotaBytes bytes;
  bytes.class_quota_bytes = std::min(class_quota.Resolve(pool_bytes), pool_bytes);
  bytes.tenant_quota_bytes = std::min(tenant_quota.Resolve(pool_bytes), bytes.class_quota_bytes);
  return bytes;
}

absl::StatusOr<DaemonConfig> ParseConfig(std::string_view toml_text) {
  return ParseNamed(toml_text, "");
}

absl::StatusOr<DaemonConfig> LoadConfig(const std::string& path, bool must_exist) {
  // O_NONBLOCK: opening a FIFO must not hang the daemon's start (it is rejected below).
  FileDescriptor fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd.get() < 0) {
    const int error = errno;
    if (error == ENOENT && !must_exist) return DaemonConfig{};
    return absl::ErrnoToStatus(error, absl::StrCat("cannot open config file ", path));
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot stat config file ", path));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": not a regular file"));
  }
  if (st.st_mode & S_IWOTH) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": every user may write it (mode ", OctalMode(st.st_mode & 07777),
                     "), and it decides who may administer the daemon: chmod o-w ", path));
  }
  std::string text;
  char buffer[16384];
  while (true) {
    const ssize_t n = read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot read config file ", path));
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > kMaxConfigBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": larger than ", FormatSize(kMaxConfigBytes), "; not a config file"));
    }
  }
  return ParseNamed(text, path);
}

std::string DescribeConfig(const DaemonConfig& config) {
  const DaemonSection& d = config.daemon;
  const GpuSection& g = config.gpu;
  const PcieSection& p = config.pcie;
  auto quoted = [](std::string_view s) { return QuoteString(s); };
  auto boolean = [](bool b) { return b ? "true" : "false"; };
  auto size = [](uint64_t bytes) { return QuoteString(FormatSizeExact(bytes)); };
  auto size_or_percent = [](const SizeOrFraction& v) { return QuoteString(FormatSizeOrPercent(v)); };
  std::string devices = "\"all\"";
  if (g.devices.has_value()) devices = absl::StrCat("[", absl::StrJoin(*g.devices, ", "), "]");
  std::vector<std::string> lines = {
      absl::StrCat("daemon.socket = ", quoted(d.socket)),
      absl::StrCat("daemon.fd_socket = ", quoted(d.FdSocketPath()),
                   d.fd_socket.empty() ? "  # daemon.socket + \".fd\"" : ""),
      absl::StrCat("daemon.socket_group = ", quoted(d.socket_group),
                   d.socket_group.empty() ? "  # the daemon's group" : ""),
      absl::StrCat("daemon.socket_mode = \"", OctalMode(d.socket_mode), "\""),
      absl::StrCat("daemon.admin_group = ", quoted(d.admin_group),
                   d.admin_group.empty() ? "  # root only" : ""),
      absl::StrCat("daemon.log_level = ", quoted(d.log_level)),
      absl::StrCat("gpu.devices = ", devices),
      absl::StrCat("gpu.pool_limit = ", size_or_percent(g.pool_limit)),
      absl::StrCat("gpu.prealloc = ", size_or_percent(g.prealloc)),
      absl::StrCat("gpu.cache_limit = ", size(g.cache_limit)),
      absl::StrCat("gpu.scrub_on_release = ", boolean(g.scrub_on_release)),
      absl::StrCat("gpu.profile_dir = ", quoted(g.profile_dir),
                   g.profile_dir.empty() ? "  # none: one colour per GPU" : ""),
      absl::StrCat("gpu.ls_colours = ", g.ls_colours,
                   g.ls_colours == 0 ? "  # half of each GPU's colours" : ""),
  };
  for (const auto& [name, cls] :
       {std::pair<std::string, const ClassSection*>{"ls", &config.classes.ls},
        {"be", &config.classes.be}}) {
    lines.push_back(absl::StrCat("classes.", name, ".priority = ", cls->priority));
    lines.push_back(
        absl::StrCat("classes.", name, ".tenant_quota = ", size_or_percent(cls->tenant_quota)));
    lines.push_back(
        absl::StrCat("classes.", name, ".class_quota = ", size_or_percent(cls->class_quota)));
  }
  lines.push_back(absl::StrCat("pcie.chunk = ", size(p.chunk)));
  lines.push_back(absl::StrCat("pcie.be_chunk = ", size(p.be_chunk),
                               p.be_chunk == 0 ? "  # pcie.chunk" : ""));
  lines.push_back(absl::StrCat("pcie.max_inflight_chunks = ", p.max_inflight_chunks));
  lines.push_back(absl::StrCat("pcie.max_inflight_per_tenant = ", p.max_inflight_per_tenant));
  lines.push_back(absl::StrCat("pcie.bypass_below = ", size(p.bypass_below)));
  lines.push_back(absl::StrCat("pcie.ls_first = ", boolean(p.ls_first)));
  lines.push_back(absl::StrCat("pcie.spin_us = ", p.spin_us));
  lines.push_back(absl::StrCat("pcie.ls_spin_us = ", p.ls_spin_us));
  lines.push_back(absl::StrCat("pcie.ls_quiet_ms = ", p.ls_quiet_ms));
  const ComputeSection& c = config.compute;
  lines.push_back(absl::StrCat("compute.pacing = ", boolean(c.pacing)));
  lines.push_back(absl::StrCat("compute.window_items = ", c.window_items));
  lines.push_back(absl::StrCat("compute.window_us = ", c.window_us));
  lines.push_back(absl::StrCat("compute.ls_idle_us = ", c.ls_idle_us));
  lines.push_back(absl::StrCat("compute.ls_stale_ms = ", c.ls_stale_ms));
  lines.push_back(absl::StrCat("compute.max_hold_ms = ", c.max_hold_ms));
  lines.push_back(absl::StrCat("compute.unknown_us = ", c.unknown_us));
  lines.push_back(absl::StrCat("compute.share_slack_us = ", c.share_slack_us));
  lines.push_back(absl::StrCat("compute.refill_us = ", c.refill_us));
  lines.push_back(absl::StrCat("compute.mps = ", QuoteString(c.mps)));
  lines.push_back(absl::StrCat("compute.mps_pipe_directory = ", QuoteString(c.mps_pipe_directory)));
  lines.push_back(absl::StrCat("compute.mps_log_directory = ", QuoteString(c.mps_log_directory)));
  lines.push_back(absl::StrCat("compute.mps_control = ", QuoteString(c.mps_control)));
  return absl::StrJoin(lines, "\n");
}

}  // namespace missile::daemon

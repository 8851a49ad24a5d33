// The configuration parser's parts, shared by the files of missile_config (config.cc, the
// TOML value reads in config_values.cc, the sections in config_sections.cc, the field and
// cross-field checks in config_checks.cc, DescribeConfig in config_describe.cc). Not a public
// interface: only daemon/config.h is. Single-threaded: one Parser per parse.
#ifndef MISSILE_DAEMON_INTERNAL_CONFIG_PARSER_H_
#define MISSILE_DAEMON_INTERNAL_CONFIG_PARSER_H_

#include <toml++/toml.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "daemon/config.h"
#include "missile/common/settings.h"

namespace missile::daemon::config_internal {

// Debian's Abseil has its own string_view: StrCat takes std::string_view only through this.
inline absl::string_view AsAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// What a value is, for "got ..." in messages: `integer 25`, `string "x"`, `a table`.
std::string Got(const toml::node& node);

// "0660" for 0660.
std::string OctalMode(uint32_t mode);

// Walks the parsed TOML into a DaemonConfig, collecting every problem.
class Parser {
 public:
  explicit Parser(DaemonConfig* config) : c_(config) {}

  void ParseRoot(const toml::table& root);
  // The cross-field rules; meaningful only once every field parsed cleanly.
  void CheckRules();
  void CheckLimitRules();  // config_limits.cc: the [limits] keys' rules

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
  void ParseMetrics(const toml::node& node, const std::string& path);  // config_metrics.cc
  void ParseLimits(const toml::node& node, const std::string& path);   // config_limits.cc
  void ParseKubernetes(const toml::node& node, const std::string& path);  // config_kubernetes.cc
  void ParseSocketMode(const toml::node& node, const std::string& key);
  void ParseLogLevel(const toml::node& node, const std::string& key);
  void ParseDevices(const toml::node& node, const std::string& key);

  // Typed reads: true and *out set, or false and a problem recorded.
  bool GetString(const toml::node& node, const std::string& key, std::string* out);
  bool GetBool(const toml::node& node, const std::string& key, bool* out);
  bool GetInt(const toml::node& node, const std::string& key, int min, int max, int* out);
  bool GetSize(const toml::node& node, const std::string& key, uint64_t* out);
  bool GetSizeOrPercent(const toml::node& node, const std::string& key, SizeOrFraction* out);
  // The key of a settings table's entry `s` (missile/common/settings.h), held to its range (and
  // multiple; 0 accepted where s.zero says what it means): true or false for a bool, an integer
  // for an int, a size for a uint64_t (s.unit kBytes).
  bool GetSetting(const toml::node& node, const std::string& key, const settings::Setting& s,
                  bool* out);
  bool GetSetting(const toml::node& node, const std::string& key, const settings::Setting& s,
                  int* out);
  bool GetSetting(const toml::node& node, const std::string& key, const settings::Setting& s,
                  uint64_t* out);

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

}  // namespace missile::daemon::config_internal

#endif  // MISSILE_DAEMON_INTERNAL_CONFIG_PARSER_H_

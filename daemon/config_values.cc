// The generic part of the parser: walking a table's keys and the typed reads of values.
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "daemon/internal/config_parser.h"
#include "missile/common/quote.h"

namespace missile::daemon::config_internal {
namespace {

// A size written as a bare number other than 0 (95, "95"): bytes or percent? Such a value must
// carry its unit, as missilectl's sizes must (IsBareNonZeroNumber); 0 means nothing either way.
bool BareNonZeroNumber(const toml::node& node) {
  if (const toml::value<int64_t>* value = node.as_integer()) return value->get() > 0;
  const toml::value<std::string>* text = node.as_string();
  return text != nullptr && IsBareNonZeroNumber(text->get());
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

}  // namespace

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

std::string OctalMode(uint32_t mode) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "%04o", mode);
  return buffer;
}

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
  if (BareNonZeroNumber(node)) {
    Fail(node, key, absl::StrCat("a number without a unit is ambiguous: write it with one, such as "
                                 "\"2MiB\" or \"2097152B\", got ", Got(node)));
    return false;
  }
  if (const toml::value<int64_t>* value = node.as_integer(); value != nullptr && value->get() == 0) {
    *out = 0;
    return true;
  }
  const toml::value<std::string>* text = node.as_string();
  if (text == nullptr) {
    Fail(node, key, absl::StrCat("must be a size such as \"2MiB\", got ", Got(node)));
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
  if (BareNonZeroNumber(node)) {
    Fail(node, key, absl::StrCat("a number without a unit is ambiguous: write it with one, such as "
                                 "\"95%\", \"95GiB\" or \"95B\", got ", Got(node)));
    return false;
  }
  if (const toml::value<int64_t>* value = node.as_integer(); value != nullptr && value->get() == 0) {
    *out = SizeOrFraction::Bytes(0);
    return true;
  }
  const toml::value<std::string>* text = node.as_string();
  if (text == nullptr) {
    Fail(node, key,
         absl::StrCat("must be a size such as \"2GiB\" or a percentage such as \"50%\", got ",
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

bool Parser::GetSetting(const toml::node& node, const std::string& key, const settings::Setting&,
                        bool* out) {
  return GetBool(node, key, out);
}

bool Parser::GetSetting(const toml::node& node, const std::string& key, const settings::Setting& s,
                        int* out) {
  return GetInt(node, key, static_cast<int>(s.min), static_cast<int>(s.max), out);
}

bool Parser::GetSetting(const toml::node& node, const std::string& key, const settings::Setting& s,
                        uint64_t* out) {
  uint64_t v = 0;
  if (!GetSize(node, key, &v)) return false;
  const auto min = static_cast<uint64_t>(s.min);
  const auto max = static_cast<uint64_t>(s.max);
  const auto multiple = static_cast<uint64_t>(s.multiple);
  if (!(v == 0 && s.zero != nullptr) && (v % multiple != 0 || v < min || v > max)) {
    Fail(node, key,
         absl::StrCat("must be ",
                      multiple > 1 ? absl::StrCat("a multiple of ", FormatSizeExact(multiple))
                                   : std::string("a size"),
                      " in [", FormatSizeExact(min), ", ", FormatSizeExact(max), "]",
                      s.zero != nullptr ? " or 0" : "", ", got ", FormatSizeExact(v)));
    return false;
  }
  *out = v;
  return true;
}

}  // namespace missile::daemon::config_internal

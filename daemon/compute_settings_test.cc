// Every line of compute_settings.inc reaches each place generated from it, and the proto, which
// is written by hand, has its fields.
#include "missile/common/compute_settings.h"

#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/config.h"
#include "gmock/gmock.h"
#include "gpu_setup.h"
#include "gtest/gtest.h"
#include "missile/v1/missile.pb.h"
#include "pacing_domain.h"

namespace missile::daemon {
namespace {

using settings::kComputeSettings;
using settings::Setting;
using settings::Unit;
using ::testing::HasSubstr;

std::string Error(const std::string& text) {
  absl::StatusOr<DaemonConfig> c = ParseConfig(text);
  return c.ok() ? std::string("accepted") : std::string(c.status().message());
}

std::string Toml(const Setting& s, int64_t v) {
  if (s.unit == Unit::kBool) return absl::StrCat("[compute]\n", s.key, v ? " = true" : " = false");
  return absl::StrCat("[compute]\n", s.key, " = ", v);
}

// The value of `key` as DescribeConfig prints it.
std::string Described(const DaemonConfig& c, const Setting& s) {
  const std::string text = DescribeConfig(c);
  const std::string prefix = absl::StrCat("\n", s.section, ".", s.key, " = ");
  const size_t at = text.find(prefix);
  if (at == std::string::npos) return "missing";
  const size_t begin = at + prefix.size();
  return text.substr(begin, text.find('\n', begin) - begin);
}

std::string AsToml(const Setting& s, int64_t v) {
  if (s.unit == Unit::kBool) return v ? "true" : "false";
  return absl::StrCat(v);
}

TEST(ComputeSettingsTest, EveryEntryParsesAtItsBoundsAndDescribesItself) {
  for (const Setting& s : kComputeSettings) {
    SCOPED_TRACE(s.key);
    for (int64_t v : {s.min, s.max}) {
      absl::StatusOr<DaemonConfig> c = ParseConfig(Toml(s, v));
      ASSERT_TRUE(c.ok()) << c.status();
      EXPECT_EQ(Described(*c, s), AsToml(s, v));
    }
    EXPECT_EQ(Described(DaemonConfig{}, s), AsToml(s, s.default_value));
  }
}

TEST(ComputeSettingsTest, OutOfRangeIsRefusedNamingTheKey) {
  for (const Setting& s : kComputeSettings) {
    SCOPED_TRACE(s.key);
    const std::string name = absl::StrCat("compute.", s.key);
    if (s.unit == Unit::kBool) {
      EXPECT_THAT(Error(absl::StrCat("[compute]\n", s.key, " = 2")), HasSubstr(name));
      continue;
    }
    EXPECT_THAT(Error(Toml(s, s.min - 1)), HasSubstr(name));
    EXPECT_THAT(Error(Toml(s, s.max + 1)), HasSubstr(name));
  }
}

// A change of `setting` alone, to `v`.
PacingChange ChangeOf(const Setting& setting, int64_t v) {
  PacingChange change;
#define MISSILE_COMPUTE_SETTING(name, field, type, unit, min, max, def, live, flag, help) \
  if (std::string_view(setting.key) == #name) {                                         \
    change.name = static_cast<decltype(change.name)::value_type>(v);                    \
  }
#include "missile/common/compute_settings.inc"
#undef MISSILE_COMPUTE_SETTING
  return change;
}

TEST(ComputeSettingsTest, LiveChangesAreHeldToTheSameRange) {
  for (const Setting& s : kComputeSettings) {
    SCOPED_TRACE(s.key);
    EXPECT_TRUE(s.live);
    EXPECT_FALSE(ChangeOf(s, s.max).empty());
    EXPECT_TRUE(ApplyPacingChange(PacingSettings{}, ChangeOf(s, s.max)).ok());
    if (s.unit == Unit::kBool) continue;
    absl::StatusOr<PacingSettings> over =
        ApplyPacingChange(PacingSettings{}, ChangeOf(s, s.max + 1));
    EXPECT_THAT(over.status().message(),
                HasSubstr(absl::StrCat(s.key, " must be in [", s.min, ", ", s.max, "]")));
  }
}

TEST(ComputeSettingsTest, DefaultsAgree) {
  EXPECT_EQ(PacingSettingsOf(ComputeSection{}), PacingSettings{});
}

TEST(ComputeSettingsTest, EveryEntryHasItsProtoFields) {
  for (const Setting& s : kComputeSettings) {
    SCOPED_TRACE(s.key);
    const std::string key(s.key);
    const google::protobuf::FieldDescriptor* request =
        v1::SetPacingRequest::descriptor()->FindFieldByName(key);
    ASSERT_NE(request, nullptr);
    EXPECT_TRUE(request->has_presence());  // unset keeps the value
    EXPECT_NE(v1::PacingPolicy::descriptor()->FindFieldByName(key), nullptr);
  }
  // And the proto has no field the table lacks.
  EXPECT_EQ(v1::SetPacingRequest::descriptor()->field_count(), std::size(kComputeSettings));
  EXPECT_EQ(v1::PacingPolicy::descriptor()->field_count(), std::size(kComputeSettings));
}

// docs/operations.md lists each key with its default and range, and each option with its key.
TEST(ComputeSettingsTest, OperationsGuideListsEveryEntry) {
  std::ifstream in(MISSILE_OPERATIONS_DOC);
  ASSERT_TRUE(in.good()) << MISSILE_OPERATIONS_DOC;
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const Setting& s : kComputeSettings) {
    SCOPED_TRACE(s.key);
    const std::string key = absl::StrCat("`compute.", s.key, "`");
    const std::string range =
        s.unit == Unit::kBool ? "" : absl::StrCat(" ", s.min, " to ", s.max);
    const size_t row = doc.find(absl::StrCat("| ", key, " | `", AsToml(s, s.default_value), "` |"));
    ASSERT_NE(row, std::string::npos);
    EXPECT_THAT(doc.substr(row, doc.find('\n', row) - row), HasSubstr(range));
    const std::string value = s.unit == Unit::kBool ? " on\\|off`" : " N`";
    EXPECT_THAT(doc, HasSubstr(absl::StrCat("| `", s.flag, value, " | ", key, " |", range)));
  }
}

}  // namespace
}  // namespace missile::daemon

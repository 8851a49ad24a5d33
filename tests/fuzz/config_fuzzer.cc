// Fuzzes missiled's configuration parser (daemon/config.h, TOML through toml++): any text gives
// either a configuration or an error with a message, never a crash or an exception. A
// configuration it accepts is described by DescribeConfig, and that text (valid TOML by
// contract) must parse again, to a configuration with the same keys whose description no longer
// changes (the first description may differ in its comments only: a derived value, once
// written out, is no longer derived).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_split.h"
#include "daemon/config.h"

namespace {

using missile::daemon::DaemonConfig;
using missile::daemon::DescribeConfig;
using missile::daemon::ParseConfig;

[[noreturn]] void Fail(const std::string& what, const std::string& a, const std::string& b) {
  fprintf(stderr, "fuzz: %s\n%s\n---\n%s\n", what.c_str(), a.c_str(), b.c_str());
  abort();
}

// The key of each line of a description ("section.key = value  # comment").
std::vector<std::string> Keys(const std::string& description) {
  std::vector<std::string> keys;
  for (absl::string_view line : absl::StrSplit(description, '\n')) {
    keys.emplace_back(line.substr(0, line.find(" = ")));
  }
  return keys;
}

std::string DescribeParsed(const std::string& text, const std::string& input) {
  absl::StatusOr<DaemonConfig> config = ParseConfig(text);
  if (!config.ok()) Fail("DescribeConfig wrote text ParseConfig refuses: " +
                             config.status().ToString(), input, text);
  return DescribeConfig(*config);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<DaemonConfig> config = ParseConfig(input);
  if (!config.ok()) {
    if (config.status().message().empty()) Fail("a refusal with no message", input, "");
    return 0;
  }
  const std::string first = DescribeConfig(*config);
  const std::string second = DescribeParsed(first, input);
  if (Keys(first) != Keys(second)) Fail("the keys changed on a round trip", first, second);
  const std::string third = DescribeParsed(second, input);
  if (third != second) Fail("the description changed on a second round trip", second, third);
  return 0;
}

// deploy/missiled.toml, the example configuration installed as a conffile: what its header says
// about sizes is what the parser does.
#include <fstream>
#include <string>

#include "daemon/config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace missile::daemon {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The comment lines before the first table, joined with spaces (the lines' "# " dropped).
std::string ExampleHeader() {
  std::ifstream in(MISSILE_EXAMPLE_CONFIG);
  std::string header, line;
  while (std::getline(in, line) && (line.empty() || line[0] == '#')) {
    header += line.size() > 2 ? line.substr(2) + " " : std::string(" ");
  }
  return header;
}

// The header once said a size may be "a plain integer of bytes", which the parser refuses.
TEST(ConfigExampleTest, TheHeaderDescribesSizesAsTheParserReadsThem) {
  const std::string header = ExampleHeader();
  ASSERT_THAT(header, HasSubstr("Sizes are binary"));
  EXPECT_THAT(header, Not(HasSubstr("plain integer")));
  EXPECT_THAT(header, HasSubstr("A size carries its unit: a number without one (4096 or \"4096\") "
                                "is refused"));
  EXPECT_THAT(header, HasSubstr("write \"4096B\" for bytes. Only 0 may go without."));
  EXPECT_FALSE(ParseConfig("[gpu]\ncache_limit = 4096\n").ok());
  EXPECT_FALSE(ParseConfig("[gpu]\ncache_limit = \"4096\"\n").ok());
  absl::StatusOr<DaemonConfig> bytes = ParseConfig("[gpu]\ncache_limit = \"4096B\"\n");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(bytes->gpu.cache_limit, 4096u);
  EXPECT_TRUE(ParseConfig("[gpu]\ncache_limit = 0\n").ok());
  EXPECT_TRUE(ParseConfig("[gpu]\nprealloc = \"0\"\n").ok());
}

}  // namespace
}  // namespace missile::daemon

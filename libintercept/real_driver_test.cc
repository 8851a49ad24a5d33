#include "real_driver.h"

#include <algorithm>
#include <string>

#include "gtest/gtest.h"

namespace missile::shim {
namespace {

TEST(DriverCandidatesTest, ExplicitPathIsTheOnlyCandidate) {
  EXPECT_EQ(DriverCandidates("/x/libcuda.so.1", "/a:/b", ""),
            std::vector<std::string>{"/x/libcuda.so.1"});
}

TEST(DriverCandidatesTest, LibraryPathThenSystemThenCacheWithoutStubsOrDuplicates) {
  // The literal's own length (sizeof less its terminating NUL): the embedded NULs are data.
  static constexpr char kCache[] =
      "junk\0/usr/lib/x86_64-linux-gnu/libcuda.so.1\0/opt/nv/libcuda.so.1\0"
      "/opt/nv/libcuda.so\0/usr/local/cuda/lib64/stubs/libcuda.so.1\0";
  std::string cache(kCache, sizeof(kCache) - 1);
  auto c = DriverCandidates("", "/first::/usr/local/cuda/lib64/stubs", cache);
  ASSERT_GE(c.size(), 3u);
  EXPECT_EQ(c.front(), "/first/libcuda.so.1");
  EXPECT_EQ(c.back(), "/opt/nv/libcuda.so.1");
  for (const auto& path : c) EXPECT_EQ(path.find("/stubs/"), std::string::npos) << path;
  EXPECT_EQ(std::count(c.begin(), c.end(), "/usr/lib/x86_64-linux-gnu/libcuda.so.1"), 1);
}

TEST(OpenRealDriverTest, MissingExplicitPathIsAClearError) {
  auto driver = OpenRealDriver("/nonexistent/libcuda.so.1", nullptr);
  ASSERT_FALSE(driver.ok());
  EXPECT_NE(driver.status().message().find("MISSILE_REAL_LIBCUDA"), std::string::npos);
}

TEST(OpenRealDriverTest, ALibraryThatIsNotADriverIsRejected) {
  auto driver = OpenRealDriver("/lib/x86_64-linux-gnu/libm.so.6", nullptr);
  ASSERT_FALSE(driver.ok());
  EXPECT_NE(driver.status().message().find("not a CUDA driver"), std::string::npos);
}

}  // namespace
}  // namespace missile::shim

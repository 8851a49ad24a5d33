// Multi-process tests of libmissile.so: an unmodified driver API program (driver_probe) runs
// under LD_PRELOAD against the driver test double, once per way of reaching the driver, and
// must print exactly what it prints without the shim while the shim's report shows each call.
#include <unistd.h>

#include <map>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "subprocess.h"

namespace missile {
namespace {

using testing::ProcessResult;
using testing::ReadFile;
using testing::TempDir;

struct ReportLine {
  uint64_t calls = 0;
  bool via_getproc = false;
};

struct Report {
  std::string header;
  std::map<std::string, ReportLine> hooks;
  uint64_t calls(const std::string& symbol) const {
    auto it = hooks.find(symbol);
    return it == hooks.end() ? 0 : it->second.calls;
  }
};

Report ParseReport(const std::string& text) {
  Report report;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("#", 0) == 0) {
      report.header += line + "\n";
      continue;
    }
    std::istringstream fields(line);
    ReportLine entry;
    std::string symbol, family, via;
    if (fields >> entry.calls >> symbol >> family >> via) {
      entry.via_getproc = via == "yes";
      report.hooks[symbol] = entry;
    }
  }
  return report;
}

class ShimProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    shm_ = "/fakecuda-shimtest-" + std::to_string(getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  void TearDown() override {
    std::string path = "/dev/shm" + shm_;
    unlink(path.c_str());
  }

  std::map<std::string, std::string> BaseEnv() const {
    return {{"FAKECUDA_SHM", shm_},
            {"FAKECUDA_PCIE_BYTES_PER_US", "100000"},
            {"LD_PRELOAD", "<unset>"},
            {"MISSILE_DISABLE", "<unset>"},
            {"MISSILE_LOG_LEVEL", "<unset>"}};
  }

  // The probe without the shim: the test double is found as libcuda.so.1 on LD_LIBRARY_PATH.
  ProcessResult RunPlain(const std::string& mode) {
    auto env = BaseEnv();
    env["LD_LIBRARY_PATH"] = FAKECUDA_DIR;
    return testing::Run({DRIVER_PROBE, mode}, env);
  }

  // The probe under the shim, with the test double as the real driver.
  ProcessResult RunShim(const std::string& mode, std::map<std::string, std::string> extra = {}) {
    auto env = BaseEnv();
    env["LD_PRELOAD"] = MISSILE_SHIM;
    env["MISSILE_REAL_LIBCUDA"] = FAKECUDA_LIB;
    env["MISSILE_REPORT"] = report_path();
    env["LD_LIBRARY_PATH"] = "<unset>";
    for (const auto& [k, v] : extra) env[k] = v;
    return testing::Run({DRIVER_PROBE, mode}, env);
  }

  std::string report_path() const { return dir_.path() + "/report.txt"; }
  Report ReadReport() const { return ParseReport(ReadFile(report_path())); }

  TempDir dir_;
  std::string shm_;
};

// The calls the probe's workload makes, by the exported name they reach without the
// per-thread flag (direct binding, dlsym, cuGetProcAddress at CUDA 11.3).
const std::map<std::string, uint64_t> kLegacyStreamCalls = {
    {"cuMemGetInfo_v2", 1},      {"cuDeviceTotalMem_v2", 1},  {"cuMemAlloc_v2", 2},
    {"cuMemFree_v2", 2},         {"cuMemsetD8_v2", 1},        {"cuMemcpyHtoD_v2", 1},
    {"cuMemcpyDtoD_v2", 1},      {"cuMemcpyDtoH_v2", 1},      {"cuMemcpyHtoDAsync_v2", 1},
    {"cuMemcpyDtoHAsync_v2", 1}, {"cuMemAllocHost_v2", 1},    {"cuMemFreeHost", 1},
};

void ExpectSameRun(const ProcessResult& plain, const ProcessResult& shim) {
  ASSERT_EQ(plain.exit_code, 0) << plain.out << plain.err;
  ASSERT_EQ(shim.exit_code, 0) << shim.out << shim.err;
  EXPECT_EQ(plain.out, shim.out);
  EXPECT_NE(shim.out.find("sync checksum"), std::string::npos);
  EXPECT_NE(shim.out.find("matches_input 1"), std::string::npos);
}

void ExpectCounts(const Report& report, const std::map<std::string, uint64_t>& expected) {
  for (const auto& [symbol, n] : expected) {
    EXPECT_EQ(report.calls(symbol), n) << symbol << "\n" << report.header;
  }
}

TEST_F(ShimProcessTest, DirectBindingIsInterceptedAndUnchanged) {
  ProcessResult plain = RunPlain("direct");
  ProcessResult shim = RunShim("direct");
  ExpectSameRun(plain, shim);
  Report report = ReadReport();
  ExpectCounts(report, kLegacyStreamCalls);
  EXPECT_NE(report.header.find(FAKECUDA_LIB), std::string::npos) << report.header;
  EXPECT_FALSE(report.hooks["cuMemAlloc_v2"].via_getproc);
}

TEST_F(ShimProcessTest, DlopenAndDlsymAreIntercepted) {
  ProcessResult plain = RunPlain("dlsym");
  ProcessResult shim = RunShim("dlsym");
  ExpectSameRun(plain, shim);
  ExpectCounts(ReadReport(), kLegacyStreamCalls);
}

TEST_F(ShimProcessTest, GetProcAddressAtCuda113IsIntercepted) {
  ProcessResult plain = RunPlain("getproc");
  ProcessResult shim = RunShim("getproc");
  ExpectSameRun(plain, shim);
  Report report = ReadReport();
  ExpectCounts(report, kLegacyStreamCalls);
  EXPECT_EQ(report.calls("cuGetProcAddress"), 19u);
  EXPECT_TRUE(report.hooks["cuMemAlloc_v2"].via_getproc);
  EXPECT_TRUE(report.hooks["cuMemcpyHtoDAsync_v2"].via_getproc);
}

TEST_F(ShimProcessTest, GetProcAddressV2WithPerThreadStreamsGetsPtdsAndPtszHooks) {
  ProcessResult plain = RunPlain("getproc2");
  ProcessResult shim = RunShim("getproc2");
  ExpectSameRun(plain, shim);
  Report report = ReadReport();
  ExpectCounts(report, {{"cuMemAlloc_v2", 2},
                        {"cuMemFree_v2", 2},
                        {"cuMemsetD8_v2_ptds", 1},
                        {"cuMemcpyHtoD_v2_ptds", 1},
                        {"cuMemcpyDtoD_v2_ptds", 1},
                        {"cuMemcpyDtoH_v2_ptds", 1},
                        {"cuMemcpyHtoDAsync_v2_ptsz", 1},
                        {"cuMemcpyDtoHAsync_v2_ptsz", 1},
                        {"cuMemcpyHtoD_v2", 0},
                        {"cuMemcpyHtoDAsync_v2", 0}});
  EXPECT_EQ(report.calls("cuGetProcAddress_v2"), 19u);
  EXPECT_TRUE(report.hooks["cuMemcpyHtoDAsync_v2_ptsz"].via_getproc);
  EXPECT_EQ(report.header.find("not intercepted"), std::string::npos) << report.header;
}

TEST_F(ShimProcessTest, DisableMakesEveryHookAPassThrough) {
  ProcessResult plain = RunPlain("getproc2");
  ProcessResult shim = RunShim("getproc2", {{"MISSILE_DISABLE", "1"}});
  ExpectSameRun(plain, shim);
  Report report = ReadReport();
  EXPECT_NE(report.header.find("disabled"), std::string::npos) << report.header;
  EXPECT_TRUE(report.hooks.empty()) << ReadFile(report_path());
}

TEST_F(ShimProcessTest, RacingFirstCallsResolveTheDriverOnce) {
  ProcessResult shim = RunShim("threads");
  ASSERT_EQ(shim.exit_code, 0) << shim.out << shim.err;
  EXPECT_NE(shim.out.find("threads ok 8 of 8"), std::string::npos) << shim.out;
  EXPECT_EQ(ReadReport().calls("cuDeviceTotalMem_v2"), 8u);
}

TEST_F(ShimProcessTest, MissingRealDriverGivesAnErrorCodeNotACrash) {
  ProcessResult shim = RunShim("direct", {{"MISSILE_REAL_LIBCUDA", "/nonexistent/libcuda.so.1"}});
  EXPECT_EQ(shim.signal, 0) << shim.err;
  EXPECT_EQ(shim.exit_code, 1) << shim.out << shim.err;
  EXPECT_NE(shim.out.find("error cuInit 100"), std::string::npos) << shim.out;  // NO_DEVICE
  EXPECT_NE(shim.err.find("MISSILE_REAL_LIBCUDA=/nonexistent/libcuda.so.1 does not exist"),
            std::string::npos)
      << shim.err;
}

TEST_F(ShimProcessTest, EntryPointTheDriverLacksReturnsNotFound) {
  ProcessResult shim = RunShim("missing");
  ASSERT_EQ(shim.exit_code, 0) << shim.out << shim.err;
  EXPECT_NE(shim.out.find("missing init 0 result 500"), std::string::npos) << shim.out;
  EXPECT_NE(shim.err.find("cuArray3DCreate_v2: the real driver"), std::string::npos) << shim.err;
}

TEST_F(ShimProcessTest, FindsTheDriverOnTheLibraryPathWithoutAnExplicitPath) {
  ProcessResult shim = RunShim("dlsym", {{"MISSILE_REAL_LIBCUDA", "<unset>"},
                                         {"LD_LIBRARY_PATH", FAKECUDA_DIR}});
  ASSERT_EQ(shim.exit_code, 0) << shim.out << shim.err;
  Report report = ReadReport();
  EXPECT_NE(report.header.find(FAKECUDA_DIR), std::string::npos) << report.header;
  ExpectCounts(report, kLegacyStreamCalls);
}

TEST_F(ShimProcessTest, DebugLevelTracesCallsWithArguments) {
  ProcessResult shim = RunShim("direct", {{"MISSILE_LOG_LEVEL", "debug"}});
  ASSERT_EQ(shim.exit_code, 0) << shim.out << shim.err;
  EXPECT_NE(shim.err.find("cuMemAlloc_v2(0x"), std::string::npos) << shim.err;
  EXPECT_NE(shim.err.find(", 3145728) = 0"), std::string::npos) << shim.err;
}

TEST_F(ShimProcessTest, BadSettingsAreReportedAndIgnored) {
  ProcessResult plain = RunPlain("direct");
  ProcessResult shim = RunShim("direct", {{"MISSILE_LOG_LEVEL", "loud"}});
  ExpectSameRun(plain, shim);
  EXPECT_NE(shim.err.find("MISSILE_LOG_LEVEL='loud'"), std::string::npos) << shim.err;
}

}  // namespace
}  // namespace missile

// cuGetProcAddress: version and flag selection, identity with dlsym, and the entry point table
// against the library's exports and cudaTypedefs.h.

#include <dlfcn.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace fakecuda_test {
namespace {

struct Row {
  std::string base;
  std::string exported;
  int version;
  std::string suffix;
  bool implemented;
};

const std::vector<Row>& Rows() {
  static const std::vector<Row> rows = {
#define FAKECUDA_IMPL(base, exported, version, suffix) {#base, #exported, version, #suffix, true},
#define FAKECUDA_NOIMPL(base, exported, version, suffix) \
  {#base, #exported, version, #suffix, false},
#include "entry_points.inc"
#undef FAKECUDA_IMPL
#undef FAKECUDA_NOIMPL
  };
  return rows;
}

class ProcAddressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    handle_ = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(handle_, nullptr) << dlerror();
  }
  void TearDown() override {
    if (handle_ != nullptr) dlclose(handle_);
  }

  void* Sym(const char* name) { return dlsym(handle_, name); }

  // The exported name cuGetProcAddress_v2 resolves (symbol, version, flags) to, or the error.
  std::string Resolve(const char* symbol, int version, cuuint64_t flags,
                      CUdriverProcAddressQueryResult* status = nullptr) {
    void* pfn = reinterpret_cast<void*>(1);
    CUdriverProcAddressQueryResult st{};
    const CUresult r = cuGetProcAddress_v2(symbol, &pfn, version, flags, &st);
    if (status != nullptr) *status = st;
    if (r != CUDA_SUCCESS) {
      EXPECT_EQ(pfn, nullptr);
      return CuName(r);
    }
    EXPECT_EQ(st, CU_GET_PROC_ADDRESS_SUCCESS);
    for (const Row& row : Rows()) {
      if (row.implemented && Sym(row.exported.c_str()) == pfn) return row.exported;
    }
    return "<not an exported function>";
  }

  void* handle_ = nullptr;
};

constexpr cuuint64_t kDefault = CU_GET_PROC_ADDRESS_DEFAULT;
constexpr cuuint64_t kLegacy = CU_GET_PROC_ADDRESS_LEGACY_STREAM;
constexpr cuuint64_t kPtds = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;

TEST_F(ProcAddressTest, SelectsTheAbiByVersion) {
  EXPECT_EQ(Resolve("cuMemAlloc", 13000, kDefault), "cuMemAlloc_v2");
  EXPECT_EQ(Resolve("cuMemAlloc", 3020, kDefault), "cuMemAlloc_v2");
  CUdriverProcAddressQueryResult status{};
  // The 32-bit CUDA 2.0 ABI exists in the driver but not in the fake.
  EXPECT_EQ(Resolve("cuMemAlloc", 2000, kDefault, &status), "CUDA_ERROR_NOT_FOUND");
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  EXPECT_EQ(Resolve("cuMemAlloc", 1000, kDefault, &status), "CUDA_ERROR_NOT_FOUND");
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  EXPECT_EQ(Resolve("cuGetProcAddress", 11030, kDefault), "cuGetProcAddress");
  EXPECT_EQ(Resolve("cuGetProcAddress", 12000, kDefault), "cuGetProcAddress_v2");
  EXPECT_EQ(Resolve("cuGetProcAddress", 11020, kDefault, &status), "CUDA_ERROR_NOT_FOUND");
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  EXPECT_EQ(Resolve("cuCtxCreate", 13000, kDefault), "cuCtxCreate_v4");
  EXPECT_EQ(Resolve("cuCtxCreate", 12000, kDefault), "cuCtxCreate_v3");
  EXPECT_EQ(Resolve("cuEventElapsedTime", 12080, kDefault), "cuEventElapsedTime_v2");
  EXPECT_EQ(Resolve("cuEventElapsedTime", 12000, kDefault), "cuEventElapsedTime");
  EXPECT_EQ(Resolve("cuCtxSynchronize", 12090, kDefault), "cuCtxSynchronize");
  EXPECT_EQ(Resolve("cuCtxSynchronize", 13000, kDefault), "cuCtxSynchronize_v2");
}

TEST_F(ProcAddressTest, PerThreadFlagSelectsPtdsAndPtszVariants) {
  EXPECT_EQ(Resolve("cuMemcpyHtoDAsync", 12000, kPtds), "cuMemcpyHtoDAsync_v2_ptsz");
  EXPECT_EQ(Resolve("cuMemcpyHtoDAsync", 12000, kDefault), "cuMemcpyHtoDAsync_v2");
  EXPECT_EQ(Resolve("cuMemcpyHtoDAsync", 12000, kLegacy), "cuMemcpyHtoDAsync_v2");
  EXPECT_EQ(Resolve("cuMemcpyHtoD", 12000, kPtds), "cuMemcpyHtoD_v2_ptds");
  EXPECT_EQ(Resolve("cuMemcpy", 12000, kPtds), "cuMemcpy_ptds");
  EXPECT_EQ(Resolve("cuMemsetD8Async", 12000, kPtds), "cuMemsetD8Async_ptsz");
  // Older than the per-thread ABI: the legacy one.
  EXPECT_EQ(Resolve("cuMemcpyHtoD", 6050, kPtds), "cuMemcpyHtoD_v2");
  EXPECT_EQ(Resolve("cuStreamWriteValue32", 9000, kPtds), "cuStreamWriteValue32_ptsz");
  EXPECT_EQ(Resolve("cuStreamWriteValue32", 12000, kPtds), "cuStreamWriteValue32_v2_ptsz");
  EXPECT_EQ(Resolve("cuStreamWriteValue32", 12000, kLegacy), "cuStreamWriteValue32_v2");
  // Entry points without a per-thread form ignore the flag.
  EXPECT_EQ(Resolve("cuMemAlloc", 12000, kPtds), "cuMemAlloc_v2");
}

TEST_F(ProcAddressTest, FindsLaunchCaptureAndGraphEntryPoints) {
  EXPECT_EQ(Resolve("cuLaunchKernel", 12000, kDefault), "cuLaunchKernel");
  EXPECT_EQ(Resolve("cuLaunchKernel", 12000, kPtds), "cuLaunchKernel_ptsz");
  EXPECT_EQ(Resolve("cuLaunchKernel", 6050, kPtds), "cuLaunchKernel");
  EXPECT_EQ(Resolve("cuLaunchKernelEx", 12000, kPtds), "cuLaunchKernelEx_ptsz");
  EXPECT_EQ(Resolve("cuLaunchCooperativeKernel", 12000, kPtds), "cuLaunchCooperativeKernel_ptsz");
  EXPECT_EQ(Resolve("cuStreamBeginCapture", 10000, kDefault), "cuStreamBeginCapture");
  EXPECT_EQ(Resolve("cuStreamBeginCapture", 12000, kDefault), "cuStreamBeginCapture_v2");
  EXPECT_EQ(Resolve("cuStreamBeginCapture", 12000, kPtds), "cuStreamBeginCapture_v2_ptsz");
  EXPECT_EQ(Resolve("cuStreamGetCaptureInfo", 11020, kDefault), "cuStreamGetCaptureInfo");
  EXPECT_EQ(Resolve("cuStreamGetCaptureInfo", 12000, kPtds), "cuStreamGetCaptureInfo_v2_ptsz");
  EXPECT_EQ(Resolve("cuStreamGetCaptureInfo", 13000, kDefault), "cuStreamGetCaptureInfo_v3");
  EXPECT_EQ(Resolve("cuStreamEndCapture", 13000, kPtds), "cuStreamEndCapture_ptsz");
  EXPECT_EQ(Resolve("cuGraphInstantiate", 10020, kDefault), "cuGraphInstantiate");
  EXPECT_EQ(Resolve("cuGraphInstantiate", 13000, kDefault), "cuGraphInstantiate_v2");
  EXPECT_EQ(Resolve("cuGraphInstantiateWithFlags", 13000, kDefault), "cuGraphInstantiateWithFlags");
  EXPECT_EQ(Resolve("cuGraphLaunch", 13000, kPtds), "cuGraphLaunch_ptsz");
  EXPECT_EQ(Resolve("cuModuleLoadData", 13000, kDefault), "cuModuleLoadData");
}

TEST_F(ProcAddressTest, UnknownSymbolsAndBadArguments) {
  CUdriverProcAddressQueryResult status{};
  EXPECT_EQ(Resolve("cuNoSuchFunction", 13000, kDefault, &status), "CUDA_ERROR_NOT_FOUND");
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  EXPECT_EQ(Resolve("cuTexObjectCreate", 13000, kDefault, &status), "CUDA_ERROR_NOT_FOUND");
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  EXPECT_EQ(Resolve("cuMemAlloc_v2", 13000, kDefault), "CUDA_ERROR_NOT_FOUND");   // base names
  EXPECT_EQ(Resolve("cuMemAlloc", 13010, kDefault), "CUDA_ERROR_INVALID_VALUE");  // > driver
  EXPECT_EQ(Resolve("cuMemAlloc", 13000, 4), "CUDA_ERROR_INVALID_VALUE");
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE,
                cuGetProcAddress_v2("cuInit", nullptr, 13000, 0, nullptr));
  // The CUDA 11.3 ABI, without the status.
  void* pfn = nullptr;
  CU_ASSERT(cuGetProcAddress("cuInit", &pfn, 13000, 0));
  EXPECT_EQ(pfn, Sym("cuInit"));
  const void* table = reinterpret_cast<const void*>(1);
  CUuuid id{};
  CU_EXPECT_ERR(CUDA_ERROR_NOT_SUPPORTED, cuGetExportTable(&table, &id));
}

TEST_F(ProcAddressTest, EveryRowResolvesToItsExportedFunction) {
  for (const Row& row : Rows()) {
    void* sym = Sym(row.exported.c_str());
    const cuuint64_t flags = row.suffix.empty() ? kLegacy : kPtds;
    void* pfn = nullptr;
    CUdriverProcAddressQueryResult status{};
    const CUresult r = cuGetProcAddress_v2(row.base.c_str(), &pfn, row.version, flags, &status);
    if (row.implemented) {
      ASSERT_NE(sym, nullptr) << row.exported;
      EXPECT_EQ(r, CUDA_SUCCESS) << row.exported;
      EXPECT_EQ(pfn, sym) << row.exported;
    } else {
      EXPECT_EQ(sym, nullptr) << row.exported;
      EXPECT_EQ(r, CUDA_ERROR_NOT_FOUND) << row.exported;
      EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND) << row.exported;
    }
  }
}

TEST(ProcAddressBeforeInit, WorksWithoutCuInit) {
  const int status = RunInChild([] {
    void* pfn = nullptr;
    CUdriverProcAddressQueryResult st{};
    CU_EXPECT(cuGetProcAddress_v2("cuInit", &pfn, 12000, 0, &st));
    auto init = reinterpret_cast<CUresult (*)(unsigned)>(pfn);
    CU_EXPECT(init(0));
    return 0;
  });
  EXPECT_TRUE(ExitedOk(status)) << status;
}

TEST(EntryPointTableTest, ExportsAreExactlyTheImplementedRowsAndTheControlFunctions) {
  std::set<std::string> expected;
  for (const Row& row : Rows()) {
    if (row.implemented) expected.insert(row.exported);
  }
  std::set<std::string> listed;
  for (int i = 0; fakecudaEntryPointName(i) != nullptr; ++i)
    listed.insert(fakecudaEntryPointName(i));
  EXPECT_EQ(listed, expected);
  for (const char* control :
       {"fakecudaChunkPhysAddr", "fakecudaPointerPhysAddr", "fakecudaChannelOf",
        "fakecudaChannelCount", "fakecudaCallCount", "fakecudaInjectFailure",
        "fakecudaLinkBusyUntilNs", "fakecudaEngineBusyUntilNs", "fakecudaKernelsRun",
        "fakecudaEntryPointName"}) {
    expected.insert(control);
  }
  FILE* nm = popen("nm -D --defined-only " FAKECUDA_LIBRARY_PATH " 2>/dev/null", "r");
  ASSERT_NE(nm, nullptr);
  std::set<std::string> exported;
  char line[512];
  while (std::fgets(line, sizeof(line), nm) != nullptr) {
    std::istringstream fields(line);
    std::string address, type, name;
    if (fields >> address >> type >> name) exported.insert(name);
  }
  const int rc = pclose(nm);
  if (exported.empty()) GTEST_SKIP() << "nm is not available (exit " << rc << ")";
  EXPECT_EQ(exported, expected);
}

TEST(EntryPointTableTest, VersionsMatchCudaTypedefs) {
  std::ifstream in(FAKECUDA_CUDA_TYPEDEFS_H);
  ASSERT_TRUE(in.good()) << FAKECUDA_CUDA_TYPEDEFS_H;
  std::stringstream text;
  text << in.rdbuf();
  const std::string header = text.str();
  std::map<std::string, std::set<std::string>> from_header;
  std::map<std::string, std::set<std::string>> from_table;
  for (const Row& row : Rows())
    from_table[row.base].insert(std::to_string(row.version) + row.suffix);
  const std::regex pfn(R"(PFN_(cu\w+?)_v(\d+)(_ptds|_ptsz)?\))");
  for (auto it = std::sregex_iterator(header.begin(), header.end(), pfn);
       it != std::sregex_iterator(); ++it) {
    const std::string base = (*it)[1];
    if (from_table.count(base) != 0) from_header[base].insert((*it)[2].str() + (*it)[3].str());
  }
  EXPECT_EQ(from_table, from_header);
}

}  // namespace
}  // namespace fakecuda_test

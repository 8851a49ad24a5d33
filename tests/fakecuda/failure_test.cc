// Injected failures and call counts.

#include "test_util.h"

namespace fakecuda_test {
namespace {

TEST(FailureTest, InjectedFailureChangesNothing) {
  InitPrimary();
  const unsigned long long calls0 = fakecudaCallCount("cuMemAlloc_v2");
  fakecudaInjectFailure("cuMemAlloc_v2", 2, CUDA_ERROR_OUT_OF_MEMORY);
  size_t free0 = 0;
  size_t total = 0;
  CU_ASSERT(cuMemGetInfo(&free0, &total));
  CUdeviceptr first = 0;
  CU_ASSERT(cuMemAlloc(&first, 1 << 20));
  CUdeviceptr second = 0xfeed;
  EXPECT_EQ(cuMemAlloc(&second, 1 << 20), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(second, 0xfeedu);  // untouched
  size_t free1 = 0;
  CU_ASSERT(cuMemGetInfo(&free1, &total));
  EXPECT_EQ(free0 - free1, 1u << 20);  // only the first allocation
  CUdeviceptr third = 0;
  CU_ASSERT(cuMemAlloc(&third, 1 << 20));
  EXPECT_EQ(fakecudaCallCount("cuMemAlloc_v2"), calls0 + 3);
  EXPECT_EQ(fakecudaCallCount("cuMemAlloc"), 0u);  // not exported by the fake
  EXPECT_EQ(fakecudaCallCount("nonsense"), 0u);

  // Any code, any entry point; unknown names are ignored.
  fakecudaInjectFailure("cuMemFree_v2", 1, CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(cuMemFree(first), CUDA_ERROR_ILLEGAL_ADDRESS);
  CU_ASSERT(cuMemFree(first));
  CU_ASSERT(cuMemFree(third));
  fakecudaInjectFailure("cuNoSuchThing", 1, 1);
}

TEST(FailureTest, FromTheEnvironment) {
  const int status = RunInChild([] {
    setenv("FAKECUDA_FAIL",
           "cuInit:1,cuMemAlloc_v2:2:CUDA_ERROR_INVALID_VALUE,cuStreamCreate:1:999", 1);
    EXPECT_EQ(cuInit(0), CUDA_ERROR_OUT_OF_MEMORY);  // the default code
    CU_EXPECT(cuInit(0));
    CUcontext ctx = nullptr;
    CU_EXPECT(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU_EXPECT(cuCtxSetCurrent(ctx));
    CUdeviceptr p = 0;
    CU_EXPECT(cuMemAlloc(&p, 4096));
    EXPECT_EQ(cuMemAlloc(&p, 4096), CUDA_ERROR_INVALID_VALUE);
    CUstream s = nullptr;
    EXPECT_EQ(cuStreamCreate(&s, 0), CUDA_ERROR_UNKNOWN);
    EXPECT_EQ(fakecudaCallCount("cuInit"), 2u);
    return 0;
  });
  EXPECT_TRUE(ExitedOk(status)) << status;

  const int bad = RunInChild([] {
    setenv("FAKECUDA_FAIL", "cuMemAlloc:1", 1);  // the v1 ABI: not exported by the fake
    return cuInit(0) == CUDA_ERROR_INVALID_VALUE ? 0 : 1;
  });
  EXPECT_TRUE(ExitedOk(bad)) << bad;
}

}  // namespace
}  // namespace fakecuda_test

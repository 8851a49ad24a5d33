// TPC masks at work: what a launch callback writes decides which SMs the probe kernel's blocks
// run on, per launch, and per upload for a graph's kernels; PTX probe kernels.

#include <algorithm>
#include <string>

#include "tpc_util.h"

namespace fakecuda_test {
namespace {

// Physical TPCs around the first mask word's end (31 is bit 31 of word 304) and at both ends; all
// live on the default layout.
const std::vector<int> kEightTpcs = {0, 7, 30, 31, 32, 40, 65, 71};

class TpcMaskTest : public ::testing::Test {
 protected:
  static constexpr unsigned kBlocks = 1000;

  void SetUp() override {
    InitPrimary();
    CU_ASSERT(kernels_.Load());
    CU_ASSERT(cuMemAlloc(&out_, kBlocks * 4));
    CU_ASSERT(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
    CU_ASSERT(table_.Get());
  }
  void TearDown() override {
    // Subscribers stay for the process: a disabled one is never called again.
    for (uint32_t h : handles_) EXPECT_EQ(0, table_.enable()(0, h, kLaunchDomain, kLaunchCbid));
    CU_EXPECT(cuCtxSynchronize());
    CU_EXPECT(cuStreamDestroy(stream_));
    CU_EXPECT(cuMemFree(out_));
    CU_EXPECT(cuModuleUnload(kernels_.module));
  }

  void Subscribe(Subscriber* sub) {
    uint32_t handle = 0;
    ASSERT_EQ(0, table_.subscribe()(&handle, &Subscriber::OnLaunch, sub));
    ASSERT_EQ(0, table_.enable()(1, handle, kLaunchDomain, kLaunchCbid));
    handles_.push_back(handle);
  }

  // Clears the output to ~0 (no SM has that id).
  void ClearOut() { ASSERT_EQ(CUDA_SUCCESS, cuMemsetD32(out_, ~0u, kBlocks)); }

  // Launches `f` (a probe) on `blocks` blocks and returns what it wrote.
  std::vector<uint32_t> RunProbe(CUfunction f, unsigned blocks = kBlocks) {
    ClearOut();
    EXPECT_EQ(CUDA_SUCCESS, Probe(f, stream_, out_, blocks));
    EXPECT_EQ(CUDA_SUCCESS, cuStreamSynchronize(stream_));
    return Words(out_, blocks);
  }

  // What a probe writes when its blocks are dealt round-robin over `sms`.
  static std::vector<uint32_t> RoundRobin(const std::vector<uint32_t>& sms,
                                          unsigned blocks = kBlocks) {
    std::vector<uint32_t> out(blocks);
    for (unsigned b = 0; b < blocks; ++b) out[b] = sms[b % sms.size()];
    return out;
  }

  Kernels kernels_;
  CUdeviceptr out_ = 0;
  CUstream stream_ = nullptr;
  CallbackTable table_;
  std::vector<uint32_t> handles_;
  // Subscribers outlive the test body: TearDown disables them.
  Subscriber sub_;
  Subscriber second_;
};

TEST_F(TpcMaskTest, WithoutACallbackTheProbeVisitsEverySm) {
  std::vector<uint32_t> all(kDefaultSms);
  for (int i = 0; i < kDefaultSms; ++i) all[i] = i;
  EXPECT_EQ(RunProbe(kernels_.probe, kDefaultSms), all);
  EXPECT_EQ(RunProbe(kernels_.probe), RoundRobin(all));
  // Blocks of a 3D grid are numbered bx + by*gx + bz*gx*gy.
  ClearOut();
  uint64_t ns = 0;
  void* params[] = {&out_, &ns};
  CU_ASSERT(cuLaunchKernel(kernels_.probe, 5, 4, 3, 1, 1, 1, 0, stream_, params, nullptr));
  CU_ASSERT(cuStreamSynchronize(stream_));
  EXPECT_EQ(Words(out_, 60), RoundRobin(all, 60));
  EXPECT_EQ(Words(out_, 61).back(), ~0u);  // 60 blocks
}

TEST_F(TpcMaskTest, DisabledTpcsKeepTheProbeOffTheirSms) {
  sub_.SetMask(MaskWords(kEightTpcs));
  Subscribe(&sub_);
  const std::vector<uint32_t> allowed = SmsWithout(kEightTpcs);
  ASSERT_EQ(allowed.size(), kDefaultSms - 16u);
  const std::vector<uint32_t> out = RunProbe(kernels_.probe);
  EXPECT_EQ(out, RoundRobin(allowed));
  EXPECT_EQ(std::set<uint32_t>(out.begin(), out.end()),
            std::set<uint32_t>(allowed.begin(), allowed.end()));
  for (int t : kEightTpcs) {
    for (uint32_t sm : SmsOfTpc(t)) EXPECT_EQ(std::count(out.begin(), out.end(), sm), 0) << sm;
  }
  EXPECT_EQ(sub_.calls.load(), 1);
  EXPECT_EQ(sub_.bad.load(), 0);
  EXPECT_EQ(sub_.thread, std::this_thread::get_id());  // inside the launch call
  // Without the enable bit the same words disable nothing; other kernels run as ever.
  sub_.SetMask(MaskWords(kEightTpcs), /*enable_bit=*/false);
  std::vector<uint32_t> all(kDefaultSms);
  for (int i = 0; i < kDefaultSms; ++i) all[i] = i;
  EXPECT_EQ(RunProbe(kernels_.probe), RoundRobin(all));
  CU_ASSERT(Fill(kernels_, stream_, out_, 9, 4));
  CU_ASSERT(cuStreamSynchronize(stream_));
  EXPECT_EQ(Words(out_, 4), std::vector<uint32_t>(4, 9));
  EXPECT_EQ(sub_.bad.load(), 0);
}

TEST_F(TpcMaskTest, Word304CoversTpcs0To31AndCountsOnlyWithTheEnableBitAtOffset0) {
  std::vector<uint32_t> all(kDefaultSms);
  for (int i = 0; i < kDefaultSms; ++i) all[i] = i;
  std::vector<int> first32(32);
  for (int t = 0; t < 32; ++t) first32[t] = t;
  // Bit 31 of word 304 is TPC 31, not an enable bit.
  sub_.SetMask({0xffffffffu, 0, 0, 0});
  Subscribe(&sub_);
  const std::vector<uint32_t> allowed = SmsWithout(first32);
  ASSERT_EQ(allowed.size(), kDefaultSms - 2u * (32 - 3));  // TPCs 3, 12 and 25 are dead
  EXPECT_EQ(RunProbe(kernels_.probe), RoundRobin(allowed));
  sub_.SetMask({0x80000000u, 0, 0, 0});
  EXPECT_EQ(RunProbe(kernels_.probe), RoundRobin(SmsWithout({31})));
  // The same words with bit 31 of the descriptor's word 0 left clear: no mask.
  sub_.SetMask({0xffffffffu, 0, 0, 0}, /*enable_bit=*/false);
  EXPECT_EQ(RunProbe(kernels_.probe), RoundRobin(all));
  sub_.SetMask({0x80000001u, 0, 0, 0x80000000u}, /*enable_bit=*/false);
  EXPECT_EQ(RunProbe(kernels_.probe), RoundRobin(all));
  // A later subscriber that clears the enable bit undoes the mask; one that sets it alone (with
  // zero words) disables nothing.
  sub_.SetMask(MaskWords({0, 1}));
  second_.SetMask(MaskWords({0, 1}), /*enable_bit=*/false);
  Subscribe(&second_);
  EXPECT_EQ(RunProbe(kernels_.probe), RoundRobin(all));
  second_.SetMask({0, 0, 0, 0});
  EXPECT_EQ(RunProbe(kernels_.probe), RoundRobin(all));
  EXPECT_EQ(sub_.calls.load(), 6);
  EXPECT_EQ(second_.calls.load(), 2);
  EXPECT_EQ(sub_.bad.load() + second_.bad.load(), 0);
}

TEST_F(TpcMaskTest, EverySubscriberIsCalledOnEveryLaunchEntryPoint) {
  sub_.SetMask(MaskWords({0, 1}));
  second_.SetMask(MaskWords({2}));  // the last writer's words are the mask
  Subscribe(&sub_);
  Subscribe(&second_);
  EXPECT_EQ(RunProbe(kernels_.probe), RoundRobin(SmsWithout({2})));
  uint64_t ns = 0;
  void* params[] = {&out_, &ns};
  CU_ASSERT(cuLaunchKernel_ptsz(kernels_.probe, 1, 1, 1, 1, 1, 1, 0, stream_, params, nullptr));
  CU_ASSERT(cuLaunchCooperativeKernel(kernels_.probe, 1, 1, 1, 1, 1, 1, 0, stream_, params));
  CU_ASSERT(cuLaunchCooperativeKernel_ptsz(kernels_.probe, 1, 1, 1, 1, 1, 1, 0, stream_, params));
  CUlaunchConfig config{};
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = config.blockDimY = config.blockDimZ = 1;
  config.hStream = stream_;
  CU_ASSERT(cuLaunchKernelEx(&config, kernels_.probe, params, nullptr));
  CU_ASSERT(cuLaunchKernelEx_ptsz(&config, kernels_.probe, params, nullptr));
  CU_ASSERT(cuStreamSynchronize(stream_));
  EXPECT_EQ(sub_.calls.load(), 6);
  EXPECT_EQ(second_.calls.load(), 6);
  // A refused launch calls nobody.
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE,
                cuLaunchKernel(kernels_.probe, 0, 1, 1, 1, 1, 1, 0, stream_, params, nullptr));
  EXPECT_EQ(sub_.calls.load(), 6);
  EXPECT_EQ(sub_.bad.load() + second_.bad.load(), 0);
}

TEST_F(TpcMaskTest, AKernelWithEveryTpcDisabledWritesNothingAndCompletes) {
  sub_.SetMask({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu});
  Subscribe(&sub_);
  testing::internal::CaptureStderr();
  const std::vector<uint32_t> out = RunProbe(kernels_.probe);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(out, std::vector<uint32_t>(kBlocks, ~0u));
  EXPECT_NE(err.find("fakecuda: a kernel was launched with every TPC disabled"), std::string::npos)
      << err;
  // Only the live TPCs' bits matter: disabling just those is the same.
  std::vector<int> live;
  for (int t = 0; t < 72; ++t) {
    if (kDefaultDeadTpcs.count(t) == 0) live.push_back(t);
  }
  sub_.SetMask(MaskWords(live));
  EXPECT_EQ(RunProbe(kernels_.probe), std::vector<uint32_t>(kBlocks, ~0u));
  live.pop_back();  // TPC 71 left: SMs 65 and 131
  sub_.SetMask(MaskWords(live));
  EXPECT_EQ(RunProbe(kernels_.probe, 4), (std::vector<uint32_t>{65, 131, 65, 131}));
}

TEST_F(TpcMaskTest, GraphKernelsTakeTheirMaskAtUploadAndKeepItForReplays) {
  sub_.SetMask(MaskWords({0}));
  Subscribe(&sub_);
  // Captured: no callback while capturing.
  CU_ASSERT(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_ASSERT(Probe(kernels_.probe, stream_, out_, kBlocks));
  CUgraph graph = nullptr;
  CU_ASSERT(cuStreamEndCapture(stream_, &graph));
  EXPECT_EQ(sub_.calls.load(), 0);
  CUgraphExec uploaded = nullptr;
  CUgraphExec launched = nullptr;
  CU_ASSERT(cuGraphInstantiateWithFlags(&uploaded, graph, 0));
  CU_ASSERT(cuGraphInstantiateWithFlags(&launched, graph, 0));
  sub_.SetMask(MaskWords({1}));
  CU_ASSERT(cuGraphUpload(uploaded, stream_));
  EXPECT_EQ(sub_.calls.load(), 1);
  sub_.SetMask(MaskWords({2}));
  for (int i = 0; i < 2; ++i) {
    ClearOut();
    CU_ASSERT(cuGraphLaunch(uploaded, stream_));
    CU_ASSERT(cuStreamSynchronize(stream_));
    EXPECT_EQ(Words(out_, kBlocks), RoundRobin(SmsWithout({1}))) << "replay " << i;
  }
  EXPECT_EQ(sub_.calls.load(), 1);
  // Never uploaded: the first launch uploads, with what the callback writes then.
  CU_ASSERT(cuGraphLaunch(launched, stream_));
  CU_ASSERT(cuStreamSynchronize(stream_));
  EXPECT_EQ(sub_.calls.load(), 2);
  sub_.SetMask(MaskWords({3, 4}));
  ClearOut();
  CU_ASSERT(cuGraphLaunch(launched, stream_));
  CU_ASSERT(cuStreamSynchronize(stream_));
  EXPECT_EQ(Words(out_, kBlocks), RoundRobin(SmsWithout({2})));
  EXPECT_EQ(sub_.calls.load(), 2);
  // Uploading again takes the new mask.
  CU_ASSERT(cuGraphUpload_ptsz(uploaded, stream_));
  EXPECT_EQ(sub_.calls.load(), 3);
  ClearOut();
  CU_ASSERT(cuGraphLaunch(uploaded, stream_));
  CU_ASSERT(cuStreamSynchronize(stream_));
  EXPECT_EQ(Words(out_, kBlocks), RoundRobin(SmsWithout({3, 4})));
  EXPECT_EQ(sub_.bad.load(), 0);
  for (CUgraphExec e : {uploaded, launched}) CU_ASSERT(cuGraphExecDestroy(e));
  CU_ASSERT(cuGraphDestroy(graph));
}

TEST_F(TpcMaskTest, AnUploadCallsTheCallbackOncePerKernelNode) {
  Subscribe(&sub_);
  CUgraph graph = nullptr;
  CU_ASSERT(cuGraphCreate(&graph, 0));
  uint64_t ns = 0;
  void* params[] = {&out_, &ns};
  CUDA_KERNEL_NODE_PARAMS p{};
  p.func = kernels_.probe;
  p.gridDimX = p.gridDimY = p.gridDimZ = p.blockDimX = p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = params;
  CUgraphNode a = nullptr;
  CUgraphNode b = nullptr;
  CUgraphNode empty = nullptr;
  CU_ASSERT(cuGraphAddKernelNode(&a, graph, nullptr, 0, &p));
  CU_ASSERT(cuGraphAddEmptyNode(&empty, graph, &a, 1));
  CU_ASSERT(cuGraphAddKernelNode(&b, graph, &empty, 1, &p));
  EXPECT_EQ(sub_.calls.load(), 0);
  CUgraphExec exec = nullptr;
  CUDA_GRAPH_INSTANTIATE_PARAMS ip{};
  ip.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
  ip.hUploadStream = stream_;
  CU_ASSERT(cuGraphInstantiateWithParams(&exec, graph, &ip));
  EXPECT_EQ(sub_.calls.load(), 2);  // instantiated with an upload
  CU_ASSERT(cuGraphLaunch(exec, stream_));
  CU_ASSERT(cuStreamSynchronize(stream_));
  EXPECT_EQ(sub_.calls.load(), 2);
  CU_ASSERT(cuGraphUpload(exec, stream_));
  EXPECT_EQ(sub_.calls.load(), 4);
  EXPECT_EQ(sub_.bad.load(), 0);
  CU_ASSERT(cuGraphExecDestroy(exec));
  CU_ASSERT(cuGraphDestroy(graph));
}

constexpr char kPtx[] = R"(//
// Generated by NVIDIA NVVM Compiler
.version 8.8
.target sm_90
.address_size 64

.visible .entry missile_no_smid(
	.param .u64 missile_no_smid_param_0
)
{
	ret;
}

	// .globl	missile_sm_probe
.visible .entry missile_sm_probe(
	.param .u64 missile_sm_probe_param_0,
	.param .u64 missile_sm_probe_param_1
)
{
	.reg .b32 	%r<3>;
	.reg .b64 	%rd<8>;
	mov.u32 	%r1, %smid;
	mov.u64 	%rd1, %globaltimer;
	ret;
}
)";

TEST_F(TpcMaskTest, APtxEntryThatReadsSmidRunsAsTheProbe) {
  CUmodule ptx = nullptr;
  CU_ASSERT(cuModuleLoadData(&ptx, kPtx));
  CUfunction probe = nullptr;
  CU_ASSERT(cuModuleGetFunction(&probe, ptx, "missile_sm_probe"));
  CUfunction again = nullptr;
  CU_ASSERT(cuModuleGetFunction(&again, ptx, "missile_sm_probe"));
  EXPECT_EQ(probe, again);
  CUfunction f = nullptr;
  CU_EXPECT_ERR(CUDA_ERROR_NOT_SUPPORTED, cuModuleGetFunction(&f, ptx, "missile_no_smid"));
  CU_EXPECT_ERR(CUDA_ERROR_NOT_FOUND, cuModuleGetFunction(&f, ptx, "missile_sm"));
  CU_EXPECT_ERR(CUDA_ERROR_NOT_FOUND, cuModuleGetFunction(&f, ptx, "fakecuda_sm_probe"));
  sub_.SetMask(MaskWords(kEightTpcs));
  Subscribe(&sub_);
  EXPECT_EQ(RunProbe(probe), RoundRobin(SmsWithout(kEightTpcs)));
  // Text without an entry or a version is no module.
  CUmodule none = nullptr;
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadData(&none, ".version 8.8\n.target sm_90\n"));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadData(&none, ".entry f(\n) { %smid; }\n"));
  CU_ASSERT(cuModuleUnload(ptx));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_HANDLE, Probe(probe, stream_, out_, 1));
}

TEST_F(TpcMaskTest, TheProbesOutputMustHoldEveryBlock) {
  // The last 64 bytes of a mapping inside a larger reservation: room for 16 blocks.
  const CUmemAllocationProp prop = DeviceProp(0, /*exportable=*/false);
  const CUmemAccessDesc rw = ReadWrite();
  CUmemGenericAllocationHandle h = 0;
  CUdeviceptr va = 0;
  CU_ASSERT(cuMemCreate(&h, kTwoMiB, &prop, 0));
  CU_ASSERT(cuMemAddressReserve(&va, 2 * kTwoMiB, 0, 0, 0));
  CU_ASSERT(cuMemMap(va, kTwoMiB, 0, h, 0));
  CU_ASSERT(cuMemSetAccess(va, kTwoMiB, &rw, 1));
  CUdeviceptr small = va + kTwoMiB - 64;
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, Probe(kernels_.probe, stream_, small, 17));
  CU_ASSERT(Probe(kernels_.probe, stream_, small, 16));
  uint64_t ns = 0;
  void* missing[] = {&small, nullptr};
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE,
                cuLaunchKernel(kernels_.probe, 1, 1, 1, 1, 1, 1, 0, stream_, missing, nullptr));
  uint32_t local[4] = {};
  auto bad = reinterpret_cast<CUdeviceptr>(local);
  void* params[] = {&bad, &ns};
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE,
                cuLaunchKernel(kernels_.probe, 1, 1, 1, 1, 1, 1, 0, stream_, params, nullptr));
  CU_ASSERT(cuStreamSynchronize(stream_));
  EXPECT_EQ(Words(small, 16),
            RoundRobin({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, 16));
  CU_ASSERT(cuMemUnmap(va, kTwoMiB));
  CU_ASSERT(cuMemAddressFree(va, 2 * kTwoMiB));
  CU_ASSERT(cuMemRelease(h));
}

TEST_F(TpcMaskTest, SubscribersMayChangeWhileOtherThreadsLaunch) {
  sub_.SetMask(MaskWords({5}));
  CUcontext ctx = nullptr;
  CU_ASSERT(cuCtxGetCurrent(&ctx));
  std::atomic<bool> stop{false};
  std::vector<std::thread> launchers;
  for (int i = 0; i < 3; ++i) {
    launchers.emplace_back([&] {
      cuCtxSetCurrent(ctx);
      while (!stop.load()) {
        EXPECT_EQ(CUDA_SUCCESS, Spin(kernels_, stream_, 0));
      }
    });
  }
  uint32_t handle = 0;
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(0, table_.subscribe()(&handle, &Subscriber::OnLaunch, &sub_));
    handles_.push_back(handle);
    EXPECT_EQ(0, table_.enable()(1, handle, kLaunchDomain, kLaunchCbid));
    if (i % 2 == 0) {
      EXPECT_EQ(0, table_.enable()(0, handle, kLaunchDomain, kLaunchCbid));
    }
    usleep(200);
  }
  stop = true;
  for (std::thread& t : launchers) t.join();
  CU_ASSERT(cuStreamSynchronize(stream_));
  EXPECT_GT(sub_.calls.load(), 0);
  EXPECT_EQ(sub_.bad.load(), 0);
}

}  // namespace
}  // namespace fakecuda_test

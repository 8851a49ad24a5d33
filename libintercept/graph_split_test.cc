// The graph splitter in process, over the driver test double (tests/fakecuda): graphs of every
// node type the double runs, split into pieces, launched piece by piece through a counting
// admitter, and compared byte for byte with the original graph's launch.

#include "graph_split.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <memory>
#include <vector>

#include "kernel_util.h"
#include "spdlog/sinks/null_sink.h"
#include "spdlog/spdlog.h"

namespace missile::shim {
namespace {

using fakecuda_test::Kernels;
using fakecuda_test::LogEntries;

// Admits every piece at once, counting them; reports the durations a test sets.
class CountingAdmitter : public PieceAdmitter {
 public:
  CUresult Admit(CUstream, bool, uint64_t key, absl::FunctionRef<CUresult()> launch) override {
    admitted.push_back(key);
    return launch();
  }
  std::optional<uint64_t> Learned(uint64_t key) override {
    if (learn_all_ns != 0) return learn_all_ns;
    return std::nullopt;
  }
  bool splits() const override { return split; }
  uint64_t bound_ns() const override { return bound; }
  uint64_t prior_ns() const override { return prior; }

  std::vector<uint64_t> admitted;
  bool split = true;
  uint64_t bound = 100'000;
  uint64_t prior = 60'000;  // over half the bound: every work node its own piece
  uint64_t learn_all_ns = 0;
};

class GraphSplitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fakecuda_test::InitPrimary();
    driver_ = dlopen(FAKECUDA_LIBRARY_PATH, RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(driver_, nullptr);
    api_.Resolve(driver_);
    ASSERT_EQ(CUDA_SUCCESS, kernels_.Load());
    ASSERT_EQ(CUDA_SUCCESS, cuMemAlloc(&log_, 4096));
    ASSERT_EQ(CUDA_SUCCESS, cuMemsetD32(log_, 0, 1024));
    appends_.emplace(&kernels_, log_);
    ASSERT_EQ(CUDA_SUCCESS, cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
    ASSERT_EQ(CUDA_SUCCESS, cuStreamCreate(&other_, CU_STREAM_NON_BLOCKING));
    ASSERT_EQ(CUDA_SUCCESS, cuGraphCreate(&graph_, 0));
    logger_ = std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>());
    splitter_ = std::make_unique<GraphSplitter>(api_, logger_.get());
  }
  void TearDown() override {
    splitter_.reset();
    EXPECT_EQ(CUDA_SUCCESS, cuCtxSynchronize());
    cuGraphDestroy(graph_);
    cuStreamDestroy(stream_);
    cuStreamDestroy(other_);
    cuMemFree(log_);
    if (driver_ != nullptr) dlclose(driver_);
  }

  CUgraphNode Append(CUgraph g, uint32_t value, std::vector<CUgraphNode> deps, uint64_t ns = 0) {
    return appends_->Add(g, value, std::move(deps), ns);
  }

  CUgraphExec Instantiate(uint64_t flags = 0) {
    CUgraphExec exec = nullptr;
    EXPECT_EQ(CUDA_SUCCESS, cuGraphInstantiateWithFlags(&exec, graph_, flags));
    splitter_->Instantiated(exec, graph_, flags, admitter_);
    return exec;
  }

  // The log after `launch`, then cleared.
  std::vector<uint32_t> Run(const std::function<CUresult()>& launch) {
    EXPECT_EQ(CUDA_SUCCESS, launch());
    EXPECT_EQ(CUDA_SUCCESS, cuCtxSynchronize());
    std::vector<uint32_t> entries = LogEntries(log_);
    EXPECT_EQ(CUDA_SUCCESS, cuMemsetD32(log_, 0, 1024));
    return entries;
  }

  void* driver_ = nullptr;
  DriverApi api_;
  Kernels kernels_;
  CUdeviceptr log_ = 0;
  CUstream stream_ = nullptr;
  CUstream other_ = nullptr;
  CUgraph graph_ = nullptr;
  std::optional<fakecuda_test::AppendNodes> appends_;  // once the log exists
  std::shared_ptr<spdlog::logger> logger_;
  CountingAdmitter admitter_;
  std::unique_ptr<GraphSplitter> splitter_;
};

TEST_F(GraphSplitTest, EveryNodeTypeKeepsItsMeaningAndTheLaunchIsByteForByteTheOriginals) {
  // A diamond of appends, a child graph, a memset, a host node, an event record and wait, and
  // an empty join.
  CUgraphNode a = Append(graph_, 1, {});
  CUgraphNode b = Append(graph_, 2, {a});
  CUgraphNode c = Append(graph_, 3, {a});
  CUgraph child = nullptr;
  ASSERT_EQ(CUDA_SUCCESS, cuGraphCreate(&child, 0));
  CUgraphNode c1 = Append(child, 40, {});
  Append(child, 41, {c1});
  CUgraphNode sub = nullptr;
  ASSERT_EQ(CUDA_SUCCESS, cuGraphAddChildGraphNode(&sub, graph_, &b, 1, child));
  cuGraphDestroy(child);
  CUdeviceptr word = 0;
  ASSERT_EQ(CUDA_SUCCESS, cuMemAlloc(&word, 4));
  CUDA_MEMSET_NODE_PARAMS ms{};
  ms.dst = word;
  ms.value = 0x5a5a5a5au;
  ms.elementSize = 4;
  ms.width = ms.height = 1;
  CUgraphNode set = nullptr;
  ASSERT_EQ(CUDA_SUCCESS, cuGraphAddMemsetNode(&set, graph_, &c, 1, &ms, nullptr));
  static std::atomic<int> host_runs{0};
  host_runs = 0;
  CUDA_HOST_NODE_PARAMS hp{};
  hp.fn = [](void*) { host_runs.fetch_add(1); };
  CUgraphNode host = nullptr;
  ASSERT_EQ(CUDA_SUCCESS, cuGraphAddHostNode(&host, graph_, &set, 1, &hp));
  CUevent event = nullptr;
  ASSERT_EQ(CUDA_SUCCESS, cuEventCreate(&event, CU_EVENT_DISABLE_TIMING));
  CUgraphNode rec = nullptr;
  ASSERT_EQ(CUDA_SUCCESS, cuGraphAddEventRecordNode(&rec, graph_, &host, 1, event));
  CUgraphNode wait = nullptr;
  ASSERT_EQ(CUDA_SUCCESS, cuGraphAddEventWaitNode(&wait, graph_, &rec, 1, event));
  CUgraphNode join = nullptr;
  const CUgraphNode both[] = {sub, wait};
  ASSERT_EQ(CUDA_SUCCESS, cuGraphAddEmptyNode(&join, graph_, both, 2));
  Append(graph_, 9, {join});

  CUgraphExec exec = Instantiate();
  ASSERT_EQ(splitter_->split_graphs(), 1u);
  const std::vector<CUgraphExec> pieces = splitter_->PiecesOf(exec);
  EXPECT_EQ(pieces.size(), 6u);  // one per work node: 1, 2, 3, the child graph, the memset, 9

  const std::vector<uint32_t> whole = Run([&] { return cuGraphLaunch(exec, stream_); });
  EXPECT_EQ(whole, (std::vector<uint32_t>{1, 2, 3, 40, 41, 9}));
  EXPECT_EQ(host_runs.load(), 1);
  const std::vector<uint32_t> split =
      Run([&] { return *splitter_->Launch(exec, stream_, false, &admitter_); });
  EXPECT_EQ(split, whole);
  EXPECT_EQ(host_runs.load(), 2);
  EXPECT_EQ(fakecuda_test::Words(word, 1)[0], 0x5a5a5a5au);
  EXPECT_EQ(admitter_.admitted.size(), pieces.size());
  EXPECT_EQ(CUDA_SUCCESS, cuEventQuery(event));
  // Unpaced (no admitter): the original, as one launch.
  EXPECT_EQ(Run([&] { return *splitter_->Launch(exec, stream_, false, nullptr); }), whole);
  EXPECT_EQ(admitter_.admitted.size(), pieces.size());

  splitter_->Destroyed(exec);
  EXPECT_FALSE(splitter_->Tracks(exec));
  EXPECT_EQ(CUDA_SUCCESS, cuGraphExecDestroy(exec));
  cuEventDestroy(event);
  cuMemFree(word);
}

TEST_F(GraphSplitTest, EdgesInsideAPieceSurviveWhereTheNodesWereAddedOutOfOrder) {
  // Added as 3, 2, 1 with edges 1 -> 2 -> 3: only the edges make 1, 2, 3 the order.
  CUgraphNode n3 = Append(graph_, 3, {});
  CUgraphNode n2 = Append(graph_, 2, {});
  CUgraphNode n1 = Append(graph_, 1, {});
  CUgraphNode n4 = Append(graph_, 4, {});
  ASSERT_EQ(CUDA_SUCCESS, cuGraphAddDependencies_v2(graph_, &n1, &n2, nullptr, 1));
  ASSERT_EQ(CUDA_SUCCESS, cuGraphAddDependencies_v2(graph_, &n2, &n3, nullptr, 1));
  ASSERT_EQ(CUDA_SUCCESS, cuGraphAddDependencies_v2(graph_, &n3, &n4, nullptr, 1));
  admitter_.prior = 40'000;  // two nodes per piece: {1, 2}, {3, 4}
  CUgraphExec exec = Instantiate();
  ASSERT_EQ(splitter_->PiecesOf(exec).size(), 2u);
  const std::vector<uint32_t> whole = Run([&] { return cuGraphLaunch(exec, stream_); });
  EXPECT_EQ(whole, (std::vector<uint32_t>{1, 2, 3, 4}));
  EXPECT_EQ(Run([&] { return *splitter_->Launch(exec, stream_, false, &admitter_); }), whole);
  splitter_->Destroyed(exec);
  cuGraphExecDestroy(exec);
}

TEST_F(GraphSplitTest, LaunchesOnAnotherStreamWaitForTheLastLaunchToEnd) {
  Append(graph_, 1, {}, 20 * fakecuda_test::kMs);
  Append(graph_, 2, {});
  CUgraphExec exec = Instantiate();
  ASSERT_EQ(splitter_->PiecesOf(exec).size(), 2u);
  ASSERT_EQ(CUDA_SUCCESS, *splitter_->Launch(exec, stream_, false, &admitter_));
  // Without the wait, the second launch's first piece would run beside the first launch's.
  ASSERT_EQ(CUDA_SUCCESS, *splitter_->Launch(exec, other_, false, &admitter_));
  ASSERT_EQ(CUDA_SUCCESS, cuCtxSynchronize());
  EXPECT_EQ(LogEntries(log_), (std::vector<uint32_t>{1, 2, 1, 2}));
  splitter_->Destroyed(exec);
  cuGraphExecDestroy(exec);
}

TEST_F(GraphSplitTest, WhatCannotBeSplitLaunchesWholeAndIsCounted) {
  Append(graph_, 1, {});
  CUgraphNode last = Append(graph_, 2, {});
  // Device launch.
  CUgraphExec device = Instantiate(CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH);
  EXPECT_FALSE(splitter_->Tracks(device));
  EXPECT_EQ(splitter_->fallbacks(GraphSplitter::Fallback::kDeviceLaunch), 1u);
  EXPECT_FALSE(splitter_->Launch(device, stream_, false, &admitter_).has_value());
  cuGraphExecDestroy(device);
  // One piece.
  admitter_.prior = 1'000;
  CUgraphExec small = Instantiate();
  EXPECT_FALSE(splitter_->Tracks(small));
  EXPECT_EQ(splitter_->fallbacks(GraphSplitter::Fallback::kOnePiece), 1u);
  cuGraphExecDestroy(small);
  admitter_.prior = 60'000;
  // A conditional node, in a child graph.
  CUgraph child = nullptr;
  ASSERT_EQ(CUDA_SUCCESS, cuGraphCreate(&child, 0));
  CUgraphNodeParams cond{};
  cond.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  CUgraphNode cnode = nullptr;
  ASSERT_EQ(CUDA_SUCCESS, cuGraphAddNode(&cnode, child, nullptr, nullptr, 0, &cond));
  CUgraphNode sub = nullptr;
  ASSERT_EQ(CUDA_SUCCESS, cuGraphAddChildGraphNode(&sub, graph_, &last, 1, child));
  cuGraphDestroy(child);
  CUgraphExec conditional = Instantiate();
  EXPECT_FALSE(splitter_->Tracks(conditional));
  EXPECT_EQ(splitter_->fallbacks(GraphSplitter::Fallback::kConditional), 1u);
  cuGraphExecDestroy(conditional);
  ASSERT_EQ(CUDA_SUCCESS, cuGraphDestroyNode(sub));
  // Memory nodes.
  CUgraphNodeParams alloc{};
  alloc.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  CUgraphNode anode = nullptr;
  ASSERT_EQ(CUDA_SUCCESS, cuGraphAddNode(&anode, graph_, nullptr, nullptr, 0, &alloc));
  CUgraphExec memory = Instantiate();
  EXPECT_FALSE(splitter_->Tracks(memory));
  EXPECT_EQ(splitter_->fallbacks(GraphSplitter::Fallback::kMemoryNodes), 1u);
  cuGraphExecDestroy(memory);
  EXPECT_EQ(splitter_->split_graphs(), 0u);
  EXPECT_NE(splitter_->Summary().find("1 conditional nodes"), std::string::npos);
}

TEST_F(GraphSplitTest, AnInstanceChangedAfterInstantiationLaunchesWholeWithItsChange) {
  CUgraphNode first = Append(graph_, 1, {});
  Append(graph_, 2, {first});
  CUgraphExec exec = Instantiate();
  ASSERT_TRUE(splitter_->Tracks(exec));
  // Change the first node's value to 7 in the instance.
  const CUDA_KERNEL_NODE_PARAMS p = appends_->Params(7);
  ASSERT_EQ(CUDA_SUCCESS, cuGraphExecKernelNodeSetParams(exec, first, &p));
  splitter_->Changed(exec);
  const size_t before = admitter_.admitted.size();
  EXPECT_EQ(Run([&] { return *splitter_->Launch(exec, stream_, false, &admitter_); }),
            (std::vector<uint32_t>{7, 2}));
  EXPECT_EQ(admitter_.admitted.size(), before + 1);  // one item, still paced
  EXPECT_EQ(splitter_->fallbacks(GraphSplitter::Fallback::kChanged), 1u);
  splitter_->Destroyed(exec);
  cuGraphExecDestroy(exec);
}

TEST_F(GraphSplitTest, PiecesAreRebuiltFromWhatTheyWereMeasuredToTake) {
  for (uint32_t i = 0; i < 8; ++i) Append(graph_, i, {});
  CUgraphExec exec = Instantiate();
  ASSERT_EQ(splitter_->PiecesOf(exec).size(), 8u);
  std::vector<uint32_t> expected(8);
  for (uint32_t i = 0; i < 8; ++i) expected[i] = i;
  // Each piece measured at 10 us: 10 of them fit the 100 us bound, so one piece is left.
  admitter_.learn_all_ns = 10'000;
  for (uint64_t i = 0; i < GraphSplitter::kReplanEvery; ++i) {
    EXPECT_EQ(Run([&] { return *splitter_->Launch(exec, stream_, false, &admitter_); }), expected);
  }
  EXPECT_EQ(splitter_->rebuilds(), 1u);
  EXPECT_EQ(splitter_->PiecesOf(exec).size(), 1u);
  EXPECT_EQ(Run([&] { return *splitter_->Launch(exec, stream_, false, &admitter_); }), expected);
  splitter_->Destroyed(exec);
  cuGraphExecDestroy(exec);
}

// A BE that its LS tenants' budgets released launches its graphs whole, as one paced item, and
// piece by piece again once it is held back again.
TEST_F(GraphSplitTest, AnAdmitterThatDoesNotSplitNowGetsTheWholeGraphAsOneItem) {
  CUgraphNode first = Append(graph_, 1, {}, 20 * fakecuda_test::kMs);
  CUgraphNode second = Append(graph_, 2, {first});
  Append(graph_, 3, {second});
  CUgraphExec exec = Instantiate();
  ASSERT_EQ(splitter_->PiecesOf(exec).size(), 3u);
  auto launch = [&] { return *splitter_->Launch(exec, stream_, false, &admitter_); };
  const std::vector<uint32_t> expected{1, 2, 3};
  size_t before = admitter_.admitted.size();
  EXPECT_EQ(Run(launch), expected);
  EXPECT_EQ(admitter_.admitted.size(), before + 3);
  admitter_.split = false;
  before = admitter_.admitted.size();
  EXPECT_EQ(Run(launch), expected);
  EXPECT_EQ(admitter_.admitted.size(), before + 1);
  EXPECT_EQ(splitter_->whole_launches(), 1u);
  // Launched whole on another stream, it still waits for the last launch's end.
  admitter_.split = true;
  ASSERT_EQ(CUDA_SUCCESS, *splitter_->Launch(exec, stream_, false, &admitter_));
  admitter_.split = false;
  ASSERT_EQ(CUDA_SUCCESS, *splitter_->Launch(exec, other_, false, &admitter_));
  admitter_.split = true;
  ASSERT_EQ(CUDA_SUCCESS, *splitter_->Launch(exec, stream_, false, &admitter_));
  ASSERT_EQ(CUDA_SUCCESS, cuCtxSynchronize());
  EXPECT_EQ(LogEntries(log_), (std::vector<uint32_t>{1, 2, 3, 1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(splitter_->whole_launches(), 2u);
  EXPECT_NE(splitter_->Summary().find("2 whole while released"), std::string::npos)
      << splitter_->Summary();
  splitter_->Destroyed(exec);
  cuGraphExecDestroy(exec);
}

TEST_F(GraphSplitTest, ALaunchIntoACaptureRecordsTheOriginal) {
  Append(graph_, 1, {});
  Append(graph_, 2, {});
  CUgraphExec exec = Instantiate();
  ASSERT_EQ(CUDA_SUCCESS, cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  const size_t before = admitter_.admitted.size();
  EXPECT_EQ(CUDA_SUCCESS, *splitter_->Launch(exec, stream_, false, &admitter_));
  CUgraph captured = nullptr;
  ASSERT_EQ(CUDA_SUCCESS, cuStreamEndCapture(stream_, &captured));
  EXPECT_EQ(admitter_.admitted.size(), before);  // nothing admitted: nothing ran
  CUgraphExec replay = nullptr;
  ASSERT_EQ(CUDA_SUCCESS, cuGraphInstantiateWithFlags(&replay, captured, 0));
  EXPECT_EQ(Run([&] { return cuGraphLaunch(replay, stream_); }), (std::vector<uint32_t>{1, 2}));
  cuGraphExecDestroy(replay);
  cuGraphDestroy(captured);
  splitter_->Destroyed(exec);
  cuGraphExecDestroy(exec);
}

}  // namespace
}  // namespace missile::shim

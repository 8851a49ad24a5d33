// Stream capture and graphs: what is recorded, replaying it, and the errors.

#include <optional>
#include <thread>

#include "kernel_util.h"

namespace fakecuda_test {
namespace {

class GraphTest : public ::testing::Test {
 protected:
  void SetUp() override {
    InitPrimary();
    CU_ASSERT(kernels_.Load());
    CU_ASSERT(cuMemAlloc(&log_, 4096));
    CU_ASSERT(cuMemsetD32(log_, 0, 1024));
    CU_ASSERT(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
  }
  void TearDown() override {
    CU_EXPECT(cuCtxSynchronize());
    CU_EXPECT(cuStreamDestroy(stream_));
    CU_EXPECT(cuMemFree(log_));
    CU_EXPECT(cuModuleUnload(kernels_.module));
  }

  CUstreamCaptureStatus Status(CUstream s) {
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    EXPECT_EQ(CUDA_SUCCESS, cuStreamIsCapturing(s, &status));
    return status;
  }

  Kernels kernels_;
  CUdeviceptr log_ = 0;
  CUstream stream_ = nullptr;
};

TEST_F(GraphTest, CaptureRecordsTheWorkAndEachLaunchReplaysItInOrder) {
  constexpr size_t kWords = 4;
  CUdeviceptr acc = 0;
  CUdeviceptr ones = 0;
  CUdeviceptr copy = 0;
  CU_ASSERT(cuMemAlloc(&acc, kWords * 4));
  CU_ASSERT(cuMemAlloc(&ones, kWords * 4));
  CU_ASSERT(cuMemAlloc(&copy, kWords * 4));
  CU_ASSERT(cuMemsetD32(acc, 0, kWords));
  CU_ASSERT(cuMemsetD32(ones, 1, kWords));
  void* pinned = nullptr;
  CU_ASSERT(cuMemAllocHost(&pinned, kWords * 4));
  auto* src = static_cast<uint32_t*>(pinned);
  for (size_t i = 0; i < kWords; ++i) src[i] = 10 + i;
  const uint64_t run_before = fakecudaKernelsRun(0);

  CU_ASSERT(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  EXPECT_EQ(Status(stream_), CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CU_ASSERT(Append(kernels_, stream_, log_, 1, 5 * kMs));
  CU_ASSERT(Add(kernels_, stream_, acc, ones, kWords));
  CU_ASSERT(cuMemcpyHtoDAsync(copy, pinned, kWords * 4, stream_));
  CU_ASSERT(cuMemsetD32Async(ones + 12, 5, 1, stream_));  // ones[3] = 5 from then on
  CU_ASSERT(cuStreamWriteValue32(stream_, log_ + 4 * 1000, 77, 0));
  CU_ASSERT(Append(kernels_, stream_, log_, 2));
  // Nothing ran.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(fakecudaKernelsRun(0), run_before);
  EXPECT_EQ(LogEntries(log_), std::vector<uint32_t>{});
  EXPECT_EQ(Words(acc, kWords), std::vector<uint32_t>(kWords, 0));
  EXPECT_EQ(Words(ones, kWords), std::vector<uint32_t>(kWords, 1));
  EXPECT_EQ(reinterpret_cast<const uint32_t*>(log_)[1000], 0u);

  CUgraph graph = nullptr;
  CU_ASSERT(cuStreamEndCapture(stream_, &graph));
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(Status(stream_), CU_STREAM_CAPTURE_STATUS_NONE);
  size_t count = 0;
  CU_ASSERT(cuGraphGetNodes(graph, nullptr, &count));
  EXPECT_EQ(count, 6u);
  std::vector<CUgraphNode> nodes(8, reinterpret_cast<CUgraphNode>(1));
  count = nodes.size();
  CU_ASSERT(cuGraphGetNodes(graph, nodes.data(), &count));
  EXPECT_EQ(count, 6u);
  EXPECT_NE(nodes[5], nullptr);
  EXPECT_EQ(nodes[6], nullptr);

  CUgraphExec exec = nullptr;
  CU_ASSERT(cuGraphInstantiateWithFlags(&exec, graph, 0));
  CU_ASSERT(cuGraphDestroy(graph));  // the instance does not need it
  CU_ASSERT(cuGraphLaunch(exec, stream_));
  CU_ASSERT(cuStreamSynchronize(stream_));
  EXPECT_EQ(LogEntries(log_), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(Words(acc, kWords), std::vector<uint32_t>(kWords, 1));
  EXPECT_EQ(Words(copy, kWords), (std::vector<uint32_t>{10, 11, 12, 13}));
  EXPECT_EQ(reinterpret_cast<const uint32_t*>(log_)[1000], 77u);

  // The second launch reads memory as it is then; an append in between is ordered around it.
  for (size_t i = 0; i < kWords; ++i) src[i] = 20 + i;
  CU_ASSERT(cuGraphLaunch(exec, stream_));
  CU_ASSERT(Append(kernels_, stream_, log_, 3));
  CU_ASSERT(cuGraphLaunch(exec, stream_));
  CU_ASSERT(cuStreamSynchronize(stream_));
  EXPECT_EQ(LogEntries(log_), (std::vector<uint32_t>{1, 2, 1, 2, 3, 1, 2}));
  EXPECT_EQ(Words(acc, kWords), (std::vector<uint32_t>{3, 3, 3, 11}));
  EXPECT_EQ(Words(copy, kWords), (std::vector<uint32_t>{20, 21, 22, 23}));
  EXPECT_EQ(fakecudaKernelsRun(0) - run_before, 3u * 3u + 1u);
  CU_ASSERT(cuGraphExecDestroy(exec));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_HANDLE, cuGraphLaunch(exec, stream_));
  CU_ASSERT(cuMemFreeHost(pinned));
  for (CUdeviceptr p : {acc, ones, copy}) CU_ASSERT(cuMemFree(p));
}

TEST_F(GraphTest, GraphKernelsTakeTheirTimeOnTheEngine) {
  CU_ASSERT(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  for (int i = 0; i < 3; ++i) CU_ASSERT(Spin(kernels_, stream_, 40 * kMs));
  CUgraph graph = nullptr;
  CU_ASSERT(cuStreamEndCapture(stream_, &graph));
  CUgraphExec exec = nullptr;
  CU_ASSERT(cuGraphInstantiateWithFlags(&exec, graph, CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD));
  CUevent start = nullptr;
  CUevent stop = nullptr;
  CU_ASSERT(cuEventCreate(&start, 0));
  CU_ASSERT(cuEventCreate(&stop, 0));
  CU_ASSERT(cuEventRecord(start, stream_));
  CU_ASSERT(cuGraphLaunch(exec, stream_));
  CU_ASSERT(cuEventRecord(stop, stream_));
  EXPECT_EQ(cuEventQuery(stop), CUDA_ERROR_NOT_READY);
  CU_ASSERT(cuEventSynchronize(stop));
  float ms = 0;
  CU_ASSERT(cuEventElapsedTime(&ms, start, stop));
  EXPECT_GE(ms, 119.0f);
  EXPECT_LT(ms, 1000.0f);
  for (CUevent e : {start, stop}) CU_ASSERT(cuEventDestroy(e));
  CU_ASSERT(cuGraphExecDestroy(exec));
  CU_ASSERT(cuGraphDestroy(graph));
}

TEST_F(GraphTest, CaptureInfoReportsTheCaptureAndItsLastNode) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  cuuint64_t id = 0;
  CU_ASSERT(cuStreamGetCaptureInfo(stream_, &status, &id));
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_NONE);
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuStreamGetCaptureInfo(stream_, nullptr, &id));

  CU_ASSERT(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_RELAXED));
  CU_ASSERT(cuStreamGetCaptureInfo(stream_, &status, &id));
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  EXPECT_NE(id, 0u);
  CUgraph graph = nullptr;
  const CUgraphNode* deps = nullptr;
  const CUgraphEdgeData* edges = nullptr;
  size_t num_deps = 99;
  cuuint64_t id2 = 0;
  CU_ASSERT(cuStreamGetCaptureInfo_v2(stream_, &status, &id2, &graph, &deps, &num_deps));
  EXPECT_EQ(id2, id);
  EXPECT_NE(graph, nullptr);
  EXPECT_EQ(num_deps, 0u);
  CU_ASSERT(Append(kernels_, stream_, log_, 1));
  CU_ASSERT(
      cuStreamGetCaptureInfo_v3(stream_, &status, nullptr, nullptr, &deps, &edges, &num_deps));
  ASSERT_EQ(num_deps, 1u);
  ASSERT_NE(deps, nullptr);
  ASSERT_NE(edges, nullptr);
  EXPECT_EQ(edges[0].type, CU_GRAPH_DEPENDENCY_TYPE_DEFAULT);
  CUgraphNode nodes[1] = {};
  size_t count = 1;
  CU_ASSERT(cuGraphGetNodes(graph, nodes, &count));
  EXPECT_EQ(deps[0], nodes[0]);
  // Instantiating a graph that is still being captured is refused.
  CUgraphExec exec = nullptr;
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuGraphInstantiateWithFlags(&exec, graph, 0));
  CUgraph ended = nullptr;
  CU_ASSERT(cuStreamEndCapture(stream_, &ended));
  EXPECT_EQ(ended, graph);
  // A new capture has another id.
  CU_ASSERT(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_ASSERT(cuStreamGetCaptureInfo_ptsz(stream_, &status, &id2));
  EXPECT_NE(id2, id);
  CUgraph empty = nullptr;
  CU_ASSERT(cuStreamEndCapture(stream_, &empty));
  for (CUgraph g : {graph, empty}) CU_ASSERT(cuGraphDestroy(g));
}

TEST_F(GraphTest, PerThreadStreamCapturesAndEventsJoinWithinTheCapture) {
  CUevent e = nullptr;
  CU_ASSERT(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  // The old ABI (global mode) on this thread's default stream.
  CU_ASSERT(cuStreamBeginCapture_ptsz(nullptr));
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CU_ASSERT(cuStreamIsCapturing_ptsz(nullptr, &status));
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  EXPECT_EQ(Status(nullptr), CU_STREAM_CAPTURE_STATUS_NONE);  // the legacy stream does not
  // A refused launch records nothing.
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuLaunchKernel_ptsz(kernels_.append, 1, 1, 1, 1, 1, 1, 0,
                                                              nullptr, nullptr, nullptr));
  uint32_t value = 1;
  uint64_t ns = 0;
  void* params[] = {&log_, &value, &ns};
  CU_ASSERT(cuLaunchKernel_ptsz(kernels_.append, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
  CU_ASSERT(cuEventRecord_ptsz(e, nullptr));
  CU_ASSERT(cuStreamWaitEvent_ptsz(nullptr, e, 0));  // a join within the capture
  // Forking the capture into another stream is not modelled.
  CU_EXPECT_ERR(CUDA_ERROR_NOT_SUPPORTED, cuStreamWaitEvent(stream_, e, 0));
  auto host_fn = [](void* arg) { *static_cast<int*>(arg) += 1; };
  int host_runs = 0;
  CU_ASSERT(cuLaunchHostFunc_ptsz(nullptr, host_fn, &host_runs));
  CUgraph graph = nullptr;
  CU_ASSERT(cuStreamEndCapture_ptsz(nullptr, &graph));
  EXPECT_EQ(host_runs, 0);
  // The pre-11.4 ABIs report no error node and an empty log.
  CUgraphExec exec = nullptr;
  CUgraphNode error_node = reinterpret_cast<CUgraphNode>(1);
  char log[16] = "unchanged";
  CU_ASSERT(cuGraphInstantiate(&exec, graph, &error_node, log, sizeof(log)));
  EXPECT_EQ(error_node, nullptr);
  EXPECT_STREQ(log, "");
  CUgraphExec exec2 = nullptr;
  CU_ASSERT(cuGraphInstantiate_v2(&exec2, graph, nullptr, nullptr, 0));
  CU_ASSERT(cuGraphLaunch_ptsz(exec, nullptr));
  CU_ASSERT(cuGraphLaunch(exec2, stream_));
  CU_ASSERT(cuStreamSynchronize_ptsz(nullptr));
  CU_ASSERT(cuStreamSynchronize(stream_));
  EXPECT_EQ(LogEntries(log_), (std::vector<uint32_t>{1, 1}));
  EXPECT_EQ(host_runs, 2);
  // After the capture, the event is an ordinary one again once recorded normally.
  CU_ASSERT(cuEventRecord(e, stream_));
  CU_ASSERT(cuStreamWaitEvent(nullptr, e, 0));
  for (CUgraphExec x : {exec, exec2}) CU_ASSERT(cuGraphExecDestroy(x));
  CU_ASSERT(cuGraphDestroy(graph));
  CU_ASSERT(cuEventDestroy(e));
}

TEST_F(GraphTest, IllegalCallsInvalidateTheCaptureAndOtherErrors) {
  // The legacy stream cannot capture; an unknown stream or mode is refused.
  CU_EXPECT_ERR(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                cuStreamBeginCapture_v2(nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_EXPECT_ERR(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                cuStreamBeginCapture_v2(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_EXPECT_ERR(
      CUDA_ERROR_INVALID_HANDLE,
      cuStreamBeginCapture_v2(reinterpret_cast<CUstream>(&log_), CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE,
                cuStreamBeginCapture_v2(stream_, static_cast<CUstreamCaptureMode>(7)));
  CUgraph graph = nullptr;
  CU_EXPECT_ERR(CUDA_ERROR_ILLEGAL_STATE, cuStreamEndCapture(stream_, &graph));

  CU_ASSERT(cuStreamBeginCapture(stream_));
  CU_EXPECT_ERR(CUDA_ERROR_ILLEGAL_STATE,
                cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuStreamEndCapture(stream_, nullptr));
  CU_ASSERT(Append(kernels_, stream_, log_, 1));
  // Synchronising with (or querying) a capturing stream invalidates the capture.
  CU_EXPECT_ERR(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuStreamSynchronize(stream_));
  EXPECT_EQ(Status(stream_), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  CU_EXPECT_ERR(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, Append(kernels_, stream_, log_, 2));
  CU_EXPECT_ERR(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuMemsetD32Async(log_ + 8, 1, 1, stream_));
  graph = reinterpret_cast<CUgraph>(1);
  CU_EXPECT_ERR(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(stream_, &graph));
  EXPECT_EQ(graph, nullptr);
  EXPECT_EQ(Status(stream_), CU_STREAM_CAPTURE_STATUS_NONE);
  CU_ASSERT(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_EXPECT_ERR(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuStreamQuery(stream_));
  CU_EXPECT_ERR(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(stream_, &graph));
  // The stream works normally again, and nothing captured ever ran.
  CU_ASSERT(Append(kernels_, stream_, log_, 3));
  CU_ASSERT(cuStreamSynchronize(stream_));
  EXPECT_EQ(LogEntries(log_), std::vector<uint32_t>{3});

  // Bad graph and instance handles.
  CUgraphExec exec = nullptr;
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuGraphInstantiateWithFlags(&exec, nullptr, 0));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_HANDLE,
                cuGraphInstantiateWithFlags(&exec, reinterpret_cast<CUgraph>(&log_), 0));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuGraphLaunch(nullptr, stream_));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_HANDLE,
                cuGraphLaunch(reinterpret_cast<CUgraphExec>(&log_), stream_));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuGraphDestroy(nullptr));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuGraphExecDestroy(nullptr));
  CU_ASSERT(cuStreamBeginCapture_v2(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_ASSERT(cuStreamEndCapture(stream_, &graph));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuGraphInstantiateWithFlags(&exec, graph, 1ull << 20));
  size_t count = 5;
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuGraphGetNodes(graph, nullptr, nullptr));
  CU_ASSERT(cuGraphGetNodes(graph, nullptr, &count));
  EXPECT_EQ(count, 0u);
  CU_ASSERT(cuGraphDestroy(graph));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_HANDLE, cuGraphDestroy(graph));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_HANDLE, cuGraphGetNodes(graph, nullptr, &count));
}

}  // namespace
}  // namespace fakecuda_test

namespace fakecuda_test {
namespace {

// A graph built node by node: appends of `value` to a log, so the order they ran in shows.
class GraphBuildTest : public GraphTest {
 protected:
  void SetUp() override {
    GraphTest::SetUp();
    appends_.emplace(&kernels_, log_);
    CU_ASSERT(cuGraphCreate(&graph_, 0));
  }
  void TearDown() override {
    CU_EXPECT(cuCtxSynchronize());
    CU_EXPECT(cuGraphDestroy(graph_));
    GraphTest::TearDown();
  }

  CUgraphNode AppendNode(CUgraph g, uint32_t value, std::vector<CUgraphNode> deps) {
    return appends_->Add(g, value, std::move(deps));
  }

  std::optional<AppendNodes> appends_;  // once the log exists
  CUgraph graph_ = nullptr;
};

TEST_F(GraphBuildTest, RunsNodesInATopologicalOrderOfTheirDependencies) {
  // 3 -> 1 -> 2, and 4 alone; nodes added as 2's dependency first.
  CUgraphNode three = AppendNode(graph_, 3, {});
  CUgraphNode one = AppendNode(graph_, 1, {three});
  AppendNode(graph_, 2, {one});
  AppendNode(graph_, 4, {});
  size_t edges = 0;
  CU_ASSERT(cuGraphGetEdges_v2(graph_, nullptr, nullptr, nullptr, &edges));
  EXPECT_EQ(edges, 2u);
  CUgraphExec exec = nullptr;
  CU_ASSERT(cuGraphInstantiateWithFlags(&exec, graph_, 0));
  CU_ASSERT(cuGraphLaunch(exec, stream_));
  CU_ASSERT(cuStreamSynchronize(stream_));
  EXPECT_EQ(LogEntries(log_), (std::vector<uint32_t>{3, 1, 2, 4}));
  CU_ASSERT(cuGraphExecDestroy(exec));
}

TEST_F(GraphBuildTest, ClonesFindTheirNodesAndLoseDestroyedOnesWithTheirEdges) {
  CUgraphNode a = AppendNode(graph_, 1, {});
  CUgraphNode b = AppendNode(graph_, 2, {a});
  AppendNode(graph_, 3, {b});
  CUgraph clone = nullptr;
  CU_ASSERT(cuGraphClone(&clone, graph_));
  CUgraphNode b_in_clone = nullptr;
  CU_ASSERT(cuGraphNodeFindInClone(&b_in_clone, b, clone));
  EXPECT_NE(b_in_clone, b);
  CUgraphNodeType type{};
  CU_ASSERT(cuGraphNodeGetType(b_in_clone, &type));
  EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_KERNEL);
  CU_ASSERT(cuGraphDestroyNode(b_in_clone));
  size_t nodes = 0;
  size_t edges = 0;
  CU_ASSERT(cuGraphGetNodes(clone, nullptr, &nodes));
  CU_ASSERT(cuGraphGetEdges_v2(clone, nullptr, nullptr, nullptr, &edges));
  EXPECT_EQ(nodes, 2u);
  EXPECT_EQ(edges, 0u);
  // The original is untouched.
  CU_ASSERT(cuGraphGetEdges_v2(graph_, nullptr, nullptr, nullptr, &edges));
  EXPECT_EQ(edges, 2u);
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuGraphNodeFindInClone(&b_in_clone, b, graph_));
  CU_ASSERT(cuGraphDestroy(clone));
}

TEST_F(GraphBuildTest, ChildGraphsMemsetsHostAndEventNodesRun) {
  CUgraph child = nullptr;
  CU_ASSERT(cuGraphCreate(&child, 0));
  AppendNode(child, 7, {});
  AppendNode(child, 8, {});
  CUgraphNode first = AppendNode(graph_, 1, {});
  CUgraphNode sub = nullptr;
  CU_ASSERT(cuGraphAddChildGraphNode(&sub, graph_, &first, 1, child));
  CU_ASSERT(cuGraphDestroy(child));  // the node holds its own copy
  CUgraph embedded = nullptr;
  CU_ASSERT(cuGraphChildGraphNodeGetGraph(sub, &embedded));
  size_t count = 0;
  CU_ASSERT(cuGraphGetNodes(embedded, nullptr, &count));
  EXPECT_EQ(count, 2u);
  CUdeviceptr word = 0;
  CU_ASSERT(cuMemAlloc(&word, 4));
  CUDA_MEMSET_NODE_PARAMS ms{};
  ms.dst = word;
  ms.value = 0xabcd1234u;
  ms.elementSize = 4;
  ms.width = 1;
  ms.height = 1;
  CUgraphNode set = nullptr;
  CU_ASSERT(cuGraphAddMemsetNode(&set, graph_, &sub, 1, &ms, nullptr));
  static std::atomic<int> host_runs{0};
  host_runs = 0;
  CUDA_HOST_NODE_PARAMS hp{};
  hp.fn = [](void*) { host_runs.fetch_add(1); };
  CUgraphNode host = nullptr;
  CU_ASSERT(cuGraphAddHostNode(&host, graph_, &set, 1, &hp));
  CUevent event = nullptr;
  CU_ASSERT(cuEventCreate(&event, CU_EVENT_DISABLE_TIMING));
  CUgraphNode rec = nullptr;
  CU_ASSERT(cuGraphAddEventRecordNode(&rec, graph_, &host, 1, event));
  CUgraphExec exec = nullptr;
  CU_ASSERT(cuGraphInstantiateWithFlags(&exec, graph_, 0));
  CU_ASSERT(cuGraphLaunch(exec, stream_));
  CU_ASSERT(cuStreamSynchronize(stream_));
  EXPECT_EQ(CUDA_SUCCESS, cuEventQuery(event));  // recorded by the graph
  EXPECT_EQ(LogEntries(log_), (std::vector<uint32_t>{1, 7, 8}));
  EXPECT_EQ(Words(word, 1)[0], 0xabcd1234u);
  EXPECT_EQ(host_runs.load(), 1);
  CU_ASSERT(cuGraphExecDestroy(exec));
  CU_ASSERT(cuEventDestroy(event));
  CU_ASSERT(cuMemFree(word));
}

TEST_F(GraphBuildTest, ExecKernelParamsAndUpdatesChangeWhatLaterLaunchesRun) {
  CUgraphNode a = AppendNode(graph_, 1, {});
  CUgraphExec exec = nullptr;
  CU_ASSERT(cuGraphInstantiateWithFlags(&exec, graph_, CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY));
  cuuint64_t flags = 0;
  CU_ASSERT(cuGraphExecGetFlags(exec, &flags));
  EXPECT_EQ(flags, uint64_t{CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY});
  const CUDA_KERNEL_NODE_PARAMS p = appends_->Params(5);
  CU_ASSERT(cuGraphExecKernelNodeSetParams(exec, a, &p));
  CU_ASSERT(cuGraphLaunch(exec, stream_));
  // Update from a graph of the same shape.
  CUgraph other = nullptr;
  CU_ASSERT(cuGraphCreate(&other, 0));
  AppendNode(other, 6, {});
  CUgraphExecUpdateResultInfo info{};
  CU_ASSERT(cuGraphExecUpdate(exec, other, &info));
  EXPECT_EQ(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
  CU_ASSERT(cuGraphLaunch(exec, stream_));
  // Another shape is refused.
  AppendNode(other, 9, {});
  EXPECT_EQ(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, cuGraphExecUpdate(exec, other, &info));
  CU_ASSERT(cuGraphLaunch(exec, stream_));
  CU_ASSERT(cuStreamSynchronize(stream_));
  EXPECT_EQ(LogEntries(log_), (std::vector<uint32_t>{5, 6, 6}));
  CU_ASSERT(cuGraphExecDestroy(exec));
  CU_ASSERT(cuGraphDestroy(other));
}

TEST_F(GraphBuildTest, NodesTheFakeCannotRunAreKeptAsTypedNodes) {
  CUgraphNodeParams params{};
  params.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  CUgraphNode cond = nullptr;
  CU_ASSERT(cuGraphAddNode(&cond, graph_, nullptr, nullptr, 0, &params));
  CUgraphNodeType type{};
  CU_ASSERT(cuGraphNodeGetType(cond, &type));
  EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_CONDITIONAL);
  params.type = CU_GRAPH_NODE_TYPE_KERNEL;
  EXPECT_EQ(CUDA_ERROR_NOT_SUPPORTED, cuGraphAddNode(&cond, graph_, nullptr, nullptr, 0, &params));
  // A node of another graph cannot be a dependency.
  CUgraph other = nullptr;
  CU_ASSERT(cuGraphCreate(&other, 0));
  CUgraphNode empty = nullptr;
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, cuGraphAddEmptyNode(&empty, other, &cond, 1));
  CU_ASSERT(cuGraphDestroy(other));
}

TEST(CaptureModeTest, EachThreadExchangesItsOwnMode) {
  InitPrimary();
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  CU_ASSERT(cuThreadExchangeStreamCaptureMode(&mode));
  EXPECT_EQ(mode, CU_STREAM_CAPTURE_MODE_GLOBAL);  // the default
  std::thread([] {
    CUstreamCaptureMode other = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    EXPECT_EQ(CUDA_SUCCESS, cuThreadExchangeStreamCaptureMode(&other));
    EXPECT_EQ(other, CU_STREAM_CAPTURE_MODE_GLOBAL);
  }).join();
  mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  CU_ASSERT(cuThreadExchangeStreamCaptureMode(&mode));
  EXPECT_EQ(mode, CU_STREAM_CAPTURE_MODE_RELAXED);
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuThreadExchangeStreamCaptureMode(nullptr));
  mode = static_cast<CUstreamCaptureMode>(7);
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuThreadExchangeStreamCaptureMode(&mode));
}

}  // namespace
}  // namespace fakecuda_test

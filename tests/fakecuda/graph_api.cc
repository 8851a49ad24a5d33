// Entry points: stream capture and graphs (graphs.h).
//
// Capture is linear, on one stream: the operations listed in graphs.h issued on a capturing
// stream become nodes in issue order. Capturing the legacy default stream is refused, as by the
// driver; per-thread default streams can capture. Capture modes are accepted and not enforced
// (no call elsewhere is refused because some stream captures).

#include <algorithm>
#include <utility>

#include "entry_points.h"
#include "fake_state.h"

namespace fakecuda {
namespace {

constexpr DefaultStream kLegacy = DefaultStream::kLegacy;
constexpr DefaultStream kPerThread = DefaultStream::kPerThread;

using StreamPtr = std::shared_ptr<Stream>;

bool IsLegacyStream(CUstream h, DefaultStream mode) {
  return h == CU_STREAM_LEGACY || (h == nullptr && mode == kLegacy);
}

CUresult BeginCapture(CUstream h, CUstreamCaptureMode capture_mode, DefaultStream mode) {
  if (capture_mode != CU_STREAM_CAPTURE_MODE_GLOBAL &&
      capture_mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  StreamPtr s;
  if (CUresult r = State().streams().Resolve(h, mode, &s); r != CUDA_SUCCESS) return r;
  if (IsLegacyStream(h, mode)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  GraphManager& graphs = State().graphs();
  std::shared_ptr<Graph> graph = graphs.CreateGraph(/*captured=*/true);
  const CUgraph handle = graph->handle();
  if (CUresult r = s->BeginCapture(std::move(graph), graphs.NextCaptureId()); r != CUDA_SUCCESS) {
    graphs.DestroyGraph(handle);
    return r;
  }
  return CUDA_SUCCESS;
}

CUresult EndCapture(CUstream h, CUgraph* out, DefaultStream mode) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  StreamPtr s;
  if (CUresult r = State().streams().Resolve(h, mode, &s); r != CUDA_SUCCESS) return r;
  std::shared_ptr<Graph> graph;
  const CUresult r = s->EndCapture(&graph);
  if (r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) {
    State().graphs().DestroyGraph(graph->handle());
    *out = nullptr;
    return r;
  }
  if (r != CUDA_SUCCESS) return r;
  *out = graph->handle();
  return CUDA_SUCCESS;
}

CUresult IsCapturing(CUstream h, CUstreamCaptureStatus* status, DefaultStream mode) {
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  StreamPtr s;
  if (CUresult r = State().streams().Resolve(h, mode, &s); r != CUDA_SUCCESS) return r;
  *status = s->Capture().status;
  return CUDA_SUCCESS;
}

// Every output but `status` is optional and written only while a capture is active or
// invalidated. The dependencies are the last captured node (none before the first); the arrays
// stay valid until the next operation is captured.
CUresult GetCaptureInfo(CUstream h, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
                        const CUgraphNode** deps, const CUgraphEdgeData** edges, size_t* num_deps,
                        DefaultStream mode) {
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  StreamPtr s;
  if (CUresult r = State().streams().Resolve(h, mode, &s); r != CUDA_SUCCESS) return r;
  const Stream::CaptureInfo info = s->Capture();
  *status = info.status;
  if (info.status == CU_STREAM_CAPTURE_STATUS_NONE) return CUDA_SUCCESS;
  if (id != nullptr) *id = info.id;
  if (graph != nullptr) *graph = info.graph->handle();
  size_t count = 0;
  const CUgraphNode* tail = info.graph->Tail(&count);
  if (deps != nullptr) *deps = tail;
  if (num_deps != nullptr) *num_deps = count;
  if (edges != nullptr) {
    static const CUgraphEdgeData kDefaultEdge{};  // every captured edge is a plain one
    *edges = count != 0 ? &kDefaultEdge : nullptr;
  }
  return CUDA_SUCCESS;
}

CUresult Instantiate(CUgraphExec* out, CUgraph graph, CUgraphNode* error_node, char* log,
                     size_t log_size) {
  if (error_node != nullptr) *error_node = nullptr;
  if (log != nullptr && log_size > 0) log[0] = '\0';
  return State().graphs().Instantiate(graph, 0, out);
}

// The first launch of an instance never uploaded uploads it (its kernels' TPC masks).
CUresult GraphLaunch(CUgraphExec handle, CUstream h, DefaultStream mode) {
  std::shared_ptr<GraphExec> exec;
  if (CUresult r = State().graphs().LookupExec(handle, &exec); r != CUDA_SUCCESS) return r;
  StreamPtr s;
  if (CUresult r = State().streams().Resolve(h, mode, &s); r != CUDA_SUCCESS) return r;
  exec->Upload(State().launch_callbacks(), /*first_only=*/true);
  for (GraphOp& op : exec->Ops()) {
    if (CUresult r = s->Submit(std::move(op), CU_GRAPH_NODE_TYPE_KERNEL); r != CUDA_SUCCESS) {
      return r;
    }
  }
  return CUDA_SUCCESS;
}

CUresult InstantiateWithParams(CUgraphExec* out, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS* p,
                               DefaultStream mode) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  p->hErrNode_out = nullptr;
  p->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
  constexpr cuuint64_t kKnown =
      CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
      CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
  if ((p->flags & ~kKnown) != 0) return CUDA_ERROR_INVALID_VALUE;
  if ((p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) != 0) {
    StreamPtr s;
    if (CUresult r = State().streams().Resolve(p->hUploadStream, mode, &s); r != CUDA_SUCCESS) {
      return r;
    }
  }
  if (CUresult r = State().graphs().Instantiate(graph, p->flags, out); r != CUDA_SUCCESS) return r;
  if ((p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) != 0) {
    std::shared_ptr<GraphExec> exec;
    if (State().graphs().LookupExec(*out, &exec) == CUDA_SUCCESS) {
      exec->Upload(State().launch_callbacks(), /*first_only=*/false);
    }
  }
  p->result_out = CUDA_GRAPH_INSTANTIATE_SUCCESS;
  return CUDA_SUCCESS;
}

// What an upload does here: the kernels take their TPC masks from the launch callback.
CUresult Upload(CUgraphExec handle, CUstream h, DefaultStream mode) {
  std::shared_ptr<GraphExec> exec;
  if (CUresult r = State().graphs().LookupExec(handle, &exec); r != CUDA_SUCCESS) return r;
  StreamPtr s;
  if (CUresult r = State().streams().Resolve(h, mode, &s); r != CUDA_SUCCESS) return r;
  exec->Upload(State().launch_callbacks(), /*first_only=*/false);
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace fakecuda

using fakecuda::kLegacy;
using fakecuda::kPerThread;
using fakecuda::State;

extern "C" {

// The CUDA 10.0 ABI, without a mode: global mode.
CUresult cuStreamBeginCapture(CUstream hStream) {
  FAKECUDA_ENTER(cuStreamBeginCapture);
  return fakecuda::BeginCapture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, kLegacy);
}

CUresult cuStreamBeginCapture_ptsz(CUstream hStream) {
  FAKECUDA_ENTER(cuStreamBeginCapture_ptsz);
  return fakecuda::BeginCapture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, kPerThread);
}

CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) {
  FAKECUDA_ENTER(cuStreamBeginCapture_v2);
  return fakecuda::BeginCapture(hStream, mode, kLegacy);
}

CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode) {
  FAKECUDA_ENTER(cuStreamBeginCapture_v2_ptsz);
  return fakecuda::BeginCapture(hStream, mode, kPerThread);
}

CUresult cuStreamEndCapture(CUstream hStream, CUgraph* phGraph) {
  FAKECUDA_ENTER(cuStreamEndCapture);
  return fakecuda::EndCapture(hStream, phGraph, kLegacy);
}

CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph* phGraph) {
  FAKECUDA_ENTER(cuStreamEndCapture_ptsz);
  return fakecuda::EndCapture(hStream, phGraph, kPerThread);
}

CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus* captureStatus) {
  FAKECUDA_ENTER(cuStreamIsCapturing);
  return fakecuda::IsCapturing(hStream, captureStatus, kLegacy);
}

CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus* captureStatus) {
  FAKECUDA_ENTER(cuStreamIsCapturing_ptsz);
  return fakecuda::IsCapturing(hStream, captureStatus, kPerThread);
}

CUresult cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus* captureStatus_out,
                                cuuint64_t* id_out) {
  FAKECUDA_ENTER(cuStreamGetCaptureInfo);
  return fakecuda::GetCaptureInfo(hStream, captureStatus_out, id_out, nullptr, nullptr, nullptr,
                                  nullptr, kLegacy);
}

CUresult cuStreamGetCaptureInfo_ptsz(CUstream hStream, CUstreamCaptureStatus* captureStatus_out,
                                     cuuint64_t* id_out) {
  FAKECUDA_ENTER(cuStreamGetCaptureInfo_ptsz);
  return fakecuda::GetCaptureInfo(hStream, captureStatus_out, id_out, nullptr, nullptr, nullptr,
                                  nullptr, kPerThread);
}

CUresult cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus* captureStatus_out,
                                   cuuint64_t* id_out, CUgraph* graph_out,
                                   const CUgraphNode** dependencies_out,
                                   size_t* numDependencies_out) {
  FAKECUDA_ENTER(cuStreamGetCaptureInfo_v2);
  return fakecuda::GetCaptureInfo(hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                                  nullptr, numDependencies_out, kLegacy);
}

CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream, CUstreamCaptureStatus* captureStatus_out,
                                        cuuint64_t* id_out, CUgraph* graph_out,
                                        const CUgraphNode** dependencies_out,
                                        size_t* numDependencies_out) {
  FAKECUDA_ENTER(cuStreamGetCaptureInfo_v2_ptsz);
  return fakecuda::GetCaptureInfo(hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                                  nullptr, numDependencies_out, kPerThread);
}

CUresult cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus* captureStatus_out,
                                   cuuint64_t* id_out, CUgraph* graph_out,
                                   const CUgraphNode** dependencies_out,
                                   const CUgraphEdgeData** edgeData_out,
                                   size_t* numDependencies_out) {
  FAKECUDA_ENTER(cuStreamGetCaptureInfo_v3);
  return fakecuda::GetCaptureInfo(hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                                  edgeData_out, numDependencies_out, kLegacy);
}

CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream, CUstreamCaptureStatus* captureStatus_out,
                                        cuuint64_t* id_out, CUgraph* graph_out,
                                        const CUgraphNode** dependencies_out,
                                        const CUgraphEdgeData** edgeData_out,
                                        size_t* numDependencies_out) {
  FAKECUDA_ENTER(cuStreamGetCaptureInfo_v3_ptsz);
  return fakecuda::GetCaptureInfo(hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                                  edgeData_out, numDependencies_out, kPerThread);
}

// Both pre-11.4 ABIs report no error node and an empty log.
CUresult cuGraphInstantiate(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode,
                            char* logBuffer, size_t bufferSize) {
  FAKECUDA_ENTER(cuGraphInstantiate);
  return fakecuda::Instantiate(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

CUresult cuGraphInstantiate_v2(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode,
                               char* logBuffer, size_t bufferSize) {
  FAKECUDA_ENTER(cuGraphInstantiate_v2);
  return fakecuda::Instantiate(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

// The flags are accepted and have no effect.
CUresult cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph,
                                     unsigned long long flags) {
  FAKECUDA_ENTER(cuGraphInstantiateWithFlags);
  constexpr unsigned long long kKnown =
      CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
      CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
  if ((flags & ~kKnown) != 0) return CUDA_ERROR_INVALID_VALUE;
  return State().graphs().Instantiate(hGraph, flags, phGraphExec);
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  FAKECUDA_ENTER(cuGraphLaunch);
  return fakecuda::GraphLaunch(hGraphExec, hStream, kLegacy);
}

CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  FAKECUDA_ENTER(cuGraphLaunch_ptsz);
  return fakecuda::GraphLaunch(hGraphExec, hStream, kPerThread);
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
  FAKECUDA_ENTER(cuGraphExecDestroy);
  return State().graphs().DestroyExec(hGraphExec);
}

CUresult cuGraphDestroy(CUgraph hGraph) {
  FAKECUDA_ENTER(cuGraphDestroy);
  return State().graphs().DestroyGraph(hGraph);
}

// With nodes NULL, the node count; else the first *numNodes nodes, the rest of the array set to
// NULL, and *numNodes the number written.
CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode* nodes, size_t* numNodes) {
  FAKECUDA_ENTER(cuGraphGetNodes);
  if (numNodes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<fakecuda::Graph> graph;
  if (CUresult r = State().graphs().LookupGraph(hGraph, &graph); r != CUDA_SUCCESS) return r;
  const size_t size = graph->size();
  if (nodes == nullptr) {
    *numNodes = size;
    return CUDA_SUCCESS;
  }
  const size_t written = std::min(*numNodes, size);
  graph->Nodes(nodes, written);
  for (size_t i = written; i < *numNodes; ++i) nodes[i] = nullptr;
  *numNodes = written;
  return CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithParams(CUgraphExec* phGraphExec, CUgraph hGraph,
                                      CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams) {
  FAKECUDA_ENTER(cuGraphInstantiateWithParams);
  return fakecuda::InstantiateWithParams(phGraphExec, hGraph, instantiateParams, kLegacy);
}

CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* phGraphExec, CUgraph hGraph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams) {
  FAKECUDA_ENTER(cuGraphInstantiateWithParams_ptsz);
  return fakecuda::InstantiateWithParams(phGraphExec, hGraph, instantiateParams, kPerThread);
}

CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream) {
  FAKECUDA_ENTER(cuGraphUpload);
  return fakecuda::Upload(hGraphExec, hStream, kLegacy);
}

CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  FAKECUDA_ENTER(cuGraphUpload_ptsz);
  return fakecuda::Upload(hGraphExec, hStream, kPerThread);
}

// The calling thread's capture mode is kept and exchanged; like every capture mode here, it is
// not enforced (see above).
CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  FAKECUDA_ENTER(cuThreadExchangeStreamCaptureMode);
  static thread_local CUstreamCaptureMode t_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  if (mode == nullptr ||
      (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL && *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
       *mode != CU_STREAM_CAPTURE_MODE_RELAXED)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::swap(*mode, t_mode);
  return CUDA_SUCCESS;
}

CUresult cuGraphExecGetFlags(CUgraphExec hGraphExec, cuuint64_t* flags) {
  FAKECUDA_ENTER(cuGraphExecGetFlags);
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<fakecuda::GraphExec> exec;
  if (CUresult r = State().graphs().LookupExec(hGraphExec, &exec); r != CUDA_SUCCESS) return r;
  *flags = exec->flags();
  return CUDA_SUCCESS;
}

}  // extern "C"

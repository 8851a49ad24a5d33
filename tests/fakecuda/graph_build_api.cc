// Entry points: graphs built node by node, read back, cloned and pruned, and executable graphs
// changed after instantiation (graphs.h).

#include <algorithm>

#include "entry_points.h"
#include "fake_state.h"

namespace fakecuda {
namespace {

using GraphPtr = std::shared_ptr<Graph>;

CUresult AddNode(CUgraph h, CUgraphNodeType type, GraphOp op, GraphPtr child,
                 const CUgraphNode* deps, size_t num_deps, CUgraphNode* out) {
  GraphPtr graph;
  if (CUresult r = State().graphs().LookupGraph(h, &graph); r != CUDA_SUCCESS) return r;
  return graph->AddNode(type, std::move(op), std::move(child), deps, num_deps, out);
}

// The device of the current context (kernels of a graph run on the device it is made on).
CUresult CurrentDevice(int* device) {
  Context* ctx = nullptr;
  if (CUresult r = State().contexts().Current(&ctx); r != CUDA_SUCCESS) return r;
  *device = ctx->device;
  return CUDA_SUCCESS;
}

CUresult KernelNodeTask(const CUDA_KERNEL_NODE_PARAMS* p, KernelTask* task) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int device = 0;
  if (CUresult r = CurrentDevice(&device); r != CUDA_SUCCESS) return r;
  const unsigned grid[3] = {p->gridDimX, p->gridDimY, p->gridDimZ};
  const unsigned block[3] = {p->blockDimX, p->blockDimY, p->blockDimZ};
  return KernelOp(p->func, grid, block, p->kernelParams, p->extra, device, task);
}

CUresult MemsetNodeOp(const CUDA_MEMSET_NODE_PARAMS* p, GraphOp* op) {
  if (p == nullptr || p->width == 0 || p->height == 0) return CUDA_ERROR_INVALID_VALUE;
  const unsigned size = p->elementSize;
  if (size != 1 && size != 2 && size != 4) return CUDA_ERROR_INVALID_VALUE;
  const size_t row_bytes = p->width * size;
  const size_t pitch = p->height == 1 ? row_bytes : p->pitch;
  if (pitch < row_bytes || p->dst % size != 0) return CUDA_ERROR_INVALID_VALUE;
  const size_t span = (p->height - 1) * pitch + row_bytes;
  if (CUresult r = State().address_space().CheckAccess(p->dst, span, /*write=*/true);
      r != CUDA_SUCCESS) {
    return r;
  }
  *op = [dst = p->dst, pitch, value = p->value, size, width = p->width, height = p->height] {
    for (size_t y = 0; y < height; ++y) {
      const uintptr_t row = dst + y * pitch;
      for (size_t i = 0; i < width; ++i) {
        if (size == 1) reinterpret_cast<uint8_t*>(row)[i] = static_cast<uint8_t>(value);
        if (size == 2) reinterpret_cast<uint16_t*>(row)[i] = static_cast<uint16_t>(value);
        if (size == 4) reinterpret_cast<uint32_t*>(row)[i] = value;
      }
    }
  };
  return CUDA_SUCCESS;
}

CUresult EventNodeOp(CUevent e, bool record, GraphOp* op) {
  std::shared_ptr<Event> event;
  if (CUresult r = State().streams().LookupEvent(e, &event); r != CUDA_SUCCESS) return r;
  if (record) {
    *op = [event] { event->Complete(event->BeginRecord(), MonotonicNowNs()); };
  } else {
    *op = [event] {
      if (const uint64_t generation = event->LatestRecord(); generation != 0) {
        event->WaitFor(generation);
      }
    };
  }
  return CUDA_SUCCESS;
}

// The first min(*count, edges) edges; with both arrays NULL, *count = the number of edges.
CUresult GetEdges(CUgraph h, CUgraphNode* from, CUgraphNode* to, CUgraphEdgeData* data,
                  size_t* count) {
  if (count == nullptr || ((from == nullptr) != (to == nullptr))) return CUDA_ERROR_INVALID_VALUE;
  GraphPtr graph;
  if (CUresult r = State().graphs().LookupGraph(h, &graph); r != CUDA_SUCCESS) return r;
  const auto edges = graph->Edges();
  if (from == nullptr) {
    *count = edges.size();
    return CUDA_SUCCESS;
  }
  const size_t written = std::min(*count, edges.size());
  for (size_t i = 0; i < *count; ++i) {
    from[i] = i < written ? edges[i].first : nullptr;
    to[i] = i < written ? edges[i].second : nullptr;
    if (data != nullptr) data[i] = CUgraphEdgeData{};
  }
  *count = written;
  return CUDA_SUCCESS;
}

CUresult AddDependencies(CUgraph h, const CUgraphNode* from, const CUgraphNode* to, size_t n) {
  if (n != 0 && (from == nullptr || to == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  GraphPtr graph;
  if (CUresult r = State().graphs().LookupGraph(h, &graph); r != CUDA_SUCCESS) return r;
  for (size_t i = 0; i < n; ++i) {
    if (CUresult r = graph->AddDependency(from[i], to[i]); r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace fakecuda

using fakecuda::State;

extern "C" {

// --- Graphs built node by node -------------------------------------------------------------

CUresult cuGraphCreate(CUgraph* phGraph, unsigned int flags) {
  FAKECUDA_ENTER(cuGraphCreate);
  if (phGraph == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  *phGraph = State().graphs().CreateGraph(/*captured=*/false)->handle();
  return CUDA_SUCCESS;
}

CUresult cuGraphAddKernelNode_v2(CUgraphNode* phGraphNode, CUgraph hGraph,
                                 const CUgraphNode* dependencies, size_t numDependencies,
                                 const CUDA_KERNEL_NODE_PARAMS* nodeParams) {
  FAKECUDA_ENTER(cuGraphAddKernelNode_v2);
  fakecuda::KernelTask task;
  if (CUresult r = fakecuda::KernelNodeTask(nodeParams, &task); r != CUDA_SUCCESS) return r;
  std::shared_ptr<fakecuda::Graph> graph;
  if (CUresult r = State().graphs().LookupGraph(hGraph, &graph); r != CUDA_SUCCESS) return r;
  return graph->AddKernelNode(std::move(task), dependencies, numDependencies, phGraphNode);
}

CUresult cuGraphAddMemsetNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                              const CUgraphNode* dependencies, size_t numDependencies,
                              const CUDA_MEMSET_NODE_PARAMS* memsetParams, CUcontext ctx) {
  FAKECUDA_ENTER(cuGraphAddMemsetNode);
  (void)ctx;
  fakecuda::GraphOp op;
  if (CUresult r = fakecuda::MemsetNodeOp(memsetParams, &op); r != CUDA_SUCCESS) return r;
  return fakecuda::AddNode(hGraph, CU_GRAPH_NODE_TYPE_MEMSET, std::move(op), nullptr, dependencies,
                           numDependencies, phGraphNode);
}

CUresult cuGraphAddHostNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                            const CUgraphNode* dependencies, size_t numDependencies,
                            const CUDA_HOST_NODE_PARAMS* nodeParams) {
  FAKECUDA_ENTER(cuGraphAddHostNode);
  if (nodeParams == nullptr || nodeParams->fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  fakecuda::GraphOp op = [fn = nodeParams->fn, data = nodeParams->userData] { fn(data); };
  return fakecuda::AddNode(hGraph, CU_GRAPH_NODE_TYPE_HOST, std::move(op), nullptr, dependencies,
                           numDependencies, phGraphNode);
}

CUresult cuGraphAddEmptyNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                             const CUgraphNode* dependencies, size_t numDependencies) {
  FAKECUDA_ENTER(cuGraphAddEmptyNode);
  return fakecuda::AddNode(hGraph, CU_GRAPH_NODE_TYPE_EMPTY, {}, nullptr, dependencies,
                           numDependencies, phGraphNode);
}

CUresult cuGraphAddEventRecordNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                   const CUgraphNode* dependencies, size_t numDependencies,
                                   CUevent event) {
  FAKECUDA_ENTER(cuGraphAddEventRecordNode);
  fakecuda::GraphOp op;
  if (CUresult r = fakecuda::EventNodeOp(event, /*record=*/true, &op); r != CUDA_SUCCESS) return r;
  return fakecuda::AddNode(hGraph, CU_GRAPH_NODE_TYPE_EVENT_RECORD, std::move(op), nullptr,
                           dependencies, numDependencies, phGraphNode);
}

CUresult cuGraphAddEventWaitNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                 const CUgraphNode* dependencies, size_t numDependencies,
                                 CUevent event) {
  FAKECUDA_ENTER(cuGraphAddEventWaitNode);
  fakecuda::GraphOp op;
  if (CUresult r = fakecuda::EventNodeOp(event, /*record=*/false, &op); r != CUDA_SUCCESS) {
    return r;
  }
  return fakecuda::AddNode(hGraph, CU_GRAPH_NODE_TYPE_WAIT_EVENT, std::move(op), nullptr,
                           dependencies, numDependencies, phGraphNode);
}

// The child graph is cloned into the node, as the driver does.
CUresult cuGraphAddChildGraphNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                  const CUgraphNode* dependencies, size_t numDependencies,
                                  CUgraph childGraph) {
  FAKECUDA_ENTER(cuGraphAddChildGraphNode);
  std::shared_ptr<fakecuda::Graph> child;
  if (CUresult r = State().graphs().LookupGraph(childGraph, &child); r != CUDA_SUCCESS) return r;
  if (!child->finished()) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<fakecuda::Graph> copy = child->Clone();
  State().graphs().Register(copy);
  return fakecuda::AddNode(hGraph, CU_GRAPH_NODE_TYPE_GRAPH, {}, std::move(copy), dependencies,
                           numDependencies, phGraphNode);
}

// Only the node types the fake cannot run (graphs.h), as nodes that do nothing.
CUresult cuGraphAddNode_v2(CUgraphNode* phGraphNode, CUgraph hGraph,
                           const CUgraphNode* dependencies, const CUgraphEdgeData* dependencyData,
                           size_t numDependencies, CUgraphNodeParams* nodeParams) {
  FAKECUDA_ENTER(cuGraphAddNode_v2);
  (void)dependencyData;
  if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (nodeParams->type) {
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
      return fakecuda::AddNode(hGraph, nodeParams->type, {}, nullptr, dependencies,
                               numDependencies, phGraphNode);
    default:
      return CUDA_ERROR_NOT_SUPPORTED;
  }
}

CUresult cuGraphDestroyNode(CUgraphNode hNode) {
  FAKECUDA_ENTER(cuGraphDestroyNode);
  std::shared_ptr<fakecuda::Graph> graph;
  if (CUresult r = State().graphs().OwnerOf(hNode, &graph); r != CUDA_SUCCESS) return r;
  return graph->DestroyNode(hNode);
}

CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType* type) {
  FAKECUDA_ENTER(cuGraphNodeGetType);
  std::shared_ptr<fakecuda::Graph> graph;
  if (CUresult r = State().graphs().OwnerOf(hNode, &graph); r != CUDA_SUCCESS) return r;
  return graph->NodeType(hNode, type);
}

CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode hNode, CUgraph* phGraph) {
  FAKECUDA_ENTER(cuGraphChildGraphNodeGetGraph);
  if (phGraph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<fakecuda::Graph> graph;
  if (CUresult r = State().graphs().OwnerOf(hNode, &graph); r != CUDA_SUCCESS) return r;
  std::shared_ptr<fakecuda::Graph> child;
  if (CUresult r = graph->Child(hNode, &child); r != CUDA_SUCCESS) return r;
  *phGraph = child->handle();
  return CUDA_SUCCESS;
}

CUresult cuGraphGetEdges(CUgraph hGraph, CUgraphNode* from, CUgraphNode* to, size_t* numEdges) {
  FAKECUDA_ENTER(cuGraphGetEdges);
  return fakecuda::GetEdges(hGraph, from, to, nullptr, numEdges);
}

// Every edge is a plain one (no edge data).
CUresult cuGraphGetEdges_v2(CUgraph hGraph, CUgraphNode* from, CUgraphNode* to,
                            CUgraphEdgeData* edgeData, size_t* numEdges) {
  FAKECUDA_ENTER(cuGraphGetEdges_v2);
  return fakecuda::GetEdges(hGraph, from, to, edgeData, numEdges);
}

CUresult cuGraphClone(CUgraph* phGraphClone, CUgraph originalGraph) {
  FAKECUDA_ENTER(cuGraphClone);
  if (phGraphClone == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<fakecuda::Graph> graph;
  if (CUresult r = State().graphs().LookupGraph(originalGraph, &graph); r != CUDA_SUCCESS) return r;
  if (!graph->finished()) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<fakecuda::Graph> clone = graph->Clone();
  State().graphs().Register(clone);
  *phGraphClone = clone->handle();
  return CUDA_SUCCESS;
}

CUresult cuGraphNodeFindInClone(CUgraphNode* phNode, CUgraphNode hOriginalNode,
                                CUgraph hClonedGraph) {
  FAKECUDA_ENTER(cuGraphNodeFindInClone);
  std::shared_ptr<fakecuda::Graph> clone;
  if (CUresult r = State().graphs().LookupGraph(hClonedGraph, &clone); r != CUDA_SUCCESS) return r;
  return clone->FindInClone(hOriginalNode, phNode);
}

CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
                                           const CUDA_KERNEL_NODE_PARAMS* nodeParams) {
  FAKECUDA_ENTER(cuGraphExecKernelNodeSetParams_v2);
  std::shared_ptr<fakecuda::GraphExec> exec;
  if (CUresult r = State().graphs().LookupExec(hGraphExec, &exec); r != CUDA_SUCCESS) return r;
  fakecuda::KernelTask task;
  if (CUresult r = fakecuda::KernelNodeTask(nodeParams, &task); r != CUDA_SUCCESS) return r;
  return exec->SetKernel(hNode, std::move(task));
}

// Succeeds when the graph has the instance's shape (the same node types in the same order).
CUresult cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph,
                              CUgraphExecUpdateResultInfo* resultInfo) {
  FAKECUDA_ENTER(cuGraphExecUpdate_v2);
  if (resultInfo == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *resultInfo = CUgraphExecUpdateResultInfo{};
  std::shared_ptr<fakecuda::GraphExec> exec;
  if (CUresult r = State().graphs().LookupExec(hGraphExec, &exec); r != CUDA_SUCCESS) return r;
  std::shared_ptr<fakecuda::Graph> graph;
  if (CUresult r = State().graphs().LookupGraph(hGraph, &graph); r != CUDA_SUCCESS) return r;
  std::vector<fakecuda::Graph::Step> steps;
  if (CUresult r = graph->Linearize(&steps); r != CUDA_SUCCESS) return r;
  if (!exec->Update(std::move(steps))) {
    resultInfo->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
  }
  resultInfo->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
  return CUDA_SUCCESS;
}

CUresult cuGraphAddDependencies(CUgraph hGraph, const CUgraphNode* from, const CUgraphNode* to,
                                size_t numDependencies) {
  FAKECUDA_ENTER(cuGraphAddDependencies);
  return fakecuda::AddDependencies(hGraph, from, to, numDependencies);
}

// Every edge is a plain one: edge data is ignored.
CUresult cuGraphAddDependencies_v2(CUgraph hGraph, const CUgraphNode* from, const CUgraphNode* to,
                                   const CUgraphEdgeData* edgeData, size_t numDependencies) {
  FAKECUDA_ENTER(cuGraphAddDependencies_v2);
  (void)edgeData;
  return fakecuda::AddDependencies(hGraph, from, to, numDependencies);
}

}  // extern "C"

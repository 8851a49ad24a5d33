// Graphs, made by stream capture or node by node, and their executable instances.
//
// A Graph is a set of nodes with dependencies. Each node has a CUgraphNodeType and the operation
// it runs (a stream operation exactly as it would have been queued: a kernel on the compute
// engine, a copy, a memset, a host function, an event record or wait), or, for a child graph
// node, an embedded graph. Capture adds one node per operation issued on the capturing stream,
// each depending on the one before (linear capture); ending the capture finishes the graph. A
// graph made with cuGraphCreate takes nodes with explicit dependencies (graph_api.cc), can be
// cloned (a clone remembers which node each of its nodes came from, for
// cuGraphNodeFindInClone), and nodes can be destroyed.
//
// Instantiation orders the nodes topologically (ready nodes in the order they were added, child
// graphs inlined) and copies their operations into a GraphExec; launching it queues them on a
// stream in that order, one stream operation per node, so a graph runs as one valid
// linearisation of its dependencies. The instance remembers which top-level node each operation
// came from, so cuGraphExecKernelNodeSetParams and cuGraphExecUpdate can replace operations.
// A kernel node holds its launch unbound (a KernelTask): the instance takes each kernel's TPC
// mask from the launch callback when it is uploaded (launch_callback.h), at cuGraphUpload or at
// its first launch if never uploaded, and every later launch reuses it.
// Node types the fake cannot run (conditional, memory allocation and free nodes, added through
// cuGraphAddNode) are kept as nodes that do nothing: enough to show that a caller refuses them.
//
// CUgraph, CUgraphExec and CUgraphNode handles are the addresses of their objects; graphs and
// instances are looked up in a registry, so unknown or destroyed handles give
// CUDA_ERROR_INVALID_HANDLE (NULL gives CUDA_ERROR_INVALID_VALUE). A node handle is checked
// against the graph it is used with. Thread-safe.

#ifndef MISSILE_TESTS_FAKECUDA_GRAPHS_H_
#define MISSILE_TESTS_FAKECUDA_GRAPHS_H_

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "launch_callback.h"
#include "thread_annotations.h"
#include "tpcs.h"

namespace fakecuda {

using GraphOp = std::function<void()>;

class Graph {
 public:
  // `captured`: made by a stream capture, which Finish() ends; otherwise finished from the start.
  explicit Graph(bool captured = false) : finished_(!captured) {}
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Capture: appends a node of `type` that runs `op`, after the previous one. Ignored once the
  // graph is finished.
  void Add(GraphOp op, CUgraphNodeType type) FAKECUDA_LOCKS_EXCLUDED(mu_);
  // Capture: appends a kernel node, likewise.
  void AddKernel(KernelTask kernel) FAKECUDA_LOCKS_EXCLUDED(mu_);
  // Ends the capture that builds the graph.
  void Finish() FAKECUDA_LOCKS_EXCLUDED(mu_);
  bool finished() const FAKECUDA_LOCKS_EXCLUDED(mu_);

  // Adds a node after `deps` (nodes of this graph, no duplicates): CUDA_ERROR_INVALID_VALUE for
  // a node of another graph or a graph still being captured.
  CUresult AddNode(CUgraphNodeType type, GraphOp op, std::shared_ptr<Graph> child,
                   const CUgraphNode* deps, size_t num_deps, CUgraphNode* out)
      FAKECUDA_LOCKS_EXCLUDED(mu_);
  // Adds a kernel node after `deps`, likewise.
  CUresult AddKernelNode(KernelTask kernel, const CUgraphNode* deps, size_t num_deps,
                         CUgraphNode* out) FAKECUDA_LOCKS_EXCLUDED(mu_);
  // Adds the edge from -> to (both nodes of this graph; not already an edge).
  CUresult AddDependency(CUgraphNode from, CUgraphNode to) FAKECUDA_LOCKS_EXCLUDED(mu_);
  // Removes a node and every edge to or from it.
  CUresult DestroyNode(CUgraphNode node) FAKECUDA_LOCKS_EXCLUDED(mu_);

  size_t size() const FAKECUDA_LOCKS_EXCLUDED(mu_);
  bool Owns(CUgraphNode node) const FAKECUDA_LOCKS_EXCLUDED(mu_);
  // Writes the handles of the first min(count, size()) nodes, in the order they were added.
  void Nodes(CUgraphNode* out, size_t count) const FAKECUDA_LOCKS_EXCLUDED(mu_);
  // Every edge (from, to).
  std::vector<std::pair<CUgraphNode, CUgraphNode>> Edges() const FAKECUDA_LOCKS_EXCLUDED(mu_);
  CUresult NodeType(CUgraphNode node, CUgraphNodeType* type) const FAKECUDA_LOCKS_EXCLUDED(mu_);
  // The embedded graph of a child graph node (CUDA_ERROR_INVALID_VALUE for another node type).
  CUresult Child(CUgraphNode node, std::shared_ptr<Graph>* child) const
      FAKECUDA_LOCKS_EXCLUDED(mu_);
  // A copy of the nodes and edges, each node remembering the one it was copied from.
  std::shared_ptr<Graph> Clone() const FAKECUDA_LOCKS_EXCLUDED(mu_);
  // In a clone of `original`: the node cloned from `node` (CUDA_ERROR_INVALID_VALUE if none).
  CUresult FindInClone(CUgraphNode node, CUgraphNode* out) const FAKECUDA_LOCKS_EXCLUDED(mu_);

  // One operation of an instance: the top-level node it came from and what it runs (a kernel,
  // with the TPCs disabled at the instance's upload, or another operation).
  struct Step {
    CUgraphNode node = nullptr;
    CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
    GraphOp op;
    KernelTask kernel;
    TpcMask disabled;
  };
  // The operations in a topological order (child graphs inlined); CUDA_ERROR_INVALID_VALUE for
  // a cycle.
  CUresult Linearize(std::vector<Step>* out) const FAKECUDA_LOCKS_EXCLUDED(mu_);

  // The capture's current dependencies: the last node (none while the graph is empty). The array
  // stays valid until the next node is added.
  const CUgraphNode* Tail(size_t* count) const FAKECUDA_LOCKS_EXCLUDED(mu_);

  CUgraph handle() { return reinterpret_cast<CUgraph>(this); }

 private:
  struct Node {
    CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
    GraphOp op;
    KernelTask kernel;  // kernel nodes, instead of `op`
    std::shared_ptr<Graph> child;
    std::vector<Node*> deps;
    const Node* cloned_from = nullptr;
  };
  Node* FindLocked(CUgraphNode handle) const FAKECUDA_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Capture: appends `node` after the last one.
  void Append(std::unique_ptr<Node> node) FAKECUDA_LOCKS_EXCLUDED(mu_);
  // Adds `node` after `deps`.
  CUresult Insert(std::unique_ptr<Node> node, const CUgraphNode* deps, size_t num_deps,
                  CUgraphNode* out) FAKECUDA_LOCKS_EXCLUDED(mu_);
  static CUgraphNode HandleOf(const Node* n) {
    return reinterpret_cast<CUgraphNode>(const_cast<Node*>(n));
  }

  mutable Mutex mu_;
  std::vector<std::unique_ptr<Node>> nodes_ FAKECUDA_GUARDED_BY(mu_);
  CUgraphNode tail_ FAKECUDA_GUARDED_BY(mu_) = nullptr;
  bool finished_ FAKECUDA_GUARDED_BY(mu_) = false;
};

class GraphExec {
 public:
  GraphExec(std::vector<Graph::Step> steps, uint64_t flags)
      : steps_(std::move(steps)), flags_(flags) {}
  // Runs `callbacks` once per kernel (on the calling thread, with only the upload's own lock
  // held) and keeps the TPCs each disables for every later launch. `first_only`: does nothing
  // if the instance was uploaded before.
  void Upload(const LaunchCallbacks& callbacks, bool first_only)
      FAKECUDA_LOCKS_EXCLUDED(upload_mu_, mu_);
  // A copy of the operations, in order, kernels bound to their uploaded TPC masks (a launch
  // queues these; later changes do not reach it).
  std::vector<GraphOp> Ops() const FAKECUDA_LOCKS_EXCLUDED(mu_);
  // Replaces the launch of top-level kernel node `node`, keeping its uploaded TPC mask:
  // CUDA_ERROR_INVALID_VALUE if the instance has no such kernel node.
  CUresult SetKernel(CUgraphNode node, KernelTask kernel) FAKECUDA_LOCKS_EXCLUDED(mu_);
  // Takes the operations of `steps` if they have the same count and types, in order (the
  // uploaded TPC masks stay).
  bool Update(std::vector<Graph::Step> steps) FAKECUDA_LOCKS_EXCLUDED(mu_);
  uint64_t flags() const { return flags_; }
  CUgraphExec handle() { return reinterpret_cast<CUgraphExec>(this); }

 private:
  Mutex upload_mu_;  // one upload at a time, each calling the callbacks once per kernel
  std::atomic<bool> uploaded_{false};
  mutable Mutex mu_;
  std::vector<Graph::Step> steps_ FAKECUDA_GUARDED_BY(mu_);
  const uint64_t flags_;
};

class GraphManager {
 public:
  GraphManager() = default;
  GraphManager(const GraphManager&) = delete;
  GraphManager& operator=(const GraphManager&) = delete;

  // A new, empty graph, registered (`captured`: the one a capture builds).
  std::shared_ptr<Graph> CreateGraph(bool captured) FAKECUDA_LOCKS_EXCLUDED(mu_);
  // Registers a graph made elsewhere (a clone, a child graph's embedded copy).
  void Register(const std::shared_ptr<Graph>& graph) FAKECUDA_LOCKS_EXCLUDED(mu_);
  CUresult LookupGraph(CUgraph handle, std::shared_ptr<Graph>* out) FAKECUDA_LOCKS_EXCLUDED(mu_);
  CUresult DestroyGraph(CUgraph handle) FAKECUDA_LOCKS_EXCLUDED(mu_);
  // The registered graph a node belongs to (CUDA_ERROR_INVALID_VALUE if none).
  CUresult OwnerOf(CUgraphNode node, std::shared_ptr<Graph>* out) FAKECUDA_LOCKS_EXCLUDED(mu_);

  // CUDA_ERROR_INVALID_VALUE for a graph whose capture has not ended.
  CUresult Instantiate(CUgraph handle, uint64_t flags, CUgraphExec* out)
      FAKECUDA_LOCKS_EXCLUDED(mu_);
  CUresult LookupExec(CUgraphExec handle, std::shared_ptr<GraphExec>* out)
      FAKECUDA_LOCKS_EXCLUDED(mu_);
  CUresult DestroyExec(CUgraphExec handle) FAKECUDA_LOCKS_EXCLUDED(mu_);

  // A capture id unique in the process (from 1).
  uint64_t NextCaptureId() { return next_capture_id_.fetch_add(1) + 1; }

 private:
  Mutex mu_;
  std::unordered_map<CUgraph, std::shared_ptr<Graph>> graphs_ FAKECUDA_GUARDED_BY(mu_);
  std::unordered_map<CUgraphExec, std::shared_ptr<GraphExec>> execs_ FAKECUDA_GUARDED_BY(mu_);
  std::atomic<uint64_t> next_capture_id_{0};
};

}  // namespace fakecuda

#endif  // MISSILE_TESTS_FAKECUDA_GRAPHS_H_

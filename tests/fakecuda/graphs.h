// Graphs made by stream capture, and their executable instances.
//
// A Graph is the linear list of operations a stream recorded while capturing (streams.h): kernel
// launches, memsets, asynchronous copies, stream memory operations and host functions, each a
// stream operation exactly as it would have been queued. Capture ends by finishing the graph; a
// finished graph no longer changes. Instantiation copies its operations into a GraphExec, and
// launching that queues them on a stream in order, one stream operation per node (so kernels use
// the compute engine and the stream's depth limit applies); a launch into a capturing stream is
// recorded node by node.
//
// CUgraph, CUgraphExec and CUgraphNode handles are the addresses of their objects; graphs and
// instances are looked up in a registry, so unknown or destroyed handles give
// CUDA_ERROR_INVALID_HANDLE (NULL gives CUDA_ERROR_INVALID_VALUE). Nodes live as long as their
// graph. Thread-safe.

#ifndef MISSILE_TESTS_FAKECUDA_GRAPHS_H_
#define MISSILE_TESTS_FAKECUDA_GRAPHS_H_

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "thread_annotations.h"

namespace fakecuda {

using GraphOp = std::function<void()>;

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Appends a node that runs `op`. Ignored once the graph is finished.
  void Add(GraphOp op) FAKECUDA_LOCKS_EXCLUDED(mu_);
  // Ends the capture that builds the graph.
  void Finish() FAKECUDA_LOCKS_EXCLUDED(mu_);
  bool finished() const FAKECUDA_LOCKS_EXCLUDED(mu_);
  size_t size() const FAKECUDA_LOCKS_EXCLUDED(mu_);
  // Writes the handles of the first min(count, size()) nodes, in order, to `out`.
  void Nodes(CUgraphNode* out, size_t count) const FAKECUDA_LOCKS_EXCLUDED(mu_);
  // The operations of all nodes, in order.
  std::vector<GraphOp> Ops() const FAKECUDA_LOCKS_EXCLUDED(mu_);
  // The capture's current dependencies: the last node (none while the graph is empty). The array
  // stays valid until the next node is added.
  const CUgraphNode* Tail(size_t* count) const FAKECUDA_LOCKS_EXCLUDED(mu_);

  CUgraph handle() { return reinterpret_cast<CUgraph>(this); }

 private:
  struct Node {
    GraphOp op;
  };
  mutable Mutex mu_;
  std::vector<std::unique_ptr<Node>> nodes_ FAKECUDA_GUARDED_BY(mu_);
  CUgraphNode tail_ FAKECUDA_GUARDED_BY(mu_) = nullptr;
  bool finished_ FAKECUDA_GUARDED_BY(mu_) = false;
};

class GraphExec {
 public:
  explicit GraphExec(std::vector<GraphOp> ops) : ops_(std::move(ops)) {}
  const std::vector<GraphOp>& ops() const { return ops_; }
  CUgraphExec handle() { return reinterpret_cast<CUgraphExec>(this); }

 private:
  const std::vector<GraphOp> ops_;
};

class GraphManager {
 public:
  GraphManager() = default;
  GraphManager(const GraphManager&) = delete;
  GraphManager& operator=(const GraphManager&) = delete;

  // A new, empty graph, registered (the one a capture builds).
  std::shared_ptr<Graph> CreateGraph() FAKECUDA_LOCKS_EXCLUDED(mu_);
  CUresult LookupGraph(CUgraph handle, std::shared_ptr<Graph>* out) FAKECUDA_LOCKS_EXCLUDED(mu_);
  CUresult DestroyGraph(CUgraph handle) FAKECUDA_LOCKS_EXCLUDED(mu_);

  // CUDA_ERROR_INVALID_VALUE for a graph whose capture has not ended.
  CUresult Instantiate(CUgraph handle, CUgraphExec* out) FAKECUDA_LOCKS_EXCLUDED(mu_);
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

// Splitting a best-effort tenant's CUDA graph into pieces the pacer can admit one at a time:
// the decisions, over plain numbers (no CUDA). The shim (libintercept/graph_split.h) reads a
// graph's nodes and edges, asks these for a topological order and for where to cut it, builds
// one executable graph per piece, and reports back what each piece took on the GPU.
//
// A piece is a run of consecutive nodes of one topological order, so every edge of the graph
// goes from a piece to the same or a later one: launching the pieces in order on one stream keeps
// every dependency (those inside a piece stay edges, those across pieces become stream order).
// Thread-safety: none; the owner serialises access.
#ifndef MISSILE_PACING_GRAPH_PLAN_H_
#define MISSILE_PACING_GRAPH_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace missile::pacing {

// A topological order of nodes 0..n-1 under `edges` (from, to): Kahn's algorithm, taking ready
// nodes lowest index first, so a graph whose nodes are already in order keeps it. nullopt if
// the edges name a node >= n or form a cycle.
std::optional<std::vector<size_t>> TopologicalOrder(
    size_t n, const std::vector<std::pair<size_t, size_t>>& edges);

// Where to cut a graph of nodes (in topological order) into pieces of bounded predicted GPU
// time, learning each node's share of what its pieces were measured to take.
//
// Every node has an estimate: a work node (kernel, copy, memset, child graph) starts at
// `prior_ns`, any other node (empty, event, host, wait) at 0. A measured piece rescales its
// nodes' estimates so they sum to what it took (a piece with no estimate to scale spreads it
// over its work nodes, or its nodes). Plan() cuts greedily, only ever in front of a work node:
// a piece grows while its estimate stays within the bound, and a node longer than the bound is
// a piece of its own (with the non-work nodes around it).
class PiecePlanner {
 public:
  // `work[i]`: whether node i (in topological order) is GPU work.
  PiecePlanner(std::vector<bool> work, uint64_t prior_ns);

  size_t size() const { return work_.size(); }
  size_t work_nodes() const { return work_count_; }

  // Piece boundaries: b[0] = 0 < b[1] < ... < b.back() = size(); piece k is [b[k], b[k+1]).
  // At most `max_pieces` pieces (the bound is widened to fit). Empty graph: {0}.
  std::vector<size_t> Plan(uint64_t bound_ns, size_t max_pieces) const;

  // Piece [begin, end) took `ns` on the GPU.
  void Observe(size_t begin, size_t end, uint64_t ns);

  // The estimate of [begin, end).
  uint64_t Estimate(size_t begin, size_t end) const;

  // Whether pieces `bounds` are worth rebuilding as Plan(bound_ns, max_pieces): some piece of
  // more than one work node is predicted over 1.5x the bound, or the new plan needs at most two
  // thirds of the pieces (each piece launch costs the host a few microseconds).
  bool WorthReplanning(const std::vector<size_t>& bounds, uint64_t bound_ns,
                       size_t max_pieces) const;

 private:
  std::vector<size_t> Cut(uint64_t bound_ns) const;
  size_t WorkIn(size_t begin, size_t end) const;

  std::vector<bool> work_;
  size_t work_count_ = 0;
  std::vector<double> estimate_ns_;
};

}  // namespace missile::pacing

#endif  // MISSILE_PACING_GRAPH_PLAN_H_

// Splitting a best-effort tenant's CUDA graphs into pieces, so the pacer admits a graph launch
// piece by piece like a run of kernels instead of as one item of any length.
//
// When a BE tenant instantiates a graph, the splitter keeps a snapshot (a clone) of it, orders
// its nodes topologically and cuts that order into consecutive pieces of bounded predicted GPU
// time (pacing::PiecePlanner; the bound is the pacer's window). Each piece is an executable graph
// of its own, built from the snapshot by cloning and removing the nodes of the other pieces, so
// every node keeps its type, parameters and attributes, and the edges inside a piece stay edges;
// the edges between pieces become stream order, since the pieces launch in order on the stream
// the original was launched on. The application's own executable graph is instantiated as usual
// and used whenever splitting is off.
//
// A launch of a split graph launches its pieces, each admitted by the PieceAdmitter (the pacer).
// Launches of one graph are ordered like the driver orders launches of one executable graph:
// a launch on another stream than the last one first waits for the last one's end (an event).
// Where nothing would hold the pieces back (a BE released by its LS tenants' budgets), the
// original launches whole, as one admitted item.
// As pieces run, the pacer learns what each takes; every few launches the splitter rescales its
// estimates and, where a piece is much longer than the bound or pieces could be merged, rebuilds
// the pieces (at most kMaxRebuilds times per graph).
//
// Not split (the graph launches as one item, counted by reason in Summary): graphs with
// conditional nodes or memory allocation or free nodes (directly or in a child graph), graphs
// instantiated for device launch, graphs with fewer than two pieces, graphs whose pieces the
// driver would not build, and instances changed after instantiation (cuGraphExecUpdate, the
// cuGraphExec*SetParams family, cuGraphNodeSetEnabled): their pieces would no longer match.
// Thread-safety: every method may be called from any thread; launches of one graph serialise.
#ifndef MISSILE_LIBINTERCEPT_GRAPH_SPLIT_H_
#define MISSILE_LIBINTERCEPT_GRAPH_SPLIT_H_

#include <cuda.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "driver_api.h"
#include "missile/pacing/graph_plan.h"
#include "spdlog/logger.h"

namespace missile::shim {

// How the pieces of a launch go to the GPU: the pacer's admission in the shim.
class PieceAdmitter {
 public:
  virtual ~PieceAdmitter() = default;
  // Runs `launch` (one piece's launch on `stream`) as one work item keyed `key`; may hold the
  // calling thread first. Returns what `launch` returned.
  virtual CUresult Admit(CUstream stream, bool ptsz, uint64_t key,
                         absl::FunctionRef<CUresult()> launch) = 0;
  // What item `key` was measured to take on the GPU, if known.
  virtual std::optional<uint64_t> Learned(uint64_t key) = 0;
  // Whether the pieces are worth their cost now: false while nothing would hold them back (a BE
  // released by its LS tenants' budgets, pacing/budget.h), when the graph launches whole, still
  // as one admitted item.
  virtual bool splits() const = 0;
  // The bound on a piece's predicted duration, and the guess for a node never measured.
  virtual uint64_t bound_ns() const = 0;
  virtual uint64_t prior_ns() const = 0;
};

class GraphSplitter {
 public:
  // Why a graph was not split.
  enum class Fallback : int {
    kConditional,   // conditional nodes
    kMemoryNodes,   // memory allocation or free nodes
    kDeviceLaunch,  // instantiated for device launch
    kOnePiece,      // nothing to split
    kBuildFailed,   // the driver refused a step of building the pieces
    kChanged,       // the instance was changed after instantiation
  };
  static constexpr size_t kFallbacks = static_cast<size_t>(Fallback::kChanged) + 1;
  static constexpr size_t kMaxPieces = 512;
  static constexpr int kMaxRebuilds = 4;
  static constexpr uint64_t kReplanEvery = 8;  // launches between looks at what was learned

  GraphSplitter(const DriverApi& api, spdlog::logger* log) : api_(api), log_(log) {}
  ~GraphSplitter();
  GraphSplitter(const GraphSplitter&) = delete;
  GraphSplitter& operator=(const GraphSplitter&) = delete;

  // After `graph` was instantiated as `exec` with `flags` by a BE tenant (in the current
  // context): builds the pieces, or counts why not. `upload`: the stream the instantiation
  // asked to upload to, if any (the pieces are uploaded there too).
  void Instantiated(CUgraphExec exec, CUgraph graph, uint64_t flags, const PieceAdmitter& admitter,
                    std::optional<std::pair<CUstream, bool>> upload = std::nullopt);
  // `exec` was changed by an update: from now on it launches as one item.
  void Changed(CUgraphExec exec);
  // Before `exec` is destroyed.
  void Destroyed(CUgraphExec exec);
  // After `exec` was uploaded to `stream`: uploads its pieces there too.
  void Uploaded(CUgraphExec exec, CUstream stream, bool ptsz);
  // Whether launches of `exec` go through Launch.
  bool Tracks(CUgraphExec exec);

  // Launches `exec` on `stream` (`ptsz`: the per-thread flavour): its pieces, each through
  // `admitter`, or the original as one item through it where the admitter does not split now
  // (null: the original as it is, unpaced). nullopt if `exec` is not tracked.
  std::optional<CUresult> Launch(CUgraphExec exec, CUstream stream, bool ptsz,
                                 PieceAdmitter* admitter);

  // The pieces of `exec` now (tests and diagnostics): each piece's executable graph.
  std::vector<CUgraphExec> PiecesOf(CUgraphExec exec);

  // For the exit report.
  std::string Summary() const;
  uint64_t split_graphs() const { return split_.load(std::memory_order_relaxed); }
  uint64_t fallbacks(Fallback why) const {
    return fallback_[static_cast<size_t>(why)].load(std::memory_order_relaxed);
  }
  uint64_t rebuilds() const { return rebuilds_.load(std::memory_order_relaxed); }
  uint64_t whole_launches() const { return whole_launches_.load(std::memory_order_relaxed); }

 private:
  struct Piece {
    CUgraphExec exec = nullptr;
    uint64_t key = 0;
    size_t begin = 0;  // [begin, end) of the topological order
    size_t end = 0;
  };
  struct Split;
  // Builds one executable graph per piece of `bounds` from the snapshot.
  absl::Status Build(Split& s, const std::vector<size_t>& bounds, std::vector<Piece>* out);
  absl::Status Bisect(const Split& s, CUgraph g, std::vector<CUgraphNode> nodes,
                      const std::vector<size_t>& bounds, size_t first, size_t last,
                      std::vector<Piece>* out);
  void DestroyPieces(const std::vector<Piece>& pieces);
  // Rescales the estimates from what the pieces were measured to take; rebuilds if worth it.
  void MaybeReplan(Split& s, PieceAdmitter& admitter);
  void Count(Fallback why) { fallback_[static_cast<size_t>(why)].fetch_add(1); }
  std::shared_ptr<Split> Find(CUgraphExec exec);
  CUresult Wait(CUstream stream, bool ptsz, CUevent event) const;
  CUresult Record(CUstream stream, bool ptsz, CUevent event) const;
  bool Capturing(CUstream stream, bool ptsz) const;

  const DriverApi& api_;
  spdlog::logger* log_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<CUgraphExec, std::shared_ptr<Split>> splits_ ABSL_GUARDED_BY(mu_);
  std::atomic<size_t> tracked_{0};  // splits_.size(), read without the lock
  std::atomic<uint64_t> split_{0};
  std::atomic<uint64_t> pieces_built_{0};
  std::atomic<uint64_t> rebuilds_{0};
  std::atomic<uint64_t> build_ns_{0};
  std::atomic<uint64_t> launches_{0};
  std::atomic<uint64_t> piece_launches_{0};
  std::atomic<uint64_t> whole_launches_{0};  // of split graphs, while the admitter did not split
  std::array<std::atomic<uint64_t>, kFallbacks> fallback_{};
};

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_GRAPH_SPLIT_H_

#include "graph_split.h"

#include <time.h>

#include <utility>

#include "absl/status/statusor.h"
#include "fmt/format.h"

namespace missile::shim {
namespace {

// Flags a piece keeps from the original's instantiation (upload is done by hand, device launch
// is never split).
constexpr uint64_t kPieceFlags =
    CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
// How deep child graphs are screened for nodes that cannot be split.
constexpr int kMaxChildDepth = 16;

uint64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// The pacer's item key of a piece: distinct from every kernel's and graph's key in practice.
uint64_t PieceKey(CUgraphExec exec) {
  uint64_t h = reinterpret_cast<uintptr_t>(exec) ^ 0x7069656365ull;  // "piece"
  h *= 0x9e3779b97f4a7c15ull;
  return h ^ (h >> 29);
}

bool IsWork(CUgraphNodeType type) {
  return type == CU_GRAPH_NODE_TYPE_KERNEL || type == CU_GRAPH_NODE_TYPE_MEMCPY ||
         type == CU_GRAPH_NODE_TYPE_MEMSET || type == CU_GRAPH_NODE_TYPE_GRAPH;
}

}  // namespace

struct GraphSplitter::Split {
  explicit Split(const DriverApi* driver) : api(driver) {}
  ~Split() {
    for (const Piece& p : pieces) api->GraphExecDestroy(p.exec);
    if (snapshot != nullptr) api->GraphDestroy(snapshot);
    if (done != nullptr) api->EventDestroy(done);
  }
  Split(const Split&) = delete;
  Split& operator=(const Split&) = delete;

  const DriverApi* api;
  uint64_t flags = 0;
  CUgraph snapshot = nullptr;     // the graph as instantiated
  std::vector<CUgraphNode> topo;  // the snapshot's nodes in topological order
  std::optional<pacing::PiecePlanner> planner;
  std::atomic<bool> changed{false};

  std::mutex mu;  // serialises launches, and guards what follows
  std::vector<size_t> bounds;
  std::vector<Piece> pieces;
  int rebuilds = 0;
  uint64_t launches = 0;
  CUevent done = nullptr;  // recorded at the end of every launch
  bool launched = false;
  CUstream last_stream = nullptr;
  bool last_ptsz = false;
};

GraphSplitter::~GraphSplitter() {
  absl::MutexLock lock(&mu_);
  splits_.clear();
}

namespace {

absl::StatusOr<std::vector<CUgraphNode>> NodesOf(const DriverApi& api, CUgraph g) {
  size_t n = 0;
  if (CUresult r = api.GraphGetNodes(g, nullptr, &n); r != CUDA_SUCCESS) {
    return DriverStatus(api, "cuGraphGetNodes", r);
  }
  std::vector<CUgraphNode> nodes(n);
  if (n != 0) {
    if (CUresult r = api.GraphGetNodes(g, nodes.data(), &n); r != CUDA_SUCCESS) {
      return DriverStatus(api, "cuGraphGetNodes", r);
    }
    nodes.resize(n);
  }
  return nodes;
}

// Why `g` (or a child graph in it) cannot be split, if it cannot.
absl::StatusOr<std::optional<GraphSplitter::Fallback>> Screen(const DriverApi& api, CUgraph g,
                                                              int depth) {
  absl::StatusOr<std::vector<CUgraphNode>> nodes = NodesOf(api, g);
  if (!nodes.ok()) return nodes.status();
  for (CUgraphNode node : *nodes) {
    CUgraphNodeType type{};
    if (CUresult r = api.GraphNodeGetType(node, &type); r != CUDA_SUCCESS) {
      return DriverStatus(api, "cuGraphNodeGetType", r);
    }
    switch (type) {
      case CU_GRAPH_NODE_TYPE_CONDITIONAL:
        return GraphSplitter::Fallback::kConditional;
      case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
      case CU_GRAPH_NODE_TYPE_MEM_FREE:
        return GraphSplitter::Fallback::kMemoryNodes;
      case CU_GRAPH_NODE_TYPE_GRAPH: {
        if (depth >= kMaxChildDepth) return absl::FailedPreconditionError("child graphs too deep");
        CUgraph child = nullptr;
        if (CUresult r = api.GraphChildGraphNodeGetGraph(node, &child); r != CUDA_SUCCESS) {
          return DriverStatus(api, "cuGraphChildGraphNodeGetGraph", r);
        }
        auto inner = Screen(api, child, depth + 1);
        if (!inner.ok() || inner->has_value()) return inner;
        break;
      }
      default:
        break;
    }
  }
  return std::optional<GraphSplitter::Fallback>();
}

// The nodes of `g` in topological order (into `topo`), and which of them are GPU work.
absl::StatusOr<std::vector<bool>> Order(const DriverApi& api, CUgraph g,
                                        std::vector<CUgraphNode>* topo) {
  absl::StatusOr<std::vector<CUgraphNode>> nodes = NodesOf(api, g);
  if (!nodes.ok()) return nodes.status();
  absl::flat_hash_map<CUgraphNode, size_t> index;
  for (size_t i = 0; i < nodes->size(); ++i) index[(*nodes)[i]] = i;
  size_t num_edges = 0;
  if (CUresult r = api.GraphGetEdges(g, nullptr, nullptr, &num_edges); r != CUDA_SUCCESS) {
    return DriverStatus(api, "cuGraphGetEdges", r);
  }
  std::vector<CUgraphNode> from(num_edges);
  std::vector<CUgraphNode> to(num_edges);
  if (num_edges != 0) {
    if (CUresult r = api.GraphGetEdges(g, from.data(), to.data(), &num_edges); r != CUDA_SUCCESS) {
      return DriverStatus(api, "cuGraphGetEdges", r);
    }
  }
  std::vector<std::pair<size_t, size_t>> edges;
  edges.reserve(num_edges);
  for (size_t i = 0; i < num_edges; ++i) {
    auto f = index.find(from[i]);
    auto t = index.find(to[i]);
    if (f == index.end() || t == index.end()) {
      return absl::InternalError("an edge names a node the graph does not list");
    }
    edges.emplace_back(f->second, t->second);
  }
  std::optional<std::vector<size_t>> order = pacing::TopologicalOrder(nodes->size(), edges);
  if (!order.has_value()) return absl::InternalError("the graph's edges form a cycle");
  std::vector<bool> work(order->size());
  topo->reserve(order->size());
  for (size_t k = 0; k < order->size(); ++k) {
    CUgraphNode node = (*nodes)[(*order)[k]];
    topo->push_back(node);
    CUgraphNodeType type{};
    if (CUresult r = api.GraphNodeGetType(node, &type); r != CUDA_SUCCESS) {
      return DriverStatus(api, "cuGraphNodeGetType", r);
    }
    work[k] = IsWork(type);
  }
  return work;
}

}  // namespace

void GraphSplitter::Instantiated(CUgraphExec exec, CUgraph graph, uint64_t flags,
                                 const PieceAdmitter& admitter,
                                 std::optional<std::pair<CUstream, bool>> upload) {
  const uint64_t start = NowNs();
  if ((flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) != 0) {
    Count(Fallback::kDeviceLaunch);
    return;
  }
  auto fail = [&](const absl::Status& why) {
    Count(Fallback::kBuildFailed);
    log_->warn("a graph launches as one item: its pieces could not be built: {}", why.ToString());
  };
  absl::StatusOr<std::optional<Fallback>> screened = Screen(api_, graph, 0);
  if (!screened.ok()) return fail(screened.status());
  if (screened->has_value()) return Count(**screened);

  auto s = std::make_shared<Split>(&api_);
  s->flags = flags;
  if (CUresult r = api_.GraphClone(&s->snapshot, graph); r != CUDA_SUCCESS) {
    return fail(DriverStatus(api_, "cuGraphClone", r));
  }
  absl::StatusOr<std::vector<bool>> work = Order(api_, s->snapshot, &s->topo);
  if (!work.ok()) return fail(work.status());
  s->planner.emplace(*std::move(work), admitter.prior_ns());
  std::vector<size_t> bounds = s->planner->Plan(admitter.bound_ns(), kMaxPieces);
  if (bounds.size() < 3) return Count(Fallback::kOnePiece);
  if (absl::Status st = Build(*s, bounds, &s->pieces); !st.ok()) return fail(st);
  s->bounds = std::move(bounds);
  if (CUresult r = api_.EventCreate(&s->done, CU_EVENT_DISABLE_TIMING); r != CUDA_SUCCESS) {
    return fail(DriverStatus(api_, "cuEventCreate", r));
  }
  if (upload.has_value()) {
    for (const Piece& p : s->pieces) {
      (upload->second ? api_.GraphUploadPtsz : api_.GraphUpload)(p.exec, upload->first);
    }
  }
  pieces_built_.fetch_add(s->pieces.size(), std::memory_order_relaxed);
  split_.fetch_add(1, std::memory_order_relaxed);
  build_ns_.fetch_add(NowNs() - start, std::memory_order_relaxed);
  absl::MutexLock lock(&mu_);
  splits_[exec] = std::move(s);
  tracked_.store(splits_.size(), std::memory_order_release);
}

absl::Status GraphSplitter::Build(Split& s, const std::vector<size_t>& bounds,
                                  std::vector<Piece>* out) {
  CUgraph g = nullptr;
  if (CUresult r = api_.GraphClone(&g, s.snapshot); r != CUDA_SUCCESS) {
    return DriverStatus(api_, "cuGraphClone", r);
  }
  std::vector<CUgraphNode> nodes(s.topo.size());
  for (size_t i = 0; i < s.topo.size(); ++i) {
    if (CUresult r = api_.GraphNodeFindInClone(&nodes[i], s.topo[i], g); r != CUDA_SUCCESS) {
      api_.GraphDestroy(g);
      return DriverStatus(api_, "cuGraphNodeFindInClone", r);
    }
  }
  std::vector<Piece> pieces(bounds.size() - 1);
  absl::Status st = Bisect(s, g, std::move(nodes), bounds, 0, pieces.size(), &pieces);
  if (!st.ok()) {
    DestroyPieces(pieces);
    return st;
  }
  *out = std::move(pieces);
  return absl::OkStatus();
}

// `g` holds exactly the nodes of pieces [first, last), `nodes` them in topological order; it is
// consumed. Cuts it in two (a clone keeps the first half, `g` the second) until one piece is left.
absl::Status GraphSplitter::Bisect(const Split& s, CUgraph g, std::vector<CUgraphNode> nodes,
                                   const std::vector<size_t>& bounds, size_t first, size_t last,
                                   std::vector<Piece>* out) {
  const size_t a = bounds[first];
  const size_t b = bounds[last];
  if (last - first == 1) {
    CUgraphExec exec = nullptr;
    const CUresult r = api_.GraphInstantiateWithFlags(&exec, g, s.flags & kPieceFlags);
    api_.GraphDestroy(g);
    if (r != CUDA_SUCCESS) return DriverStatus(api_, "cuGraphInstantiateWithFlags", r);
    (*out)[first] = Piece{exec, PieceKey(exec), a, b};
    return absl::OkStatus();
  }
  const size_t mid = (first + last) / 2;
  const size_t m = bounds[mid];
  CUgraph left = nullptr;
  if (CUresult r = api_.GraphClone(&left, g); r != CUDA_SUCCESS) {
    api_.GraphDestroy(g);
    return DriverStatus(api_, "cuGraphClone", r);
  }
  std::vector<CUgraphNode> left_nodes(m - a);
  CUresult r = CUDA_SUCCESS;
  for (size_t i = a; i < b && r == CUDA_SUCCESS; ++i) {
    CUgraphNode in_left = nullptr;
    r = api_.GraphNodeFindInClone(&in_left, nodes[i - a], left);
    if (r != CUDA_SUCCESS) break;
    if (i < m) {
      left_nodes[i - a] = in_left;
      r = api_.GraphDestroyNode(nodes[i - a]);  // the first half leaves `g`
    } else {
      r = api_.GraphDestroyNode(in_left);  // the second half leaves the clone
    }
  }
  if (r != CUDA_SUCCESS) {
    api_.GraphDestroy(left);
    api_.GraphDestroy(g);
    return DriverStatus(api_, "splitting a graph", r);
  }
  nodes.erase(nodes.begin(), nodes.begin() + static_cast<std::ptrdiff_t>(m - a));
  absl::Status st = Bisect(s, left, std::move(left_nodes), bounds, first, mid, out);
  if (!st.ok()) {
    api_.GraphDestroy(g);
    return st;
  }
  return Bisect(s, g, std::move(nodes), bounds, mid, last, out);
}

void GraphSplitter::DestroyPieces(const std::vector<Piece>& pieces) {
  // An instance still running is freed when it completes.
  for (const Piece& p : pieces) {
    if (p.exec != nullptr) api_.GraphExecDestroy(p.exec);
  }
}

std::shared_ptr<GraphSplitter::Split> GraphSplitter::Find(CUgraphExec exec) {
  // Every graph launch of every tenant asks: no lock while nothing was split (an LS tenant's
  // graphs never are).
  if (tracked_.load(std::memory_order_acquire) == 0) return nullptr;
  absl::MutexLock lock(&mu_);
  auto it = splits_.find(exec);
  return it == splits_.end() ? nullptr : it->second;
}

bool GraphSplitter::Tracks(CUgraphExec exec) { return Find(exec) != nullptr; }

void GraphSplitter::Changed(CUgraphExec exec) {
  std::shared_ptr<Split> s = Find(exec);
  if (s != nullptr && !s->changed.exchange(true)) Count(Fallback::kChanged);
}

void GraphSplitter::Destroyed(CUgraphExec exec) {
  if (tracked_.load(std::memory_order_acquire) == 0) return;
  std::shared_ptr<Split> s;
  {
    absl::MutexLock lock(&mu_);
    auto it = splits_.find(exec);
    if (it == splits_.end()) return;
    s = std::move(it->second);
    splits_.erase(it);
    tracked_.store(splits_.size(), std::memory_order_release);
  }
  // Freed here, or by a launch still holding it.
}

void GraphSplitter::Uploaded(CUgraphExec exec, CUstream stream, bool ptsz) {
  std::shared_ptr<Split> s = Find(exec);
  if (s == nullptr) return;
  std::lock_guard<std::mutex> lock(s->mu);
  for (const Piece& p : s->pieces) (ptsz ? api_.GraphUploadPtsz : api_.GraphUpload)(p.exec, stream);
}

std::vector<CUgraphExec> GraphSplitter::PiecesOf(CUgraphExec exec) {
  std::shared_ptr<Split> s = Find(exec);
  std::vector<CUgraphExec> out;
  if (s == nullptr) return out;
  std::lock_guard<std::mutex> lock(s->mu);
  for (const Piece& p : s->pieces) out.push_back(p.exec);
  return out;
}

bool GraphSplitter::Capturing(CUstream stream, bool ptsz) const {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  const CUresult r = (ptsz ? api_.StreamIsCapturingPtsz : api_.StreamIsCapturing)(stream, &status);
  return r != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_NONE;
}

CUresult GraphSplitter::Wait(CUstream stream, bool ptsz, CUevent event) const {
  return (ptsz ? api_.StreamWaitEventPtsz : api_.StreamWaitEvent)(stream, event, 0);
}

CUresult GraphSplitter::Record(CUstream stream, bool ptsz, CUevent event) const {
  return (ptsz ? api_.EventRecordPtsz : api_.EventRecord)(event, stream);
}

std::optional<CUresult> GraphSplitter::Launch(CUgraphExec exec, CUstream stream, bool ptsz,
                                              PieceAdmitter* admitter) {
  std::shared_ptr<Split> s = Find(exec);
  if (s == nullptr) return std::nullopt;
  auto launch_one = [&](CUgraphExec e) {
    return (ptsz ? api_.GraphLaunchPtsz : api_.GraphLaunch)(e, stream);
  };
  // Into a capture: the original, as one node (nothing may be recorded or waited for there).
  if (Capturing(stream, ptsz)) return launch_one(exec);
  std::lock_guard<std::mutex> lock(s->mu);
  launches_.fetch_add(1, std::memory_order_relaxed);
  if (s->launched && (stream != s->last_stream || ptsz != s->last_ptsz)) {
    if (CUresult r = Wait(stream, ptsz, s->done); r != CUDA_SUCCESS) return r;
  }
  const bool changed = s->changed.load();
  const bool split = admitter != nullptr && !changed && admitter->splits();
  if (split && ++s->launches % kReplanEvery == 0) MaybeReplan(*s, *admitter);
  CUresult result = CUDA_SUCCESS;
  if (split) {
    for (const Piece& p : s->pieces) {
      result = admitter->Admit(stream, ptsz, p.key, [&] { return launch_one(p.exec); });
      if (result != CUDA_SUCCESS) break;
    }
    piece_launches_.fetch_add(s->pieces.size(), std::memory_order_relaxed);
  } else if (admitter != nullptr) {
    if (!changed) whole_launches_.fetch_add(1, std::memory_order_relaxed);
    result = admitter->Admit(stream, ptsz, PieceKey(exec), [&] { return launch_one(exec); });
  } else {
    result = launch_one(exec);
  }
  if (result != CUDA_SUCCESS) return result;
  // The next launch on another stream starts after this one ends.
  if (Record(stream, ptsz, s->done) == CUDA_SUCCESS) {
    s->launched = true;
    s->last_stream = stream;
    s->last_ptsz = ptsz;
  }
  return result;
}

void GraphSplitter::MaybeReplan(Split& s, PieceAdmitter& admitter) {
  if (s.rebuilds >= kMaxRebuilds) return;
  size_t learned = 0;
  for (const Piece& p : s.pieces) {
    if (std::optional<uint64_t> ns = admitter.Learned(p.key); ns.has_value()) {
      s.planner->Observe(p.begin, p.end, *ns);
      ++learned;
    }
  }
  // Most pieces measured (the pacer learns only from pieces that ran with nothing beside them).
  if (4 * learned < 3 * s.pieces.size()) return;
  const uint64_t bound = admitter.bound_ns();
  if (!s.planner->WorthReplanning(s.bounds, bound, kMaxPieces)) return;
  const uint64_t start = NowNs();
  std::vector<size_t> bounds = s.planner->Plan(bound, kMaxPieces);
  std::vector<Piece> pieces;
  if (absl::Status st = Build(s, bounds, &pieces); !st.ok()) {
    log_->warn("a graph keeps its pieces: rebuilding them failed: {}", st.ToString());
    s.rebuilds = kMaxRebuilds;
    return;
  }
  DestroyPieces(s.pieces);
  pieces_built_.fetch_add(pieces.size(), std::memory_order_relaxed);
  s.pieces = std::move(pieces);
  s.bounds = std::move(bounds);
  ++s.rebuilds;
  rebuilds_.fetch_add(1, std::memory_order_relaxed);
  build_ns_.fetch_add(NowNs() - start, std::memory_order_relaxed);
}

std::string GraphSplitter::Summary() const {
  static constexpr const char* kWhy[kFallbacks] = {
      "conditional nodes", "memory nodes", "device launch",
      "one piece",         "build failed", "changed after instantiation"};
  std::string text = fmt::format(
      "{} graphs split ({} pieces built, {} rebuilds, {:.1f} ms building); {} launches, {} piece "
      "launches, {} whole while released",
      split_.load(), pieces_built_.load(), rebuilds_.load(), build_ns_.load() / 1e6,
      launches_.load(), piece_launches_.load(), whole_launches_.load());
  std::string whole;
  for (size_t i = 0; i < kFallbacks; ++i) {
    if (const uint64_t n = fallback_[i].load(); n != 0) {
      whole += fmt::format("{}{} {}", whole.empty() ? "" : ", ", n, kWhy[i]);
    }
  }
  if (!whole.empty()) text += "; launched whole: " + whole;
  return text;
}

}  // namespace missile::shim

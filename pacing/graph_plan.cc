#include "missile/pacing/graph_plan.h"

#include <algorithm>
#include <queue>

namespace missile::pacing {

std::optional<std::vector<size_t>> TopologicalOrder(
    size_t n, const std::vector<std::pair<size_t, size_t>>& edges) {
  std::vector<size_t> indegree(n, 0);
  std::vector<std::vector<size_t>> out(n);
  for (const auto& [from, to] : edges) {
    if (from >= n || to >= n) return std::nullopt;
    out[from].push_back(to);
    ++indegree[to];
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < n; ++i) {
    if (indegree[i] == 0) ready.push(i);
  }
  std::vector<size_t> order;
  order.reserve(n);
  while (!ready.empty()) {
    const size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (size_t j : out[i]) {
      if (--indegree[j] == 0) ready.push(j);
    }
  }
  if (order.size() != n) return std::nullopt;  // a cycle
  return order;
}

PiecePlanner::PiecePlanner(std::vector<bool> work, uint64_t prior_ns)
    : work_(std::move(work)), estimate_ns_(work_.size(), 0.0) {
  for (size_t i = 0; i < work_.size(); ++i) {
    if (work_[i]) {
      ++work_count_;
      estimate_ns_[i] = static_cast<double>(prior_ns);
    }
  }
}

size_t PiecePlanner::WorkIn(size_t begin, size_t end) const {
  size_t count = 0;
  for (size_t i = begin; i < end && i < work_.size(); ++i) count += work_[i] ? 1 : 0;
  return count;
}

uint64_t PiecePlanner::Estimate(size_t begin, size_t end) const {
  double sum = 0;
  for (size_t i = begin; i < end && i < estimate_ns_.size(); ++i) sum += estimate_ns_[i];
  return static_cast<uint64_t>(sum);
}

void PiecePlanner::Observe(size_t begin, size_t end, uint64_t ns) {
  end = std::min(end, work_.size());
  if (begin >= end) return;
  double sum = 0;
  for (size_t i = begin; i < end; ++i) sum += estimate_ns_[i];
  if (sum > 0) {
    const double scale = static_cast<double>(ns) / sum;
    for (size_t i = begin; i < end; ++i) estimate_ns_[i] *= scale;
    return;
  }
  // Nothing to scale: spread it over the work nodes, or over every node if there is none.
  const size_t work = WorkIn(begin, end);
  const double share = static_cast<double>(ns) / static_cast<double>(work > 0 ? work : end - begin);
  for (size_t i = begin; i < end; ++i) {
    if (work == 0 || work_[i]) estimate_ns_[i] = share;
  }
}

std::vector<size_t> PiecePlanner::Cut(uint64_t bound_ns) const {
  std::vector<size_t> bounds{0};
  const double bound = static_cast<double>(bound_ns);
  double piece = 0;
  bool piece_has_work = false;
  for (size_t i = 0; i < work_.size(); ++i) {
    if (work_[i] && piece_has_work && piece + estimate_ns_[i] > bound) {
      bounds.push_back(i);
      piece = 0;
      piece_has_work = false;
    }
    piece += estimate_ns_[i];
    piece_has_work = piece_has_work || work_[i];
  }
  if (!work_.empty()) bounds.push_back(work_.size());
  return bounds;
}

std::vector<size_t> PiecePlanner::Plan(uint64_t bound_ns, size_t max_pieces) const {
  max_pieces = std::max<size_t>(max_pieces, 1);
  uint64_t bound = std::max<uint64_t>(bound_ns, 1);
  for (;;) {
    std::vector<size_t> bounds = Cut(bound);
    if (bounds.size() <= max_pieces + 1 || bound >= (uint64_t{1} << 62)) return bounds;
    bound *= 2;
  }
}

bool PiecePlanner::WorthReplanning(const std::vector<size_t>& bounds, uint64_t bound_ns,
                                   size_t max_pieces) const {
  if (bounds.size() < 2) return false;
  const size_t pieces = bounds.size() - 1;
  const double limit = 1.5 * static_cast<double>(bound_ns);
  for (size_t k = 0; k < pieces; ++k) {
    if (WorkIn(bounds[k], bounds[k + 1]) > 1 &&
        static_cast<double>(Estimate(bounds[k], bounds[k + 1])) > limit) {
      // Only worth it if the plan would cut it (a widened bound may not).
      return Plan(bound_ns, max_pieces) != bounds;
    }
  }
  const size_t planned = Plan(bound_ns, max_pieces).size() - 1;
  return 3 * planned <= 2 * pieces;
}

}  // namespace missile::pacing

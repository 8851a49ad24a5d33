#include "graphs.h"

#include <algorithm>

namespace fakecuda {

void Graph::Add(GraphOp op) {
  MutexLock lock(&mu_);
  if (finished_) return;
  nodes_.push_back(std::make_unique<Node>(Node{std::move(op)}));
  tail_ = reinterpret_cast<CUgraphNode>(nodes_.back().get());
}

void Graph::Finish() {
  MutexLock lock(&mu_);
  finished_ = true;
}

bool Graph::finished() const {
  MutexLock lock(&mu_);
  return finished_;
}

size_t Graph::size() const {
  MutexLock lock(&mu_);
  return nodes_.size();
}

void Graph::Nodes(CUgraphNode* out, size_t count) const {
  MutexLock lock(&mu_);
  count = std::min(count, nodes_.size());
  for (size_t i = 0; i < count; ++i) out[i] = reinterpret_cast<CUgraphNode>(nodes_[i].get());
}

std::vector<GraphOp> Graph::Ops() const {
  MutexLock lock(&mu_);
  std::vector<GraphOp> ops;
  ops.reserve(nodes_.size());
  for (const std::unique_ptr<Node>& node : nodes_) ops.push_back(node->op);
  return ops;
}

const CUgraphNode* Graph::Tail(size_t* count) const {
  MutexLock lock(&mu_);
  *count = nodes_.empty() ? 0 : 1;
  return nodes_.empty() ? nullptr : &tail_;
}

std::shared_ptr<Graph> GraphManager::CreateGraph() {
  auto graph = std::make_shared<Graph>();
  MutexLock lock(&mu_);
  graphs_[graph->handle()] = graph;
  return graph;
}

CUresult GraphManager::LookupGraph(CUgraph handle, std::shared_ptr<Graph>* out) {
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  MutexLock lock(&mu_);
  auto it = graphs_.find(handle);
  if (it == graphs_.end()) return CUDA_ERROR_INVALID_HANDLE;
  *out = it->second;
  return CUDA_SUCCESS;
}

CUresult GraphManager::DestroyGraph(CUgraph handle) {
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  MutexLock lock(&mu_);
  // Instances keep their own copy of the operations.
  return graphs_.erase(handle) != 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult GraphManager::Instantiate(CUgraph handle, CUgraphExec* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Graph> graph;
  if (CUresult r = LookupGraph(handle, &graph); r != CUDA_SUCCESS) return r;
  if (!graph->finished()) return CUDA_ERROR_INVALID_VALUE;
  auto exec = std::make_shared<GraphExec>(graph->Ops());
  MutexLock lock(&mu_);
  execs_[exec->handle()] = exec;
  *out = exec->handle();
  return CUDA_SUCCESS;
}

CUresult GraphManager::LookupExec(CUgraphExec handle, std::shared_ptr<GraphExec>* out) {
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  MutexLock lock(&mu_);
  auto it = execs_.find(handle);
  if (it == execs_.end()) return CUDA_ERROR_INVALID_HANDLE;
  *out = it->second;
  return CUDA_SUCCESS;
}

CUresult GraphManager::DestroyExec(CUgraphExec handle) {
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  MutexLock lock(&mu_);
  // Launches already queued hold copies of the operations.
  return execs_.erase(handle) != 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

}  // namespace fakecuda

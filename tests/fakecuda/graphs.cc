#include "graphs.h"

#include <algorithm>
#include <queue>

namespace fakecuda {

void Graph::Add(GraphOp op, CUgraphNodeType type) {
  auto node = std::make_unique<Node>();
  node->type = type;
  node->op = std::move(op);
  Append(std::move(node));
}

void Graph::AddKernel(KernelTask kernel) {
  auto node = std::make_unique<Node>();
  node->type = CU_GRAPH_NODE_TYPE_KERNEL;
  node->kernel = std::move(kernel);
  Append(std::move(node));
}

void Graph::Append(std::unique_ptr<Node> node) {
  MutexLock lock(&mu_);
  if (finished_) return;
  if (!nodes_.empty()) node->deps.push_back(nodes_.back().get());
  nodes_.push_back(std::move(node));
  tail_ = HandleOf(nodes_.back().get());
}

void Graph::Finish() {
  MutexLock lock(&mu_);
  finished_ = true;
}

bool Graph::finished() const {
  MutexLock lock(&mu_);
  return finished_;
}

Graph::Node* Graph::FindLocked(CUgraphNode handle) const {
  for (const std::unique_ptr<Node>& n : nodes_) {
    if (HandleOf(n.get()) == handle) return n.get();
  }
  return nullptr;
}

CUresult Graph::AddNode(CUgraphNodeType type, GraphOp op, std::shared_ptr<Graph> child,
                        const CUgraphNode* deps, size_t num_deps, CUgraphNode* out) {
  auto node = std::make_unique<Node>();
  node->type = type;
  node->op = std::move(op);
  node->child = std::move(child);
  return Insert(std::move(node), deps, num_deps, out);
}

CUresult Graph::AddKernelNode(KernelTask kernel, const CUgraphNode* deps, size_t num_deps,
                              CUgraphNode* out) {
  auto node = std::make_unique<Node>();
  node->type = CU_GRAPH_NODE_TYPE_KERNEL;
  node->kernel = std::move(kernel);
  return Insert(std::move(node), deps, num_deps, out);
}

CUresult Graph::Insert(std::unique_ptr<Node> node, const CUgraphNode* deps, size_t num_deps,
                       CUgraphNode* out) {
  if (out == nullptr || (num_deps != 0 && deps == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  MutexLock lock(&mu_);
  if (!finished_) return CUDA_ERROR_INVALID_VALUE;  // being captured
  for (size_t i = 0; i < num_deps; ++i) {
    Node* dep = FindLocked(deps[i]);
    if (dep == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (std::find(node->deps.begin(), node->deps.end(), dep) != node->deps.end()) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    node->deps.push_back(dep);
  }
  *out = HandleOf(node.get());
  nodes_.push_back(std::move(node));
  return CUDA_SUCCESS;
}

CUresult Graph::AddDependency(CUgraphNode from, CUgraphNode to) {
  MutexLock lock(&mu_);
  Node* f = FindLocked(from);
  Node* t = FindLocked(to);
  if (f == nullptr || t == nullptr || f == t) return CUDA_ERROR_INVALID_VALUE;
  if (std::find(t->deps.begin(), t->deps.end(), f) != t->deps.end()) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  t->deps.push_back(f);
  return CUDA_SUCCESS;
}

CUresult Graph::DestroyNode(CUgraphNode handle) {
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  MutexLock lock(&mu_);
  Node* node = FindLocked(handle);
  if (node == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (const std::unique_ptr<Node>& n : nodes_) {
    std::erase(n->deps, node);
  }
  std::erase_if(nodes_, [node](const std::unique_ptr<Node>& n) { return n.get() == node; });
  if (tail_ == handle) tail_ = nodes_.empty() ? nullptr : HandleOf(nodes_.back().get());
  return CUDA_SUCCESS;
}

bool Graph::Owns(CUgraphNode node) const {
  MutexLock lock(&mu_);
  return FindLocked(node) != nullptr;
}

size_t Graph::size() const {
  MutexLock lock(&mu_);
  return nodes_.size();
}

void Graph::Nodes(CUgraphNode* out, size_t count) const {
  MutexLock lock(&mu_);
  count = std::min(count, nodes_.size());
  for (size_t i = 0; i < count; ++i) out[i] = HandleOf(nodes_[i].get());
}

std::vector<std::pair<CUgraphNode, CUgraphNode>> Graph::Edges() const {
  MutexLock lock(&mu_);
  std::vector<std::pair<CUgraphNode, CUgraphNode>> edges;
  for (const std::unique_ptr<Node>& n : nodes_) {
    for (const Node* dep : n->deps) edges.emplace_back(HandleOf(dep), HandleOf(n.get()));
  }
  return edges;
}

CUresult Graph::NodeType(CUgraphNode handle, CUgraphNodeType* type) const {
  if (handle == nullptr || type == nullptr) return CUDA_ERROR_INVALID_VALUE;
  MutexLock lock(&mu_);
  const Node* node = FindLocked(handle);
  if (node == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *type = node->type;
  return CUDA_SUCCESS;
}

CUresult Graph::Child(CUgraphNode handle, std::shared_ptr<Graph>* child) const {
  MutexLock lock(&mu_);
  const Node* node = FindLocked(handle);
  if (node == nullptr || node->type != CU_GRAPH_NODE_TYPE_GRAPH) return CUDA_ERROR_INVALID_VALUE;
  *child = node->child;
  return CUDA_SUCCESS;
}

std::shared_ptr<Graph> Graph::Clone() const {
  std::vector<std::unique_ptr<Node>> copies;
  {
    MutexLock lock(&mu_);
    std::unordered_map<const Node*, Node*> copy_of;
    for (const std::unique_ptr<Node>& n : nodes_) {
      auto c = std::make_unique<Node>();
      c->type = n->type;
      c->op = n->op;
      c->kernel = n->kernel;
      c->child = n->child;  // embedded graphs do not change once embedded
      c->cloned_from = n.get();
      copy_of[n.get()] = c.get();
      copies.push_back(std::move(c));
    }
    for (size_t i = 0; i < nodes_.size(); ++i) {
      for (const Node* dep : nodes_[i]->deps) copies[i]->deps.push_back(copy_of[dep]);
    }
  }
  auto clone = std::make_shared<Graph>();
  MutexLock lock(&clone->mu_);
  clone->nodes_ = std::move(copies);
  return clone;
}

CUresult Graph::FindInClone(CUgraphNode original, CUgraphNode* out) const {
  if (original == nullptr || out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  MutexLock lock(&mu_);
  for (const std::unique_ptr<Node>& n : nodes_) {
    if (HandleOf(n->cloned_from) == original) {
      *out = HandleOf(n.get());
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult Graph::Linearize(std::vector<Step>* out) const {
  MutexLock lock(&mu_);
  std::unordered_map<const Node*, size_t> index;
  for (size_t i = 0; i < nodes_.size(); ++i) index[nodes_[i].get()] = i;
  std::vector<size_t> waiting(nodes_.size(), 0);
  std::vector<std::vector<size_t>> dependents(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    waiting[i] = nodes_[i]->deps.size();
    for (const Node* dep : nodes_[i]->deps) dependents[index[dep]].push_back(i);
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (waiting[i] == 0) ready.push(i);
  }
  size_t done = 0;
  while (!ready.empty()) {
    const size_t i = ready.top();
    ready.pop();
    ++done;
    const Node& n = *nodes_[i];
    if (n.type == CU_GRAPH_NODE_TYPE_GRAPH && n.child != nullptr) {
      std::vector<Step> inner;
      if (CUresult r = n.child->Linearize(&inner); r != CUDA_SUCCESS) return r;
      for (Step& s : inner) {
        out->push_back(
            {HandleOf(&n), CU_GRAPH_NODE_TYPE_GRAPH, std::move(s.op), std::move(s.kernel), {}});
      }
    } else {
      out->push_back({HandleOf(&n), n.type, n.op, n.kernel, {}});
    }
    for (size_t j : dependents[i]) {
      if (--waiting[j] == 0) ready.push(j);
    }
  }
  return done == nodes_.size() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

const CUgraphNode* Graph::Tail(size_t* count) const {
  MutexLock lock(&mu_);
  *count = nodes_.empty() ? 0 : 1;
  return nodes_.empty() ? nullptr : &tail_;
}

void GraphExec::Upload(const LaunchCallbacks& callbacks, bool first_only) {
  if (first_only && uploaded_.load(std::memory_order_acquire)) return;
  MutexLock upload(&upload_mu_);
  if (first_only && uploaded_.load(std::memory_order_acquire)) return;
  size_t kernels = 0;
  {
    MutexLock lock(&mu_);
    for (const Graph::Step& s : steps_) kernels += s.kernel ? 1 : 0;
  }
  // The callbacks run without mu_: they may call into the driver.
  std::vector<TpcMask> masks(kernels);
  for (TpcMask& m : masks) m = callbacks.DisabledTpcs();
  MutexLock lock(&mu_);
  auto mask = masks.begin();
  for (Graph::Step& s : steps_) {
    if (s.kernel && mask != masks.end()) s.disabled = *mask++;
  }
  uploaded_.store(true, std::memory_order_release);
}

std::vector<GraphOp> GraphExec::Ops() const {
  MutexLock lock(&mu_);
  std::vector<GraphOp> ops;
  ops.reserve(steps_.size());
  for (const Graph::Step& s : steps_) {
    if (s.kernel) {
      ops.push_back([kernel = s.kernel, disabled = s.disabled] { kernel(disabled); });
    } else if (s.op) {
      ops.push_back(s.op);
    }
  }
  return ops;
}

CUresult GraphExec::SetKernel(CUgraphNode node, KernelTask kernel) {
  MutexLock lock(&mu_);
  for (Graph::Step& s : steps_) {
    if (s.node == node && s.type == CU_GRAPH_NODE_TYPE_KERNEL) {
      s.kernel = std::move(kernel);
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;
}

bool GraphExec::Update(std::vector<Graph::Step> steps) {
  MutexLock lock(&mu_);
  if (steps.size() != steps_.size()) return false;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].type != steps_[i].type) return false;
  }
  // Node handles stay those of the graph the instance was made from.
  for (size_t i = 0; i < steps.size(); ++i) {
    steps_[i].op = std::move(steps[i].op);
    steps_[i].kernel = std::move(steps[i].kernel);
  }
  return true;
}

std::shared_ptr<Graph> GraphManager::CreateGraph(bool captured) {
  auto graph = std::make_shared<Graph>(captured);
  Register(graph);
  return graph;
}

void GraphManager::Register(const std::shared_ptr<Graph>& graph) {
  MutexLock lock(&mu_);
  graphs_[graph->handle()] = graph;
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

CUresult GraphManager::OwnerOf(CUgraphNode node, std::shared_ptr<Graph>* out) {
  if (node == nullptr) return CUDA_ERROR_INVALID_VALUE;
  MutexLock lock(&mu_);
  for (const auto& [handle, graph] : graphs_) {
    if (graph->Owns(node)) {
      *out = graph;
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult GraphManager::Instantiate(CUgraph handle, uint64_t flags, CUgraphExec* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Graph> graph;
  if (CUresult r = LookupGraph(handle, &graph); r != CUDA_SUCCESS) return r;
  if (!graph->finished()) return CUDA_ERROR_INVALID_VALUE;
  std::vector<Graph::Step> steps;
  if (CUresult r = graph->Linearize(&steps); r != CUDA_SUCCESS) return r;
  auto exec = std::make_shared<GraphExec>(std::move(steps), flags);
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

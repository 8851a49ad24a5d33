#include "streams.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "fake_state.h"
#include "graphs.h"

namespace fakecuda {
namespace {

// The calling thread's per-thread default streams, one per context; ended with the thread.
struct PerThreadStreams {
  std::unordered_map<Context*, std::shared_ptr<Stream>> by_context;
  ~PerThreadStreams() {
    for (auto& [ctx, stream] : by_context) stream->Close();
  }
};
thread_local PerThreadStreams t_streams;

constexpr int kGreatestPriority = -5;  // cuCtxGetStreamPriorityRange on Hopper: [-5, 0]
constexpr int kLeastPriority = 0;

}  // namespace

Stream::Stream(Context* ctx, unsigned flags, int priority)
    : ctx_(ctx), flags_(flags), priority_(priority) {}

void Stream::Start() {
  std::thread([self = shared_from_this()] { self->Run(); }).detach();
}

void Stream::Run() {
  MutexLock lock(&mu_);
  while (true) {
    lock.Wait(work_cv_, [this]() FAKECUDA_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !queue_.empty() || closing_;
    });
    if (queue_.empty()) break;  // closing and drained
    Item item = std::move(queue_.front());
    queue_.pop_front();
    lock.Unlock();
    if (item.op) item.op();
    item.op = nullptr;  // release captures before reporting completion
    State().engine().Finished(ctx_->device);
    lock.Lock();
    if (item.mark) item.mark();
    item.mark = nullptr;
    ++completed_;
    done_cv_.notify_all();
  }
}

uint64_t Stream::EnqueueMarked(Op op, Op mark) {
  MutexLock lock(&mu_);
  // Like a GPU's command queue, a stream holds a bounded number of operations; past that the
  // enqueueing thread waits for the stream to drain (FAKECUDA_STREAM_DEPTH, default 1024).
  static const size_t depth = [] {
    const char* v = getenv("FAKECUDA_STREAM_DEPTH");
    long n = v != nullptr ? atol(v) : 0;
    return n > 0 ? static_cast<size_t>(n) : size_t{1024};
  }();
  lock.Wait(done_cv_, [&]() FAKECUDA_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return queue_.size() < depth || closing_;
  });
  if (closing_) return completed_;  // nothing to wait for
  // Queued work is what keeps this process's time slice on the engine (engine.h).
  State().engine().Enqueued(ctx_->device);
  queue_.push_back(Item{std::move(op), std::move(mark)});
  work_cv_.notify_one();
  return ++enqueued_;
}

void Stream::WaitFor(uint64_t seq) {
  MutexLock lock(&mu_);
  lock.Wait(done_cv_, [&]() FAKECUDA_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return completed_ >= seq; });
}

void Stream::Synchronize() {
  uint64_t target = 0;
  {
    MutexLock lock(&mu_);
    target = enqueued_;
  }
  WaitFor(target);
}

CUresult Stream::Submit(Op op, CUgraphNodeType type, bool wait) {
  {
    MutexLock lock(&mu_);
    if (capture_ != nullptr) {
      if (capture_invalidated_) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
      capture_->Add(std::move(op), type);
      return CUDA_SUCCESS;
    }
  }
  const uint64_t seq = Enqueue(std::move(op));
  if (wait) WaitFor(seq);
  return CUDA_SUCCESS;
}

CUresult Stream::SubmitKernel(KernelTask task, const LaunchCallbacks& callbacks) {
  {
    MutexLock lock(&mu_);
    if (capture_ != nullptr) {
      if (capture_invalidated_) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
      capture_->AddKernel(std::move(task));
      return CUDA_SUCCESS;
    }
  }
  // No lock held: a callback may call into the driver.
  const TpcMask disabled = callbacks.DisabledTpcs();
  Enqueue([task = std::move(task), disabled] { task(disabled); });
  return CUDA_SUCCESS;
}

CUresult Stream::BeginCapture(std::shared_ptr<Graph> graph, uint64_t id) {
  MutexLock lock(&mu_);
  if (capture_ != nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  capture_ = std::move(graph);
  capture_id_ = id;
  capture_invalidated_ = false;
  return CUDA_SUCCESS;
}

CUresult Stream::EndCapture(std::shared_ptr<Graph>* graph) {
  MutexLock lock(&mu_);
  if (capture_ == nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  *graph = std::move(capture_);
  capture_ = nullptr;
  capture_id_ = 0;
  (*graph)->Finish();
  return capture_invalidated_ ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
}

Stream::CaptureInfo Stream::Capture() const {
  MutexLock lock(&mu_);
  CaptureInfo info;
  if (capture_ != nullptr) {
    info.status = capture_invalidated_ ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                       : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    info.id = capture_id_;
    info.graph = capture_;
  }
  return info;
}

CUresult Stream::RefuseDuringCapture() {
  MutexLock lock(&mu_);
  if (capture_ == nullptr) return CUDA_SUCCESS;
  capture_invalidated_ = true;
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

bool Stream::Idle() const {
  MutexLock lock(&mu_);
  return completed_ == enqueued_;
}

void Stream::Close() {
  MutexLock lock(&mu_);
  closing_ = true;
  work_cv_.notify_one();
}

bool Stream::closed() const {
  MutexLock lock(&mu_);
  return closing_;
}

uint64_t Event::BeginRecord() {
  MutexLock lock(&mu_);
  capture_id_.store(0);
  return ++recorded_;
}

void Event::Complete(uint64_t generation, uint64_t time_ns) {
  MutexLock lock(&mu_);
  if (generation <= completed_) return;  // a later record already completed
  completed_ = generation;
  time_ns_ = time_ns;
  cv_.notify_all();
}

CUresult Event::Query() const {
  MutexLock lock(&mu_);
  return completed_ >= recorded_ ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

void Event::Synchronize() const { WaitFor(LatestRecord()); }

uint64_t Event::LatestRecord() const {
  MutexLock lock(&mu_);
  return recorded_;
}

void Event::WaitFor(uint64_t generation) const {
  MutexLock lock(&mu_);
  lock.Wait(cv_, [&]() FAKECUDA_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return completed_ >= generation; });
}

CUresult Event::ElapsedMs(const Event& end, float* ms) const {
  if ((flags_ & CU_EVENT_DISABLE_TIMING) != 0 || (end.flags_ & CU_EVENT_DISABLE_TIMING) != 0) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  {
    MutexLock lock(&mu_);
    if (recorded_ == 0) return CUDA_ERROR_INVALID_HANDLE;
    if (completed_ < recorded_) return CUDA_ERROR_NOT_READY;
    start_ns = time_ns_;
  }
  {
    MutexLock lock(&end.mu_);
    if (end.recorded_ == 0) return CUDA_ERROR_INVALID_HANDLE;
    if (end.completed_ < end.recorded_) return CUDA_ERROR_NOT_READY;
    end_ns = end.time_ns_;
  }
  *ms = static_cast<float>((static_cast<double>(end_ns) - static_cast<double>(start_ns)) / 1e6);
  return CUDA_SUCCESS;
}

StreamManager::StreamManager(FakeState* state) : state_(state) {}

void StreamManager::ResetThreadAfterFork() {
  // The parent's workers do not exist in the child; leak the objects instead of closing them.
  new std::unordered_map<Context*, std::shared_ptr<Stream>>(std::move(t_streams.by_context));
  t_streams.by_context.clear();
}

CUresult StreamManager::Create(Context* ctx, unsigned flags, int priority, CUstream* out) {
  if (out == nullptr || (flags & ~static_cast<unsigned>(CU_STREAM_NON_BLOCKING)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  priority = std::clamp(priority, kGreatestPriority, kLeastPriority);
  auto stream = std::make_shared<Stream>(ctx, flags, priority);
  stream->Start();
  MutexLock lock(&mu_);
  streams_[stream->handle()] = stream;
  *out = stream->handle();
  return CUDA_SUCCESS;
}

CUresult StreamManager::Destroy(CUstream handle) {
  std::shared_ptr<Stream> stream;
  {
    MutexLock lock(&mu_);
    auto it = streams_.find(handle);
    if (it == streams_.end()) return CUDA_ERROR_INVALID_HANDLE;
    stream = std::move(it->second);
    streams_.erase(it);
  }
  stream->Close();
  return CUDA_SUCCESS;
}

std::shared_ptr<Stream> StreamManager::PerThreadStream(Context* ctx) {
  std::shared_ptr<Stream>& slot = t_streams.by_context[ctx];
  if (slot == nullptr || slot->closed()) {
    slot = std::make_shared<Stream>(ctx, 0, kLeastPriority);
    slot->Start();
    MutexLock lock(&mu_);
    std::vector<std::weak_ptr<Stream>>& list = per_thread_[ctx];
    std::erase_if(list, [](const std::weak_ptr<Stream>& w) { return w.expired(); });
    list.push_back(slot);
  }
  return slot;
}

CUresult StreamManager::Resolve(CUstream handle, DefaultStream mode, std::shared_ptr<Stream>* out) {
  const bool is_default =
      handle == nullptr || handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD;
  if (!is_default) {
    MutexLock lock(&mu_);
    auto it = streams_.find(handle);
    if (it == streams_.end()) return CUDA_ERROR_INVALID_HANDLE;
    *out = it->second;
    return CUDA_SUCCESS;
  }
  Context* ctx = nullptr;
  if (CUresult r = state_->contexts().Current(&ctx); r != CUDA_SUCCESS) return r;
  const bool per_thread =
      handle == CU_STREAM_PER_THREAD || (handle == nullptr && mode == DefaultStream::kPerThread);
  if (per_thread) {
    *out = PerThreadStream(ctx);
    return CUDA_SUCCESS;
  }
  MutexLock lock(&mu_);
  std::shared_ptr<Stream>& slot = legacy_[ctx];
  if (slot == nullptr || slot->closed()) {
    slot = std::make_shared<Stream>(ctx, 0, kLeastPriority);
    slot->Start();
  }
  *out = slot;
  return CUDA_SUCCESS;
}

std::vector<std::shared_ptr<Stream>> StreamManager::StreamsOf(Context* ctx) {
  std::vector<std::shared_ptr<Stream>> result;
  MutexLock lock(&mu_);
  for (auto& [handle, stream] : streams_) {
    if (stream->ctx() == ctx) result.push_back(stream);
  }
  if (auto it = legacy_.find(ctx); it != legacy_.end() && it->second) {
    result.push_back(it->second);
  }
  if (auto it = per_thread_.find(ctx); it != per_thread_.end()) {
    for (const std::weak_ptr<Stream>& w : it->second) {
      if (std::shared_ptr<Stream> s = w.lock()) result.push_back(std::move(s));
    }
  }
  return result;
}

void StreamManager::SynchronizeContext(Context* ctx) {
  for (const std::shared_ptr<Stream>& s : StreamsOf(ctx)) s->Synchronize();
}

void StreamManager::ReleaseContext(Context* ctx) {
  std::vector<std::shared_ptr<Stream>> streams = StreamsOf(ctx);
  {
    MutexLock lock(&mu_);
    std::erase_if(streams_, [ctx](const auto& entry) { return entry.second->ctx() == ctx; });
    legacy_.erase(ctx);
    per_thread_.erase(ctx);
  }
  for (const std::shared_ptr<Stream>& s : streams) {
    s->Synchronize();
    s->Close();
  }
}

CUresult StreamManager::CreateEvent(Context* ctx, unsigned flags, CUevent* out) {
  constexpr unsigned kValid =
      CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  if (out == nullptr || (flags & ~kValid) != 0) return CUDA_ERROR_INVALID_VALUE;
  if ((flags & CU_EVENT_INTERPROCESS) != 0 && (flags & CU_EVENT_DISABLE_TIMING) == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto event = std::make_shared<Event>(ctx, flags);
  const auto handle = reinterpret_cast<CUevent>(event.get());
  MutexLock lock(&mu_);
  events_[handle] = std::move(event);
  *out = handle;
  return CUDA_SUCCESS;
}

CUresult StreamManager::DestroyEvent(CUevent handle) {
  MutexLock lock(&mu_);
  // Pending records keep the Event alive through their shared_ptr.
  return events_.erase(handle) != 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult StreamManager::LookupEvent(CUevent handle, std::shared_ptr<Event>* out) {
  MutexLock lock(&mu_);
  auto it = events_.find(handle);
  if (it == events_.end()) return CUDA_ERROR_INVALID_HANDLE;
  *out = it->second;
  return CUDA_SUCCESS;
}

}  // namespace fakecuda

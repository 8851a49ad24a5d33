#include "context.h"

#include "fake_state.h"

namespace fakecuda {
namespace {

// The calling thread's context stack; the back is the current context.
thread_local std::vector<Context*> t_stack;

constexpr unsigned kValidCtxFlags = 0xff;  // CU_CTX_SCHED_* | MAP_HOST | ... | SYNC_MEMOPS

bool ValidFlags(unsigned flags) {
  if ((flags & ~kValidCtxFlags) != 0) return false;
  const unsigned sched = flags & CU_CTX_SCHED_MASK;
  return sched == CU_CTX_SCHED_AUTO || sched == CU_CTX_SCHED_SPIN || sched == CU_CTX_SCHED_YIELD ||
         sched == CU_CTX_SCHED_BLOCKING_SYNC;
}

}  // namespace

ContextManager::ContextManager(FakeState* state) : state_(state) {}

void ContextManager::ResetThreadAfterFork() {
  // Leak rather than destroy: nothing here owns anything, but keep it trivially safe.
  t_stack.clear();
}

int ContextManager::device_count() const { return state_->config().num_devices; }

CUresult ContextManager::CheckDevice(CUdevice dev) const {
  return (dev >= 0 && dev < device_count()) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

bool ContextManager::KnownLocked(Context* ctx) const { return known_.count(ctx) != 0; }

Context* ContextManager::NewContextLocked(int device, bool primary) {
  auto ctx = std::make_unique<Context>();
  ctx->device = device;
  ctx->primary = primary;
  ctx->id = next_id_++;
  Context* raw = ctx.get();
  all_.push_back(std::move(ctx));
  known_.insert(raw);
  return raw;
}

CUresult ContextManager::Current(Context** ctx) const {
  if (t_stack.empty() || t_stack.back() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  Context* c = t_stack.back();
  if (!c->active.load(std::memory_order_acquire)) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  *ctx = c;
  return CUDA_SUCCESS;
}

CUresult ContextManager::Resolve(CUcontext handle, Context** ctx) const {
  if (handle == nullptr) return Current(ctx);
  auto* c = reinterpret_cast<Context*>(handle);
  {
    MutexLock lock(&mu_);
    if (!KnownLocked(c)) return CUDA_ERROR_INVALID_CONTEXT;
  }
  if (!c->active.load(std::memory_order_acquire)) return CUDA_ERROR_INVALID_CONTEXT;
  *ctx = c;
  return CUDA_SUCCESS;
}

CUresult ContextManager::PrimaryRetain(CUdevice dev, CUcontext* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = CheckDevice(dev); r != CUDA_SUCCESS) return r;
  MutexLock lock(&mu_);
  if (primary_[dev] == nullptr) primary_[dev] = NewContextLocked(dev, /*primary=*/true);
  Context* ctx = primary_[dev];
  if (primary_refs_[dev]++ == 0) {
    ctx->flags.store(primary_flags_[dev]);
    ctx->active.store(true, std::memory_order_release);
  }
  *out = ctx->handle();
  return CUDA_SUCCESS;
}

CUresult ContextManager::PrimaryRelease(CUdevice dev) {
  if (CUresult r = CheckDevice(dev); r != CUDA_SUCCESS) return r;
  Context* to_teardown = nullptr;
  {
    MutexLock lock(&mu_);
    if (primary_refs_[dev] == 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (--primary_refs_[dev] == 0) {
      to_teardown = primary_[dev];
      to_teardown->active.store(false, std::memory_order_release);
    }
  }
  if (to_teardown != nullptr) Teardown(to_teardown);
  return CUDA_SUCCESS;
}

CUresult ContextManager::PrimaryReset(CUdevice dev) {
  if (CUresult r = CheckDevice(dev); r != CUDA_SUCCESS) return r;
  Context* to_teardown = nullptr;
  {
    MutexLock lock(&mu_);
    if (primary_[dev] != nullptr && primary_refs_[dev] > 0) {
      to_teardown = primary_[dev];
      to_teardown->active.store(false, std::memory_order_release);
    }
    primary_refs_[dev] = 0;
  }
  if (to_teardown != nullptr) Teardown(to_teardown);
  return CUDA_SUCCESS;
}

CUresult ContextManager::PrimarySetFlags(CUdevice dev, unsigned flags) {
  if (CUresult r = CheckDevice(dev); r != CUDA_SUCCESS) return r;
  if (!ValidFlags(flags)) return CUDA_ERROR_INVALID_VALUE;
  MutexLock lock(&mu_);
  primary_flags_[dev] = flags;
  if (primary_[dev] != nullptr) primary_[dev]->flags.store(flags);
  return CUDA_SUCCESS;
}

CUresult ContextManager::PrimaryGetState(CUdevice dev, unsigned* flags, int* active) {
  if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = CheckDevice(dev); r != CUDA_SUCCESS) return r;
  MutexLock lock(&mu_);
  *flags = primary_flags_[dev];
  *active = primary_refs_[dev] > 0 ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult ContextManager::Create(CUdevice dev, unsigned flags, CUcontext* out) {
  if (out == nullptr || !ValidFlags(flags)) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = CheckDevice(dev); r != CUDA_SUCCESS) return r;
  Context* ctx = nullptr;
  {
    MutexLock lock(&mu_);
    ctx = NewContextLocked(dev, /*primary=*/false);
    ctx->flags.store(flags);
    ctx->active.store(true, std::memory_order_release);
  }
  t_stack.push_back(ctx);  // cuCtxCreate makes the new context current (pushes it)
  *out = ctx->handle();
  return CUDA_SUCCESS;
}

CUresult ContextManager::Destroy(CUcontext handle) {
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* ctx = reinterpret_cast<Context*>(handle);
  {
    MutexLock lock(&mu_);
    if (!KnownLocked(ctx) || ctx->primary || !ctx->active.load()) {
      return CUDA_ERROR_INVALID_CONTEXT;
    }
    ctx->active.store(false, std::memory_order_release);
  }
  // "If the context is current to the calling thread then it is also popped."
  if (!t_stack.empty() && t_stack.back() == ctx) t_stack.pop_back();
  Teardown(ctx);
  return CUDA_SUCCESS;
}

void ContextManager::Teardown(Context* ctx) {
  state_->streams().ReleaseContext(ctx);
  state_->modules().ReleaseContext(ctx);
  state_->memory().ReleaseContext(ctx);
}

CUresult ContextManager::SetCurrent(CUcontext handle) {
  if (handle == nullptr) {
    if (!t_stack.empty()) t_stack.pop_back();
    return CUDA_SUCCESS;
  }
  Context* ctx = nullptr;
  if (CUresult r = Resolve(handle, &ctx); r != CUDA_SUCCESS) return r;
  if (t_stack.empty()) {
    t_stack.push_back(ctx);
  } else {
    t_stack.back() = ctx;
  }
  return CUDA_SUCCESS;
}

CUresult ContextManager::GetCurrent(CUcontext* out) const {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *out = t_stack.empty() || t_stack.back() == nullptr ? nullptr : t_stack.back()->handle();
  return CUDA_SUCCESS;
}

CUresult ContextManager::Push(CUcontext handle) {
  if (handle == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  Context* ctx = nullptr;
  if (CUresult r = Resolve(handle, &ctx); r != CUDA_SUCCESS) return r;
  t_stack.push_back(ctx);
  return CUDA_SUCCESS;
}

CUresult ContextManager::Pop(CUcontext* out) {
  if (t_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  Context* ctx = t_stack.back();
  t_stack.pop_back();
  if (out != nullptr) *out = ctx == nullptr ? nullptr : ctx->handle();
  return CUDA_SUCCESS;
}

CUresult ContextManager::Synchronize(Context* ctx) {
  state_->streams().SynchronizeContext(ctx);
  return CUDA_SUCCESS;
}

}  // namespace fakecuda

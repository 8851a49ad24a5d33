#include "memory.h"

#include <unistd.h>

#include <algorithm>
#include <string>

#include "session_gpu.h"

namespace missile::shim {
namespace {

uint64_t RoundUp(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

}  // namespace

MemoryManager::MemoryManager(const Config& config, const DriverApi& api, SessionManager* sessions,
                             spdlog::logger* log)
    : config_(config),
      api_(api),
      sessions_(sessions),
      log_(log),
      deferred_(api, [this](CUdeviceptr ptr, const AllocationTable::Entry& entry) {
        if (absl::Status s = FreeManaged(ptr, entry, /*sync=*/false); !s.ok()) {
          log_->error("deferred free: {}", std::string(s.message()));
        }
      }) {
  sessions_->SetEndListener([this](SessionClient* ended) { SessionEnded(ended); });
}

MemoryManager::~MemoryManager() { sessions_->SetEndListener(nullptr); }

uint64_t MemoryManager::leased_bytes() const {
  uint64_t bytes = 0;
  sessions_->ForEachGpu([&](const SessionGpu& g) {
    if (const GpuMemory* d = g.memory()) bytes += d->leased_bytes();
  });
  return bytes;
}

void MemoryManager::SessionEnded(SessionClient* ended) {
  // Its reuse caches would never be used again: unmap them now, so the memory goes back to
  // the GPU rather than waiting for the program's next free on each GPU.
  std::vector<GpuMemory*> states;
  sessions_->ForEachGpu([&](const SessionGpu& g) {
    if (g.session() == ended && g.memory() != nullptr) states.push_back(g.memory());
  });
  for (GpuMemory* d : states) d->ReturnFreed();
}

std::optional<CUresult> MemoryManager::Unmanaged(const char* what, uint64_t bytes) {
  (void)what;
  if (config_.refuse_without_daemon) return CUDA_ERROR_OUT_OF_MEMORY;
  sessions_->NotePassthrough(bytes);  // reported when registering again and at exit
  return std::nullopt;
}

absl::StatusOr<GpuMemory*> MemoryManager::DeviceOf(CUdevice dev) {
  SessionGpu* gpu = sessions_->GpuOf(dev);
  if (gpu == nullptr) return absl::UnavailableError("no daemon");
  if (GpuMemory* made = gpu->memory()) return made;
  return gpu->Memory([&](const GpuLink& link) -> absl::StatusOr<std::unique_ptr<GpuMemory>> {
    absl::StatusOr<std::unique_ptr<GpuMemory>> made = GpuMemory::Create(
        gpu->session(), link, dev, next_serial_.fetch_add(1), config_, api_, log_);
    if (!made.ok()) {
      // The program then uses the driver directly on this GPU: say so once.
      if (!setup_failure_logged_.exchange(true)) {
        log_->warn("{} failed; its allocations go to the driver directly",
                   std::string(made.status().message()));
      }
      return made.status();
    }
    absl::MutexLock lock(&serials_mu_);
    by_serial_[(*made)->serial()] = made->get();  // SessionGpu keeps it for good
    return made;
  });
}

GpuMemory* MemoryManager::StateOf(CUdevice dev) {
  SessionGpu* gpu = sessions_->GpuOf(dev);
  return gpu == nullptr ? nullptr : gpu->memory();
}

absl::StatusOr<GpuMemory*> MemoryManager::CurrentDevice() {
  CUdevice dev = 0;
  if (CUresult r = api_.CtxGetDevice(&dev); r != CUDA_SUCCESS) {
    return DriverStatus(api_, "cuCtxGetDevice", r);
  }
  return DeviceOf(dev);
}

CUresult MemoryManager::ToResult(const absl::Status& s, const char* what) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
      log_->warn("{}: {}", what, std::string(s.message()));
      return CUDA_ERROR_INVALID_VALUE;
    case absl::StatusCode::kResourceExhausted:
      log_->info("{}: {}", what, std::string(s.message()));
      return CUDA_ERROR_OUT_OF_MEMORY;
    default:
      log_->error("{}: {}", what, std::string(s.message()));
      return CUDA_ERROR_OUT_OF_MEMORY;
  }
}

std::optional<CUresult> MemoryManager::Alloc(CUdeviceptr* dptr, size_t bytes) {
  if (dptr == nullptr || bytes == 0) return std::nullopt;  // the driver's own error
  absl::StatusOr<GpuMemory*> d = absl::UnavailableError("no daemon");
  absl::StatusOr<CUdeviceptr> ptr = absl::UnavailableError("no daemon");
  bool small = false;
  // A second try only if the session changed during the first (a restarted daemon took over).
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (sessions_->Serving() == nullptr) return Unmanaged("cuMemAlloc", bytes);
    deferred_.Reap(/*wait=*/false);
    d = CurrentDevice();
    // No current context, or a GPU the daemon does not manage: the driver answers for itself.
    if (!d.ok()) return std::nullopt;
    small = bytes <= (*d)->small_max();
    auto relieve = [this] { deferred_.Reap(/*wait=*/true); };
    ptr = small ? (*d)->AllocSmall(bytes, relieve) : (*d)->AllocLarge(bytes, relieve);
    // A daemon that just died answers UNAVAILABLE a moment before the session's watch stream
    // says it ended: give it that moment, so the allocation follows MISSILE_NO_DAEMON.
    if (!ptr.ok() && ptr.status().code() == absl::StatusCode::kUnavailable) {
      (*d)->session()->AwaitEnd(absl::Milliseconds(500));
    }
    if (ptr.ok() || (*d)->session()->connected()) break;
  }
  if (!ptr.ok()) {
    // The session ended during the call: as for any allocation after that.
    if (sessions_->Serving() == nullptr) return Unmanaged("cuMemAlloc", bytes);
    return ToResult(ptr.status(), "cuMemAlloc");
  }
  absl::Status s = table_.Insert(*ptr, bytes, small ? AllocationKind::kSmall : AllocationKind::kLarge,
                                 (*d)->serial());
  if (!s.ok()) return ToResult(s, "cuMemAlloc");
  allocations_.fetch_add(1, std::memory_order_relaxed);
  *dptr = *ptr;
  return CUDA_SUCCESS;
}

std::optional<CUresult> MemoryManager::AllocPitch(CUdeviceptr* dptr, size_t* pitch,
                                                  size_t width_bytes, size_t height,
                                                  unsigned element_bytes) {
  if (dptr == nullptr || pitch == nullptr || width_bytes == 0 || height == 0 ||
      !(element_bytes == 4 || element_bytes == 8 || element_bytes == 16)) {
    return std::nullopt;  // the driver reports the bad argument
  }
  if (sessions_->Serving() == nullptr) {
    return Unmanaged("cuMemAllocPitch", uint64_t{width_bytes} * height);
  }
  auto d = CurrentDevice();
  if (!d.ok()) return std::nullopt;
  int align = 0;
  if (api_.DeviceGetAttribute(&align, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, (*d)->dev()) !=
          CUDA_SUCCESS ||
      align <= 0) {
    align = 512;
  }
  size_t p = RoundUp(width_bytes, static_cast<uint64_t>(align));
  if (p != 0 && height > SIZE_MAX / p) return CUDA_ERROR_INVALID_VALUE;
  std::optional<CUresult> r = Alloc(dptr, p * height);
  if (r.has_value() && *r == CUDA_SUCCESS) *pitch = p;
  return r;
}

absl::Status MemoryManager::FreeManaged(CUdeviceptr dptr, const AllocationTable::Entry& entry,
                                        bool sync) {
  GpuMemory* d = nullptr;
  {
    absl::MutexLock lock(&serials_mu_);
    auto it = by_serial_.find(entry.cookie);
    if (it == by_serial_.end()) return absl::InternalError("allocation of an unknown device");
    d = it->second;
  }
  // cuMemFree waits for the device before memory goes away; so must we, since unmapping
  // memory a kernel still uses would fault it.
  if (sync) api_.CtxSynchronize();
  return d->Free(dptr, entry.kind);
}

std::optional<CUresult> MemoryManager::Free(CUdeviceptr dptr) {
  if (dptr == 0) return std::nullopt;
  if (Captured(dptr)) return CUDA_SUCCESS;  // a graph may still use it (CapturedAlloc)
  auto entry = table_.Erase(dptr);
  if (!entry.ok()) return std::nullopt;  // not ours: the driver's (or its error)
  absl::Status s = FreeManaged(dptr, *entry, /*sync=*/true);
  if (!s.ok()) return ToResult(s, "cuMemFree");
  return CUDA_SUCCESS;
}

std::optional<CUresult> MemoryManager::AllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream stream,
                                                  bool ptsz) {
  if (dptr == nullptr || bytes == 0) return std::nullopt;  // the driver's own error
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  auto is_capturing = ptsz ? api_.StreamIsCapturingPtsz : api_.StreamIsCapturing;
  if (is_capturing != nullptr) {
    // A stream the driver cannot tell about (an unknown handle, the legacy stream while another
    // captures globally) is one it would refuse to allocate on as well.
    if (CUresult r = is_capturing(stream, &capture); r != CUDA_SUCCESS) return r;
  }
  if (capture == CU_STREAM_CAPTURE_STATUS_INVALIDATED) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  if (capture == CU_STREAM_CAPTURE_STATUS_ACTIVE) return CapturedAlloc(dptr, bytes);
  // Allocating now is always safe for stream order: the memory is ready before the stream
  // reaches the allocation.
  return Alloc(dptr, bytes);
}

// Captured, the allocation would become a graph memory node that the driver allocates from its
// own pool whenever the graph runs, outside the quota. Instead it is served now, charged, and
// kept until the process exits: the graph's nodes use its fixed address on every launch, and
// the graph may be launched again at any time, even after the program freed the memory (a node
// with CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH reallocates it), so Missile never knows
// when no launch can touch it any more.
std::optional<CUresult> MemoryManager::CapturedAlloc(CUdeviceptr* dptr, size_t bytes) {
  std::optional<CUresult> r = Alloc(dptr, bytes);
  if (!r.has_value() || *r != CUDA_SUCCESS) return r;
  {
    absl::MutexLock lock(&captured_mu_);
    captured_.insert(*dptr);
  }
  any_captured_.store(true, std::memory_order_release);
  if (!capture_logged_.exchange(true)) {
    log_->warn("cuMemAllocAsync during stream capture: served from the tenant's quota and kept "
               "until the process exits, since the graph may run again at any time; to have such "
               "memory back, allocate before capturing (PyTorch: the default caching allocator, "
               "not backend:cudaMallocAsync). Logged once per process");
  }
  return CUDA_SUCCESS;
}

bool MemoryManager::Captured(CUdeviceptr dptr) const {
  if (!any_captured_.load(std::memory_order_acquire)) return false;  // no lock on every free
  absl::MutexLock lock(&captured_mu_);
  return captured_.contains(dptr);
}

std::optional<CUresult> MemoryManager::FreeAsync(CUdeviceptr dptr, CUstream stream, bool ptsz) {
  auto entry = table_.Find(dptr);
  if (!entry.has_value() || entry->base != dptr) return std::nullopt;
  if (Captured(dptr)) return CUDA_SUCCESS;  // a graph may still use it (CapturedAlloc)
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  auto is_capturing = ptsz ? api_.StreamIsCapturingPtsz : api_.StreamIsCapturing;
  if (is_capturing != nullptr && is_capturing(stream, &capture) == CUDA_SUCCESS &&
      capture != CU_STREAM_CAPTURE_STATUS_NONE) {
    log_->error("cuMemFreeAsync during stream capture of memory allocated outside it is not "
                "supported by Missile");
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  // Free once the stream reaches this point: record an event, release when it completes.
  CUevent event = nullptr;
  if (CUresult r = deferred_.RecordEvent(stream, ptsz, &event); r != CUDA_SUCCESS) return r;
  if (!table_.Erase(dptr).ok()) {
    deferred_.Discard(event);
    return CUDA_ERROR_INVALID_VALUE;  // freed twice, concurrently
  }
  deferred_.Add(event, dptr, *entry);
  deferred_.Reap(/*wait=*/false);
  return CUDA_SUCCESS;
}

std::optional<CUresult> MemoryManager::GetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (free_bytes == nullptr || total_bytes == nullptr) return std::nullopt;
  SessionClient* client = sessions_->Serving();
  if (client == nullptr) return std::nullopt;  // the driver's answer
  auto d = CurrentDevice();
  if (!d.ok()) return std::nullopt;
  deferred_.Reap(/*wait=*/false);
  // The daemon counts cached and queued frees as used; a program asking what is free expects
  // what it freed to be.
  (*d)->ReturnFreed();
  auto usage = (*d)->session()->Usage((*d)->gpu());
  if (!usage.ok()) return ToResult(usage.status(), "cuMemGetInfo");
  uint64_t total = std::min(usage->quota_bytes, (*d)->device_total());
  *total_bytes = total;
  *free_bytes = std::min(usage->available_bytes, total);
  return CUDA_SUCCESS;
}

std::optional<CUresult> MemoryManager::TotalMem(size_t* bytes, CUdevice dev) {
  if (bytes == nullptr) return std::nullopt;
  SessionClient* client = sessions_->Serving();
  if (client == nullptr) return std::nullopt;
  auto d = DeviceOf(dev);
  if (!d.ok()) return std::nullopt;
  auto usage = (*d)->session()->Usage((*d)->gpu());
  if (!usage.ok()) return ToResult(usage.status(), "cuDeviceTotalMem");
  *bytes = std::min(usage->quota_bytes, (*d)->device_total());
  return CUDA_SUCCESS;
}

std::optional<CUresult> MemoryManager::VmmCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                                 const CUmemAllocationProp* prop,
                                                 unsigned long long flags) {
  if (handle == nullptr || prop == nullptr || size == 0 || flags != 0) return std::nullopt;
  // Host memory is not VRAM; other handle types the daemon's blocks lack.
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      (prop->requestedHandleTypes & ~CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0) {
    return std::nullopt;
  }
  // Compression is a hint the driver may decline: programs are to check what they got with
  // cuMemGetAllocationPropertiesFromHandle. The daemon's blocks are not compressible, so the
  // request is served, and charged, as plain memory, which that query then reports.
  if (sessions_->Serving() == nullptr) return Unmanaged("cuMemCreate", size);
  CUdevice dev = 0;
  if (api_.DeviceGet(&dev, prop->location.id) != CUDA_SUCCESS) return std::nullopt;
  auto d = DeviceOf(dev);
  if (!d.ok()) return std::nullopt;
  if (size % (*d)->granularity() != 0) return CUDA_ERROR_INVALID_VALUE;
  auto leases =
      (*d)->Lease(/*single=*/true, size, [this] { deferred_.Reap(/*wait=*/true); });
  if (!leases.ok()) {
    if (leases.status().code() == absl::StatusCode::kUnavailable) {
      (*d)->session()->AwaitEnd(absl::Milliseconds(500));
    }
    if (sessions_->Serving() == nullptr) return Unmanaged("cuMemCreate", size);
    return ToResult(leases.status(), "cuMemCreate");
  }
  BlockLease& l = (*leases)[0];
  CUmemGenericAllocationHandle h = 0;
  CUresult r = api_.MemImportFromShareableHandle(
      &h, reinterpret_cast<void*>(static_cast<uintptr_t>(l.fd)),
      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  close(l.fd);
  if (r != CUDA_SUCCESS) {
    (*d)->QueueReturn(l.id, l.bytes);
    return r;
  }
  vmm_.Add(h, *d, l.id, l.bytes);
  allocations_.fetch_add(1, std::memory_order_relaxed);
  if (prop->allocFlags.compressionType != 0 && !compression_logged_.exchange(true)) {
    log_->info("cuMemCreate asked for compressible memory: served uncompressed from the "
               "tenant's quota (logged once per process)");
  }
  *handle = h;
  return CUDA_SUCCESS;
}

void MemoryManager::ReturnUnused(const VmmHandles::Unused& u) {
  u.owner->QueueReturn(u.block, u.bytes);
  u.owner->FlushFrees(/*force=*/false);
}

std::optional<CUresult> MemoryManager::VmmRelease(CUmemGenericAllocationHandle handle) {
  if (!vmm_.Contains(handle)) return std::nullopt;
  CUresult r = api_.MemRelease(handle);
  if (r != CUDA_SUCCESS) return r;
  if (std::optional<VmmHandles::Unused> u = vmm_.Released(handle)) ReturnUnused(*u);
  return CUDA_SUCCESS;
}

void MemoryManager::VmmUnmapped(CUdeviceptr ptr, size_t size) {
  for (const VmmHandles::Unused& u : vmm_.Unmapped(ptr, size)) ReturnUnused(u);
}

}  // namespace missile::shim

#include "copy.h"

#include <unistd.h>

namespace missile::shim {

CopyGate* CopyManager::GateFor(uint64_t bytes, CUdeviceptr device_memory) {
  if (Bypassed(bytes)) return nullptr;
  SessionClient* session = sessions_->Client();
  if (session == nullptr) return nullptr;  // no daemon: nothing to ask (one atomic load)
  CUdevice dev = 0;
  int ordinal = -1;
  if (device_memory != 0 && api_.PointerGetAttribute != nullptr &&
      api_.PointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, device_memory) ==
          CUDA_SUCCESS &&
      ordinal >= 0) {
    dev = static_cast<CUdevice>(ordinal);
  } else if (api_.CtxGetDevice == nullptr || api_.CtxGetDevice(&dev) != CUDA_SUCCESS) {
    return nullptr;
  }
  const int key = static_cast<int>(dev);
  CopyGate* gate = nullptr;
  {
    absl::MutexLock lock(&mu_);
    auto it = gates_.find(key);
    if (it != gates_.end() && it->second.session == session) {
      if (it->second.gate == nullptr) return nullptr;  // failed in this session
      gate = it->second.gate.get();
    }
  }
  // An ended session: say so once and watch for a restarted daemon, as an allocation would
  // (a program that only copies after the restart still comes back under the scheduler).
  if (!session->connected()) {
    sessions_->Serving();
    return nullptr;
  }
  if (gate == nullptr) {
    absl::StatusOr<const GpuLink*> link = sessions_->LinkOf(session, dev);
    absl::StatusOr<std::unique_ptr<CopyGate>> opened = absl::UnavailableError("no daemon");
    if (link.ok()) {
      auto fds = session->OpenCopyChannel((*link)->index);
      if (fds.ok()) {
        // Open owns the descriptors from here, and closes them itself if it fails.
        opened = CopyGate::Open(fds->first, fds->second, api_, log_,
                                [session] { return session->connected(); });
      } else {
        opened = fds.status();
      }
    }
    absl::MutexLock lock(&mu_);
    if (session != sessions_->Client()) return nullptr;  // ended meanwhile: leave the slot alone
    Slot& slot = gates_[key];
    if (slot.session == session && slot.gate != nullptr) {
      gate = slot.gate.get();  // another thread opened it meanwhile; ours, if any, is dropped
    } else if (opened.ok()) {
      // A success replaces a failure another thread recorded meanwhile (the daemon refuses a
      // second channel for the same GPU and session), and an ended session's gate.
      if (slot.gate != nullptr) retired_.push_back(std::move(slot.gate));
      slot.session = session;
      slot.gate = std::move(*opened);
      gate = slot.gate.get();
      bypass_below_.store(gate->bypass_bytes(), std::memory_order_relaxed);
    } else {
      if (slot.session != session) {
        if (slot.gate != nullptr) retired_.push_back(std::move(slot.gate));
        slot.session = session;
        // (ALREADY_EXISTS: another thread's open won; its gate replaces this failure.)
        if (session->connected() && opened.status().code() != absl::StatusCode::kAlreadyExists) {
          log_->warn("PCIe copies on device {} are not scheduled: {}", key,
                     std::string(opened.status().message()));
        }
      }
      return nullptr;
    }
  }
  if (bytes < gate->bypass_bytes() || gate->abandoned()) return nullptr;
  return gate;
}

CopyGate* CopyManager::GateForAsync(uint64_t bytes, CUdeviceptr device_memory, CUstream stream,
                                    bool ptsz) {
  if (Bypassed(bytes)) return nullptr;
  if (sessions_->Client() == nullptr) return nullptr;  // no daemon: nothing to ask (one atomic load)
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  auto is_capturing = ptsz ? api_.StreamIsCapturingPtsz : api_.StreamIsCapturing;
  if (is_capturing == nullptr || is_capturing(stream, &capture) != CUDA_SUCCESS ||
      capture != CU_STREAM_CAPTURE_STATUS_NONE) {
    return nullptr;  // a copy node in a graph: the driver replays it without asking anyone
  }
  return GateFor(bytes, device_memory);
}

MemKind CopyManager::Classify(CUdeviceptr p) {
  if (allocations_->Find(p).has_value()) return MemKind::kDevice;
  unsigned int type = 0;
  CUresult r = api_.PointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
  if (r != CUDA_SUCCESS) return MemKind::kPageableHost;  // the driver does not know it
  unsigned int managed = 0;
  if (api_.PointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p) == CUDA_SUCCESS &&
      managed != 0) {
    return MemKind::kOther;  // migrates on its own terms
  }
  if (type == CU_MEMORYTYPE_DEVICE) return MemKind::kDevice;
  if (type == CU_MEMORYTYPE_HOST) return MemKind::kPinnedHost;
  return MemKind::kOther;
}

}  // namespace missile::shim

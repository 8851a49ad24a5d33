#include "copy.h"

#include <unistd.h>

namespace missile::shim {

CopyGate* CopyManager::GateFor(const WorkCall& call, uint64_t bytes, CUdeviceptr device_memory) {
  if (Bypassed(bytes)) return nullptr;
  // No daemon: nothing to ask (one atomic load).
  if (sessions_->Client() == nullptr) return nullptr;
  SessionGpu* gpu = call.gpu();
  int ordinal = -1;
  if (device_memory != 0 && api_.PointerGetAttribute != nullptr &&
      api_.PointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, device_memory) ==
          CUDA_SUCCESS &&
      ordinal >= 0 && (gpu == nullptr || gpu->device() != static_cast<CUdevice>(ordinal))) {
    gpu = sessions_->GpuOf(static_cast<CUdevice>(ordinal));
  }
  if (gpu == nullptr) return nullptr;
  CopyGate* gate = gpu->Gate();
  if (gate == nullptr) return nullptr;
  if (bypass_below_.load(std::memory_order_relaxed) != gate->bypass_bytes()) {
    bypass_below_.store(gate->bypass_bytes(), std::memory_order_relaxed);
  }
  if (bytes < gate->bypass_bytes() || gate->abandoned()) return nullptr;
  return gate;
}

CopyGate* CopyManager::GateForAsync(WorkCall& call, uint64_t bytes, CUdeviceptr device_memory,
                                    CUstream stream, bool ptsz) {
  if (Bypassed(bytes)) return nullptr;
  if (sessions_->Client() == nullptr) return nullptr;  // no daemon: nothing to ask (one atomic load)
  // A copy node in a graph: the driver replays it without asking anyone.
  if (call.Capturing(stream, ptsz)) return nullptr;
  return GateFor(call, bytes, device_memory);
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

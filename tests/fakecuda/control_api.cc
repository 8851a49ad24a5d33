// The fake's test-control functions (include/fakecuda/fakecuda.h).

#include <cstdio>

#include "errors.h"
#include "fake_state.h"
#include "fakecuda/fakecuda.h"

using fakecuda::FakeState;

extern "C" {

CUresult fakecudaChunkPhysAddr(CUmemGenericAllocationHandle handle, unsigned long long* phys) {
  FakeState& state = FakeState::Get();
  if (!state.initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  return state.vmm().ChunkPhys(handle, phys);
}

CUresult fakecudaPointerPhysAddr(CUdeviceptr p, unsigned long long* phys) {
  FakeState& state = FakeState::Get();
  if (!state.initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  return state.vmm().PointerPhys(p, phys);
}

int fakecudaChannelOf(unsigned long long phys) {
  return fakecuda::ChannelOf(FakeState::Get().config().channel_masks, phys);
}

int fakecudaChannelCount(void) { return 1 << FakeState::Get().config().channel_masks.size(); }

unsigned long long fakecudaCallCount(const char* exported_name) {
  if (exported_name == nullptr) return 0;
  std::optional<fakecuda::EntryId> id = fakecuda::EntryIdByName(exported_name);
  return id ? FakeState::Get().stats().Count(*id) : 0;
}

void fakecudaInjectFailure(const char* exported_name, int nth, int code) {
  std::optional<fakecuda::EntryId> id =
      exported_name != nullptr ? fakecuda::EntryIdByName(exported_name) : std::nullopt;
  if (!id || nth < 1) {
    std::fprintf(stderr, "fakecuda: fakecudaInjectFailure(%s, %d): no such entry point or n < 1\n",
                 exported_name != nullptr ? exported_name : "NULL", nth);
    return;
  }
  FakeState::Get().stats().ArmRelative(*id, static_cast<uint64_t>(nth),
                                       static_cast<CUresult>(code));
}

unsigned long long fakecudaLinkBusyUntilNs(int device, int direction) {
  FakeState& state = FakeState::Get();
  if (!state.initialized() || device < 0 || device >= state.config().num_devices ||
      (direction != FAKECUDA_LINK_H2D && direction != FAKECUDA_LINK_D2H)) {
    return 0;
  }
  return state.link().BusyUntilNs(device, static_cast<fakecuda::Direction>(direction));
}

unsigned long long fakecudaEngineBusyUntilNs(int device) {
  FakeState& state = FakeState::Get();
  if (!state.initialized() || device < 0 || device >= state.config().num_devices) return 0;
  return state.engine().BusyUntilNs(device);
}

unsigned long long fakecudaKernelsRun(int device) {
  FakeState& state = FakeState::Get();
  if (!state.initialized() || device < 0 || device >= state.config().num_devices) return 0;
  return state.engine().KernelsRun(device);
}

const char* fakecudaEntryPointName(int n) {
  if (n < 0 || n >= fakecuda::kNumEntryPoints) return nullptr;
  return fakecuda::EntryName(static_cast<fakecuda::EntryId>(n));
}

}  // extern "C"

// Device memory accounting, cuMemAlloc-style allocations, pinned host memory and pointer queries.
//
// Device memory is anonymous host memory (mmap), so device pointers are real addresses.
// Accounting is per process and per device: used = this process's cuMemAlloc/pool memory (page
// rounded) + the VMM chunks it holds (created or imported, until its last handle is released and
// its last mapping unmapped). cuMemGetInfo reports free = total - used, i.e. what this process
// sees, not what other processes use. Allocations beyond the total fail with
// CUDA_ERROR_OUT_OF_MEMORY.
//
// Boolean pointer attributes (IS_MANAGED, MAPPED, SYNC_MEMOPS, ...) are written as unsigned int,
// as CUDA's own users (e.g. TensorFlow, CCCL) read them.
// Thread-safe.

#ifndef MISSILE_TESTS_FAKECUDA_MEMORY_H_
#define MISSILE_TESTS_FAKECUDA_MEMORY_H_

#include <cuda.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>

#include "address_space.h"
#include "config.h"

namespace fakecuda {

class FakeState;
struct Context;

class MemoryManager {
 public:
  explicit MemoryManager(FakeState* state);
  MemoryManager(const MemoryManager&) = delete;
  MemoryManager& operator=(const MemoryManager&) = delete;

  // Accounting against the device's total. Charge fails (and charges nothing) when it would
  // exceed the total.
  bool Charge(int device, uint64_t bytes);
  // For memory that already exists elsewhere (an imported chunk): charged even past the total.
  void ChargeUnchecked(int device, uint64_t bytes);
  void Uncharge(int device, uint64_t bytes);
  uint64_t Used(int device) const;
  uint64_t NextBufferId() { return next_buffer_id_.fetch_add(1); }

  // Anonymous RW memory of `bytes` rounded up to pages; nullptr on failure.
  static void* MapAnonymous(size_t bytes);
  static size_t PageRound(size_t bytes);

  CUresult Alloc(Context* ctx, size_t bytes, CUdeviceptr* dptr);
  CUresult AllocPitch(Context* ctx, size_t width, size_t height, unsigned element_size,
                      CUdeviceptr* dptr, size_t* pitch);
  CUresult Free(CUdeviceptr dptr);
  CUresult GetInfo(Context* ctx, size_t* free, size_t* total);
  CUresult GetAddressRange(CUdeviceptr dptr, CUdeviceptr* base, size_t* size);

  CUresult HostAlloc(Context* ctx, size_t bytes, unsigned flags, void** pp);
  CUresult FreeHost(void* p);
  CUresult HostRegister(Context* ctx, void* p, size_t bytes, unsigned flags);
  CUresult HostUnregister(void* p);
  CUresult HostGetDevicePointer(void* p, unsigned flags, CUdeviceptr* dptr);

  CUresult GetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr);
  CUresult GetAttributes(unsigned count, CUpointer_attribute* attributes, void** data,
                         CUdeviceptr ptr);

  // Frees everything the context allocated or registered (its streams are already drained).
  void ReleaseContext(Context* ctx);

 private:
  // One attribute of the memory at ptr (region is nullopt for memory the fake does not know).
  CUresult AttributeOf(const std::optional<Region>& region, CUpointer_attribute attribute,
                       CUdeviceptr ptr, void* data);

  FakeState* state_;
  std::array<std::atomic<uint64_t>, kMaxDevices> used_{};
  std::atomic<uint64_t> next_buffer_id_{1};
};

}  // namespace fakecuda

#endif  // MISSILE_TESTS_FAKECUDA_MEMORY_H_

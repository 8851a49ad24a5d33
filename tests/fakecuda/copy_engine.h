// Copies and memsets, on streams and through the simulated PCIe link.
//
// Each endpoint is classified by address (address_space.h): device memory, pinned host memory or
// pageable host memory. Host -> device copies use the destination device's H2D link, device ->
// host copies the source device's D2H link (pcie_link.h); device <-> device (peer included) and
// host <-> host copies are plain memory copies. A pointer the API declares to be device memory
// must be memory the fake handed out (and, for VMM, accessible); anything else is rejected with
// CUDA_ERROR_INVALID_VALUE before any work is queued.
//
// Every operation runs on a stream's worker, in stream order: asynchronous calls return once it
// is queued, synchronous calls (on the legacy or per-thread default stream) once it has run. As
// with the real driver, an asynchronous copy that involves pageable host memory is synchronous
// (it returns when done), because the DMA engine cannot read pageable memory directly. On a
// capturing stream, asynchronous copies and memsets are recorded as graph nodes instead.
//
// CUDA arrays are opaque handles over device memory laid out row after row (no tiling): 1D
// (Height 0) and 2D arrays of 1, 2 or 4 channels of 8, 16 or 32 bit elements. 3D arrays,
// layered arrays and mipmaps are not supported. Thread-safe.

#ifndef MISSILE_TESTS_FAKECUDA_COPY_ENGINE_H_
#define MISSILE_TESTS_FAKECUDA_COPY_ENGINE_H_

#include <cuda.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

#include "streams.h"
#include "thread_annotations.h"

namespace fakecuda {

class FakeState;
struct Context;

// Where a stream operation is issued and whether the call waits for it.
struct Issue {
  CUstream stream = nullptr;
  DefaultStream mode = DefaultStream::kLegacy;
  bool async = false;
};

class CopyEngine {
 public:
  explicit CopyEngine(FakeState* state);

  // A linear copy of `bytes`. dst_device / src_device: the API declares that pointer to be device
  // memory (so it must be known); otherwise the address decides.
  CUresult Copy(uintptr_t dst, bool dst_device, uintptr_t src, bool src_device, size_t bytes,
                Issue issue);
  // A 3D copy (2D copies are 3D copies with Depth 1). An array side must stay within the array
  // and in plane 0; its pitch and plane height are the array's own.
  CUresult Copy3D(const CUDA_MEMCPY3D& copy, Issue issue);
  // A linear copy of `bytes` between host memory and an array, at byte `offset` into the array.
  CUresult CopyArray(CUarray array, size_t offset, uintptr_t host, size_t bytes, bool to_array,
                     Issue issue);

  CUresult CreateArray(Context* ctx, const CUDA_ARRAY_DESCRIPTOR* desc, CUarray* out);
  CUresult DestroyArray(CUarray array);
  static CUDA_MEMCPY3D From2D(const CUDA_MEMCPY2D& copy);
  // Sets `height` rows of `width` elements of `element_size` (1, 2 or 4) bytes, rows `pitch`
  // bytes apart (pitch is ignored when height is 1).
  CUresult Memset(uintptr_t dst, size_t pitch, uint32_t value, unsigned element_size, size_t width,
                  size_t height, Issue issue);

 private:
  // Queues `op` (a copy of `bytes` from src to dst, with these memory classes) as `issue` says.
  CUresult Submit(uintptr_t dst, uintptr_t src, size_t bytes, Issue issue,
                  std::function<void()> op);
  // Checks one endpoint [addr, addr + span); `declared_device` endpoints must be known memory.
  CUresult CheckEndpoint(uintptr_t addr, size_t span, bool write, bool declared_device) const;

  struct FakeArray {
    CUdeviceptr base = 0;
    size_t row_bytes = 0;
    size_t rows = 0;
    unsigned element = 0;  // bytes
  };
  std::optional<FakeArray> FindArray(CUarray array) const;

  FakeState* state_;
  mutable Mutex arrays_mu_;
  std::map<uintptr_t, FakeArray> arrays_ FAKECUDA_GUARDED_BY(arrays_mu_);
  uintptr_t next_array_ FAKECUDA_GUARDED_BY(arrays_mu_) = 0x4000;
};

}  // namespace fakecuda

#endif  // MISSILE_TESTS_FAKECUDA_COPY_ENGINE_H_

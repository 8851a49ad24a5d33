#include "cuda_device.h"

#include <cuda.h>
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>

#include "missile/common/cuda_status.h"
#include "missile/common/gpu_uuid.h"

namespace missile::daemon {
namespace {

std::string FormatUuid(const CUuuid& u) {
  std::array<uint8_t, 16> bytes;
  static_assert(sizeof(u.bytes) == bytes.size());
  memcpy(bytes.data(), u.bytes, bytes.size());
  return FormatGpuUuid(bytes);
}

CUmemAllocationProp BlockProp(int ordinal) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = ordinal;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

}  // namespace

absl::StatusOr<int> CudaDeviceCount() {
  if (CUresult r = cuInit(0); r != CUDA_SUCCESS) return CudaStatus("cuInit", r);
  int count = 0;
  if (CUresult r = cuDeviceGetCount(&count); r != CUDA_SUCCESS) {
    return CudaStatus("cuDeviceGetCount", r);
  }
  return count;
}

absl::StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::Open(int ordinal, ColourFn colours) {
  absl::StatusOr<int> count = CudaDeviceCount();
  if (!count.ok()) return count.status();
  if (ordinal < 0 || ordinal >= *count) {
    return absl::InvalidArgumentError("no CUDA device " + std::to_string(ordinal) + " (there are " +
                                      std::to_string(*count) + ")");
  }
  std::unique_ptr<CudaDevice> d(new CudaDevice());
  d->colours_ = colours ? std::move(colours)
                        : [](uint64_t, uint64_t) { return colorer::ColourSet::Single(0); };
  d->info_.ordinal = ordinal;
  CUdevice dev;
  if (CUresult r = cuDeviceGet(&dev, ordinal); r != CUDA_SUCCESS) return CudaStatus("cuDeviceGet", r);
  int vmm = 0, fd_handles = 0;
  cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev);
  cuDeviceGetAttribute(&fd_handles, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                       dev);
  if (!vmm || !fd_handles) {
    return absl::FailedPreconditionError(
        "CUDA device " + std::to_string(ordinal) +
        " lacks virtual memory management or POSIX file descriptor handles; Missile needs both");
  }
  char name[256] = {};
  cuDeviceGetName(name, sizeof(name), dev);
  d->info_.name = name;
  CUuuid uuid{};
  if (cuDeviceGetUuid_v2(&uuid, dev) == CUDA_SUCCESS) d->info_.uuid = FormatUuid(uuid);
  size_t total = 0;
  if (CUresult r = cuDeviceTotalMem_v2(&total, dev); r != CUDA_SUCCESS) {
    return CudaStatus("cuDeviceTotalMem", r);
  }
  d->info_.total_bytes = total;
  CUmemAllocationProp prop = BlockProp(ordinal);
  size_t granularity = 0;
  if (CUresult r = cuMemGetAllocationGranularity(&granularity, &prop,
                                                 CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
      r != CUDA_SUCCESS) {
    return CudaStatus("cuMemGetAllocationGranularity", r);
  }
  d->info_.granularity = granularity;
  CUcontext ctx = nullptr;
  if (CUresult r = cuDevicePrimaryCtxRetain(&ctx, dev); r != CUDA_SUCCESS) {
    return CudaStatus("cuDevicePrimaryCtxRetain", r);
  }
  d->context_ = ctx;
  if (absl::Status s = d->MakeCurrent(); !s.ok()) return s;
  CUstream stream = nullptr;
  if (CUresult r = cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING); r != CUDA_SUCCESS) {
    return CudaStatus("cuStreamCreate", r);
  }
  d->stream_ = stream;
  return d;
}

CudaDevice::~CudaDevice() {
  absl::MutexLock lock(&mu_);
  if (MakeCurrent().ok()) {
    for (const auto& [handle, m] : blocks_) DestroyLocked(handle, m);
    blocks_.clear();
    if (stream_ != nullptr) cuStreamDestroy_v2(static_cast<CUstream>(stream_));
  }
  if (context_ != nullptr) {
    CUdevice dev;
    if (cuDeviceGet(&dev, info_.ordinal) == CUDA_SUCCESS) cuDevicePrimaryCtxRelease_v2(dev);
  }
}

absl::Status CudaDevice::MakeCurrent() const {
  if (CUresult r = cuCtxSetCurrent(static_cast<CUcontext>(context_)); r != CUDA_SUCCESS) {
    return CudaStatus("cuCtxSetCurrent", r);
  }
  return absl::OkStatus();
}

absl::StatusOr<PhysicalBlock> CudaDevice::Create(uint64_t bytes) {
  if (bytes == 0 || bytes % info_.granularity != 0) {
    return absl::InvalidArgumentError("block size " + std::to_string(bytes) +
                                      " is not a positive multiple of the granularity");
  }
  if (absl::Status s = MakeCurrent(); !s.ok()) return s;
  CUmemAllocationProp prop = BlockProp(info_.ordinal);
  CUmemGenericAllocationHandle handle = 0;
  if (CUresult r = cuMemCreate(&handle, bytes, &prop, 0); r != CUDA_SUCCESS) {
    return CudaStatus("cuMemCreate", r);
  }
  Mapped m;
  m.bytes = bytes;
  // Only exported here: the daemon maps a block itself only to scrub it (Scrub), which keeps
  // a map and an access change (hundreds of microseconds on the H200, bench/vmm_cost) off the
  // allocation that made the block.
  CUresult r = cuMemExportToShareableHandle(&m.fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  if (r != CUDA_SUCCESS) {
    absl::MutexLock lock(&mu_);
    DestroyLocked(handle, m);
    return CudaStatus("exporting a new block", r);
  }
  PhysicalBlock block{handle, bytes, colours_(handle, bytes)};
  absl::MutexLock lock(&mu_);
  blocks_[handle] = m;
  return block;
}

absl::StatusOr<uint64_t> CudaDevice::MapForScrub(uint64_t handle, uint64_t bytes) const {
  CUdeviceptr va = 0;
  CUresult r = cuMemAddressReserve(&va, bytes, info_.granularity, 0, 0);
  if (r != CUDA_SUCCESS) return CudaStatus("reserving addresses to scrub a block", r);
  r = cuMemMap(va, bytes, 0, handle, 0);
  if (r == CUDA_SUCCESS) {
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = info_.ordinal;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = cuMemSetAccess(va, bytes, &access, 1);
    if (r != CUDA_SUCCESS) cuMemUnmap(va, bytes);
  }
  if (r != CUDA_SUCCESS) {
    cuMemAddressFree(va, bytes);
    return CudaStatus("mapping a block to scrub it", r);
  }
  return va;
}

void CudaDevice::DestroyLocked(uint64_t handle, const Mapped& m) {
  if (m.va != 0) {
    cuMemUnmap(m.va, m.bytes);
    cuMemAddressFree(m.va, m.bytes);
  }
  if (m.fd >= 0) close(m.fd);
  cuMemRelease(handle);
}

void CudaDevice::Destroy(const PhysicalBlock& block) {
  if (!MakeCurrent().ok()) return;
  absl::MutexLock lock(&mu_);
  auto it = blocks_.find(block.handle);
  if (it == blocks_.end()) return;
  DestroyLocked(it->first, it->second);
  blocks_.erase(it);
}

absl::Status CudaDevice::Scrub(const PhysicalBlock& block) {
  if (absl::Status s = MakeCurrent(); !s.ok()) return s;
  uint64_t va = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = blocks_.find(block.handle);
    if (it == blocks_.end()) return absl::NotFoundError("scrub of an unknown block");
    va = it->second.va;
  }
  if (va == 0) {
    // Mapped outside the lock (a map can wait half a millisecond on the driver), then published.
    absl::StatusOr<uint64_t> mapped = MapForScrub(block.handle, block.bytes);
    if (!mapped.ok()) return mapped.status();
    absl::MutexLock lock(&mu_);
    auto it = blocks_.find(block.handle);
    if (it == blocks_.end() || it->second.va != 0) {
      cuMemUnmap(*mapped, block.bytes);
      cuMemAddressFree(*mapped, block.bytes);
      if (it == blocks_.end()) return absl::NotFoundError("block destroyed while being scrubbed");
      va = it->second.va;
    } else {
      it->second.va = va = *mapped;
    }
  }
  auto stream = static_cast<CUstream>(stream_);
  if (CUresult r = cuMemsetD8Async(va, 0, block.bytes, stream); r != CUDA_SUCCESS) {
    return CudaStatus("cuMemsetD8Async", r);
  }
  if (CUresult r = cuStreamSynchronize(stream); r != CUDA_SUCCESS) {
    return CudaStatus("cuStreamSynchronize", r);
  }
  return absl::OkStatus();
}

absl::StatusOr<int> CudaDevice::DuplicateDescriptor(const PhysicalBlock& block) {
  absl::MutexLock lock(&mu_);
  auto it = blocks_.find(block.handle);
  int fd = it == blocks_.end() ? -1 : fcntl(it->second.fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("block has no exported descriptor");
  return fd;
}

}  // namespace missile::daemon

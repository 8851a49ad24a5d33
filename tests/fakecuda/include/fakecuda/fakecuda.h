// Test-control functions of the CUDA driver test double (tests/fakecuda, libcuda.so.1).
//
// These are not part of CUDA: the fake exports them next to the cu* entry points so tests can
// look behind the driver. A program may link the fake and call them directly, or dlsym() them
// from a libcuda.so.1 handle (a real driver does not have them, so a NULL dlsym means "not the
// fake"). All are thread-safe and may be called before cuInit; the ones about the simulated
// hardware (phys addresses, links) return CUDA_ERROR_NOT_INITIALIZED / 0 until cuInit succeeded.
//
// Environment read by the fake (once per process, at its first use; a forked child re-reads it):
//   FAKECUDA_DEVICES            device count, 0..8 (default 1)
//   FAKECUDA_TOTAL_MEM          bytes per device, suffixes K/M/G/T (binary; e.g. 8G), default 16G
//   FAKECUDA_PCIE_BYTES_PER_US  simulated PCIe rate per direction (default 4000 = 4 GB/s; 0 = no
//                               link model, copies are plain memcpy)
//   FAKECUDA_SHM                POSIX shared-memory name of the machine-wide state (links and
//                               physical frames), default /fakecuda-<uid>
//   FAKECUDA_PHYS_SHUFFLE       seed: hand out physical frames in a seeded random order
//   FAKECUDA_CHANNEL_MASKS      comma-separated hex masks m0,m1,..: channel bit i = parity(phys&mi)
//   FAKECUDA_FAIL               comma list of <exported name>:<N>[:<code>]: the Nth call of that
//                               entry point returns code (a number or CUDA_ERROR_* name; default
//                               CUDA_ERROR_OUT_OF_MEMORY) and changes nothing
//   FAKECUDA_ALLOW_WITH_GPU     1 lets the fake run where /dev/nvidiactl exists

#ifndef MISSILE_TESTS_FAKECUDA_INCLUDE_FAKECUDA_FAKECUDA_H_
#define MISSILE_TESTS_FAKECUDA_INCLUDE_FAKECUDA_FAKECUDA_H_

#include <cuda.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FAKECUDA_API __attribute__((visibility("default")))

// Link directions for fakecudaLinkBusyUntilNs.
#define FAKECUDA_LINK_H2D 0
#define FAKECUDA_LINK_D2H 1

// Synthetic physical address (2 MiB aligned, unique per device on this machine while the chunk
// lives) of a chunk made by cuMemCreate in any process. CUDA_ERROR_INVALID_VALUE for an unknown
// handle or a host-located chunk (which has no device address).
FAKECUDA_API CUresult fakecudaChunkPhysAddr(CUmemGenericAllocationHandle handle,
                                            unsigned long long* phys);

// Synthetic physical address of the byte at a VMM-mapped device pointer.
// CUDA_ERROR_INVALID_VALUE when p is not inside a mapping of a device chunk.
FAKECUDA_API CUresult fakecudaPointerPhysAddr(CUdeviceptr p, unsigned long long* phys);

// Channel of a physical address under FAKECUDA_CHANNEL_MASKS (0 when no masks are set).
FAKECUDA_API int fakecudaChannelOf(unsigned long long phys);

// 2^(number of masks) (1 when no masks are set).
FAKECUDA_API int fakecudaChannelCount(void);

// Calls of the exported entry point `exported_name` (e.g. "cuMemAlloc_v2") in this process,
// failed ones included. 0 for a name the fake does not export.
FAKECUDA_API unsigned long long fakecudaCallCount(const char* exported_name);

// Makes the nth call (1 = the next one) of `exported_name` from now on return `code` without
// doing anything. Unknown names are reported on stderr and ignored.
FAKECUDA_API void fakecudaInjectFailure(const char* exported_name, int nth, int code);

// CLOCK_MONOTONIC nanosecond at which the simulated link of `device` in `direction`
// (FAKECUDA_LINK_H2D / FAKECUDA_LINK_D2H) finishes everything reserved on it so far, by any
// process. 0 before cuInit or for a bad device/direction.
FAKECUDA_API unsigned long long fakecudaLinkBusyUntilNs(int device, int direction);

// The n-th exported driver entry point (n from 0), NULL past the end: lets tests check the
// export list against the table cuGetProcAddress uses.
FAKECUDA_API const char* fakecudaEntryPointName(int n);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // MISSILE_TESTS_FAKECUDA_INCLUDE_FAKECUDA_FAKECUDA_H_

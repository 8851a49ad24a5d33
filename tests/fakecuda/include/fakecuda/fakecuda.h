// Test-control functions of the CUDA driver test double (tests/fakecuda, libcuda.so.1).
//
// These are not part of CUDA: the fake exports them next to the cu* entry points so tests can
// look behind the driver. A program may link the fake and call them directly, or dlsym() them
// from a libcuda.so.1 handle (a real driver does not have them, so a NULL dlsym means "not the
// fake"). All are thread-safe and may be called before cuInit; the ones about the simulated
// hardware (phys addresses, links, engines) return CUDA_ERROR_NOT_INITIALIZED / 0 until cuInit
// succeeded.
//
// Environment read by the fake (once per process, at its first use; a forked child re-reads it):
//   FAKECUDA_DEVICES            device count, 0..8 (default 1)
//   FAKECUDA_TOTAL_MEM          bytes per device, suffixes K/M/G/T (binary; e.g. 8G), default 16G
//   FAKECUDA_PCIE_BYTES_PER_US  simulated PCIe rate per direction (default 4000 = 4 GB/s; 0 = no
//                               link model, copies are plain memcpy)
//   FAKECUDA_ENGINE             1 (default): kernels of all processes sharing FAKECUDA_SHM run
//                               one at a time on each device's compute engine; 0: each kernel
//                               just takes its duration, sharing nothing
//   FAKECUDA_TIMESLICE_US       0 (default): processes take the engine in turns per kernel; N: in
//                               time slices of N us while they have work queued, like GPU
//                               contexts (0..1000000)
//   FAKECUDA_SHM                POSIX shared-memory name of the machine-wide state (links,
//                               compute engines and physical frames), default /fakecuda-<uid>
//   FAKECUDA_PHYS_SHUFFLE       seed: hand out physical frames in a seeded random order
//   FAKECUDA_CHANNEL_MASKS      comma-separated hex masks m0,m1,..: channel bit i = parity(phys&mi)
//   FAKECUDA_FAIL               comma list of <exported name>:<N>[:<code>]: the Nth call of that
//                               entry point returns code (a number or CUDA_ERROR_* name; default
//                               CUDA_ERROR_OUT_OF_MEMORY) and changes nothing
//   FAKECUDA_ALLOW_WITH_GPU     1 lets the fake run where /dev/nvidiactl exists
//   FAKECUDA_STREAM_DEPTH       operations a stream holds before an enqueue waits (default 1024;
//                               read at the first enqueue, which a forked child may inherit)
//   FAKECUDA_DEAD_TPCS          the floorswept TPCs of every device: "none" or distinct indices
//                               0..71, comma-separated (default 3,12,25,38,51,64: 132 SMs)
//   FAKECUDA_MPS                1: CU_DEVICE_ATTRIBUTE_MPS_ENABLED reads 1 (default 0)
//   FAKECUDA_LAUNCH_CALLBACK    0: cuGetExportTable has no launch callback table (default 1)
//   FAKECUDA_LAUNCH_DESC_VERSION  the launch descriptor's version byte the callback sees, decimal
//                               or 0x-hex (default 0x40)
//
// Kernels: cuModuleLoadData takes the NUL-terminated text "fakecuda-module..." or PTX text (with
// ".version" and ".entry"; anything else is CUDA_ERROR_INVALID_IMAGE); a fakecuda-module has
// these built-in kernels, arguments in kernelParams:
//   fakecuda_spin(uint64_t duration_ns)
//   fakecuda_fill_u32(CUdeviceptr dst, uint32_t value, uint64_t count, uint64_t duration_ns)
//   fakecuda_add_u32(CUdeviceptr dst, CUdeviceptr src, uint64_t count, uint64_t duration_ns)
//   fakecuda_append_u32(CUdeviceptr log, uint32_t value, uint64_t duration_ns)
//     (log[0] counts the entries: log[1 + log[0]] = value, then log[0]++)
//   fakecuda_sm_probe(CUdeviceptr out, uint64_t duration_ns)
//     (out[block] = the SM id the block ran on, blocks dealt round-robin over the SMs the launch's
//     TPC mask leaves, ascending; a PTX entry that reads %smid runs as this kernel)
// Each occupies its device's compute engine for duration_ns (see fakecudaEngineBusyUntilNs).
// TPC masks come from the launch callback export table (cuGetExportTable; see README.md).

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

// CLOCK_MONOTONIC nanosecond at which the compute engine of `device` finishes every kernel
// reserved on it so far, by any process sharing FAKECUDA_SHM. A kernel reserves its interval
// [max(now, this), +duration) when it reaches the head of its stream. 0 before cuInit or for a
// bad device; processes with FAKECUDA_ENGINE=0 reserve nothing.
FAKECUDA_API unsigned long long fakecudaEngineBusyUntilNs(int device);

// Kernels this process completed on `device` (0 before cuInit or for a bad device).
FAKECUDA_API unsigned long long fakecudaKernelsRun(int device);

// The n-th exported driver entry point (n from 0), NULL past the end: lets tests check the
// export list against the table cuGetProcAddress uses.
FAKECUDA_API const char* fakecudaEntryPointName(int n);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // MISSILE_TESTS_FAKECUDA_INCLUDE_FAKECUDA_FAKECUDA_H_

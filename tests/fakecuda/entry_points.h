// The fake's driver entry points: declarations, ids and the common prologue.
//
// Every exported cu* function is declared here from its row in entry_points.inc with exactly the
// ABI of its PFN_<base>_v<version>[_ptds|_ptsz] typedef, so a definition with a different ABI is a
// compile error. Each definition starts with FAKECUDA_ENTER(name), which counts the call, applies
// an injected failure and refuses calls before a successful cuInit. All entry points are
// thread-safe; the prologue takes no lock unless a failure is armed for that entry point.
//
// Include this instead of <cuda.h>: cuda.h #defines some plain names to their newest ABI
// (cuGetProcAddress -> cuGetProcAddress_v2, ...), and the fake defines every ABI by its exported
// name, so those macros are removed below.

#ifndef MISSILE_TESTS_FAKECUDA_ENTRY_POINTS_H_
#define MISSILE_TESTS_FAKECUDA_ENTRY_POINTS_H_

#include <cuda.h>
#include <cudaTypedefs.h>

#include <optional>
#include <string_view>
#include <type_traits>

#undef cuDeviceGetUuid
#undef cuEventElapsedTime
#undef cuStreamWriteValue32
#undef cuStreamWaitValue32
#undef cuStreamWriteValue64
#undef cuStreamWaitValue64
#undef cuGetProcAddress
#undef cuStreamBeginCapture
#undef cuStreamGetCaptureInfo
#undef cuGraphInstantiate
#undef cuGraphGetEdges
#undef cuGraphAddDependencies

// ABIs the stub exports whose typedefs cudaTypedefs.h keeps for the driver's own build
// (__CUDA_API_VERSION_INTERNAL), copied from there.
#if !defined(__CUDA_API_VERSION_INTERNAL)
typedef CUresult(CUDAAPI* PFN_cuStreamBeginCapture_v10000)(CUstream hStream);
typedef CUresult(CUDAAPI* PFN_cuStreamBeginCapture_v10000_ptsz)(CUstream hStream);
typedef CUresult(CUDAAPI* PFN_cuGraphInstantiate_v10000)(CUgraphExec* phGraphExec, CUgraph hGraph,
                                                         CUgraphNode* phErrorNode, char* logBuffer,
                                                         size_t bufferSize);
typedef CUresult(CUDAAPI* PFN_cuGraphInstantiate_v11000)(CUgraphExec* phGraphExec, CUgraph hGraph,
                                                         CUgraphNode* phErrorNode, char* logBuffer,
                                                         size_t bufferSize);
#endif

#define FAKECUDA_EXPORT __attribute__((visibility("default")))

#define FAKECUDA_IMPL(base, exported, version, suffix) \
  extern "C" FAKECUDA_EXPORT std::remove_pointer_t<PFN_##base##_v##version##suffix> exported;
#define FAKECUDA_NOIMPL(base, exported, version, suffix)
#include "entry_points.inc"
#undef FAKECUDA_IMPL
#undef FAKECUDA_NOIMPL

namespace fakecuda {

// One id per exported entry point, in table order.
enum class EntryId : int {
#define FAKECUDA_IMPL(base, exported, version, suffix) k_##exported,
#define FAKECUDA_NOIMPL(base, exported, version, suffix)
#include "entry_points.inc"
#undef FAKECUDA_IMPL
#undef FAKECUDA_NOIMPL
  kCount
};
inline constexpr int kNumEntryPoints = static_cast<int>(EntryId::kCount);

// The exported name of an entry point.
const char* EntryName(EntryId id);
// The entry point exported under `name`, if the fake has one.
std::optional<EntryId> EntryIdByName(std::string_view name);

// The prologue of every entry point: counts the call; returns an injected failure if one is
// armed for this call, else CUDA_ERROR_NOT_INITIALIZED when `needs_init` and cuInit has not
// succeeded, else CUDA_SUCCESS.
CUresult Enter(EntryId id, bool needs_init);

}  // namespace fakecuda

#define FAKECUDA_ENTER_IMPL(name, needs_init)                                                      \
  do {                                                                                             \
    if (const CUresult fakecuda_rc = ::fakecuda::Enter(::fakecuda::EntryId::k_##name, needs_init); \
        fakecuda_rc != CUDA_SUCCESS) {                                                             \
      return fakecuda_rc;                                                                          \
    }                                                                                              \
  } while (0)

// Use as the first statement of an entry point that needs cuInit.
#define FAKECUDA_ENTER(name) FAKECUDA_ENTER_IMPL(name, true)
// For the few entry points the real driver serves before cuInit.
#define FAKECUDA_ENTER_NOINIT(name) FAKECUDA_ENTER_IMPL(name, false)

#endif  // MISSILE_TESTS_FAKECUDA_ENTRY_POINTS_H_

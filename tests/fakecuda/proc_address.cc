// cuGetProcAddress (CUDA 11.3 ABI), cuGetProcAddress_v2 (CUDA 12.0 ABI) and cuGetExportTable.
//
// The table is entry_points.inc: every ABI variant of each entry point the fake implements, with
// the CUDA version of its PFN typedef. For a base name and a requested version, the plain choice
// is the newest plain variant not newer than the version; with
// CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM the newest _ptds/_ptsz variant not newer than the
// version wins if there is one (else the plain choice, as the driver documents);
// CU_GET_PROC_ADDRESS_DEFAULT and _LEGACY_STREAM take the plain choice. The returned pointers are
// the exported functions themselves (the library binds its own symbols, -Bsymbolic), so they
// equal dlsym(handle, "<exported name>").

#include <cstring>

#include "entry_points.h"
#include "fake_state.h"
#include "launch_callback.h"

namespace fakecuda {
namespace {

constexpr int kDriverVersion = 13000;

struct Variant {
  const char* base;
  const char* exported;
  int version;
  bool per_thread;  // a _ptds / _ptsz variant
  void* fn;         // nullptr: a variant of the real driver the fake does not implement
};

constexpr bool PerThread(const char* suffix) { return suffix[0] != '\0'; }

const Variant kVariants[] = {
#define FAKECUDA_IMPL(base, exported, version, suffix) \
  {#base, #exported, version, PerThread(#suffix), reinterpret_cast<void*>(&exported)},
#define FAKECUDA_NOIMPL(base, exported, version, suffix) \
  {#base, #exported, version, PerThread(#suffix), nullptr},
#include "entry_points.inc"
#undef FAKECUDA_IMPL
#undef FAKECUDA_NOIMPL
};

CUresult Lookup(const char* symbol, void** pfn, int version, cuuint64_t flags,
                CUdriverProcAddressQueryResult* status) {
  auto fail = [&](CUresult code, CUdriverProcAddressQueryResult result) {
    if (pfn != nullptr) *pfn = nullptr;
    if (status != nullptr) *status = result;
    return code;
  };
  constexpr cuuint64_t kKnownFlags =
      CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  if (symbol == nullptr || pfn == nullptr || (flags & ~kKnownFlags) != 0 || version <= 0 ||
      version > kDriverVersion) {
    return fail(CUDA_ERROR_INVALID_VALUE, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  }
  const bool want_per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  bool known = false;
  const Variant* plain = nullptr;
  const Variant* per_thread = nullptr;
  for (const Variant& v : kVariants) {
    if (std::strcmp(v.base, symbol) != 0) continue;
    known = true;
    if (v.version > version) continue;
    const Variant*& best = v.per_thread ? per_thread : plain;
    if (best == nullptr || v.version > best->version) best = &v;
  }
  if (!known) return fail(CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  const Variant* chosen = want_per_thread && per_thread != nullptr ? per_thread : plain;
  if (chosen == nullptr) {
    return fail(CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  }
  if (chosen->fn == nullptr)
    return fail(CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  *pfn = chosen->fn;
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace fakecuda

extern "C" {

// Both work before cuInit: the CUDA runtime resolves cuInit itself through them.
CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
  FAKECUDA_ENTER_NOINIT(cuGetProcAddress);
  return fakecuda::Lookup(symbol, pfn, cudaVersion, flags, nullptr);
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* symbolStatus) {
  FAKECUDA_ENTER_NOINIT(cuGetProcAddress_v2);
  return fakecuda::Lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}

// Only the launch callback's table (launch_callback.h), unless FAKECUDA_LAUNCH_CALLBACK=0 takes
// it away: the real driver's other private tables (used by cudart) have no meaning here.
CUresult cuGetExportTable(const void** ppExportTable, const CUuuid* pExportTableId) {
  FAKECUDA_ENTER_NOINIT(cuGetExportTable);
  if (ppExportTable != nullptr) *ppExportTable = nullptr;
  if (pExportTableId == nullptr ||
      std::memcmp(pExportTableId->bytes, fakecuda::kCallbackTableId,
                  sizeof(fakecuda::kCallbackTableId)) != 0 ||
      !fakecuda::State().config().launch_callback) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (ppExportTable == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *ppExportTable = fakecuda::CallbackExportTable();
  return CUDA_SUCCESS;
}

}  // extern "C"

// cuGetProcAddress and cuGetProcAddress_v2: how the CUDA runtime (and so PyTorch) reaches every
// driver entry point. The real driver answers with the caller's exact symbol, version and
// flags, so each caller gets the ABI variant it asked for (_v2/_v3, _ptds/_ptsz); the shim then
// swaps in its hook, chosen by the real function pointer the driver returned. Lookups of
// functions the shim does not hook come back untouched.
#include <cudaTypedefs.h>

#include "hooks.h"
#include "shim.h"

namespace missile::shim {

CUresult CUDAAPI Hook_cuGetProcAddress(const char* symbol, void** pfn, int version,
                                       cuuint64_t flags) {
  Shim& shim = Shim::Get();
  if (CUresult status = shim.EnsureResolved(); status != CUDA_SUCCESS) return status;
  auto real = reinterpret_cast<PFN_cuGetProcAddress_v11030>(shim.real(HookId::kGetProcAddress));
  if (real == nullptr) return shim.MissingSymbol(HookId::kGetProcAddress);
  CUresult result = real(symbol, pfn, version, flags);
  if (shim.disabled()) return result;
  shim.Count(HookId::kGetProcAddress);
  if (result == CUDA_SUCCESS && symbol != nullptr && pfn != nullptr && *pfn != nullptr) {
    *pfn = shim.SwapProcAddress(symbol, *pfn, version, flags);
  }
  return result;
}

CUresult CUDAAPI Hook_cuGetProcAddress_v2(const char* symbol, void** pfn, int version,
                                          cuuint64_t flags, CUdriverProcAddressQueryResult* found) {
  Shim& shim = Shim::Get();
  if (CUresult status = shim.EnsureResolved(); status != CUDA_SUCCESS) return status;
  auto real = reinterpret_cast<PFN_cuGetProcAddress_v12000>(shim.real(HookId::kGetProcAddressV2));
  if (real == nullptr) return shim.MissingSymbol(HookId::kGetProcAddressV2);
  CUresult result = real(symbol, pfn, version, flags, found);
  if (shim.disabled()) return result;
  shim.Count(HookId::kGetProcAddressV2);
  if (result == CUDA_SUCCESS && symbol != nullptr && pfn != nullptr && *pfn != nullptr) {
    *pfn = shim.SwapProcAddress(symbol, *pfn, version, flags);
  }
  return result;
}

}  // namespace missile::shim

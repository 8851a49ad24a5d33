// The entry points libmissile.so hooks: ids, names and families, generated from hook_list.inc.
//
// A hook is one exported ABI variant of a driver entry point (cuMemcpyHtoDAsync_v2_ptsz is its
// own hook). Pure data; safe from any thread.
#ifndef MISSILE_LIBINTERCEPT_HOOKS_H_
#define MISSILE_LIBINTERCEPT_HOOKS_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace missile::shim {

enum class HookId : uint16_t {
#define MISSILE_HOOK(sym, pfn, family) k_##sym,
#include "hook_list.inc"
#undef MISSILE_HOOK
  kGetProcAddress,    // cuGetProcAddress (CUDA 11.3 ABI)
  kGetProcAddressV2,  // cuGetProcAddress_v2 (CUDA 12.0 ABI)
  kCount,
};

inline constexpr size_t kHookCount = static_cast<size_t>(HookId::kCount);

struct HookInfo {
  std::string_view symbol;  // the exported name, e.g. "cuMemAlloc_v2"
  std::string_view family;  // "allocation", "copy", ... (see gen_hook_list.py)
};

inline constexpr HookInfo kHookInfo[kHookCount] = {
#define MISSILE_HOOK(sym, pfn, family) {#sym, #family},
#include "hook_list.inc"
#undef MISSILE_HOOK
    {"cuGetProcAddress", "resolution"},
    {"cuGetProcAddress_v2", "resolution"},
};

inline constexpr size_t Index(HookId id) { return static_cast<size_t>(id); }

// The number of entry points the driver stub exports (and so the shim exports).
inline constexpr size_t kExportCount = 0
#define MISSILE_EXPORT_HOOKED(idx, sym) +1
#define MISSILE_EXPORT_SPECIAL(idx, sym) +1
#define MISSILE_EXPORT_FORWARD(idx, sym) +1
#include "exports.inc"
#undef MISSILE_EXPORT_HOOKED
#undef MISSILE_EXPORT_SPECIAL
#undef MISSILE_EXPORT_FORWARD
    ;

inline constexpr std::string_view kExportNames[kExportCount] = {
#define MISSILE_EXPORT_HOOKED(idx, sym) #sym,
#define MISSILE_EXPORT_SPECIAL(idx, sym) #sym,
#define MISSILE_EXPORT_FORWARD(idx, sym) #sym,
#include "exports.inc"
#undef MISSILE_EXPORT_HOOKED
#undef MISSILE_EXPORT_SPECIAL
#undef MISSILE_EXPORT_FORWARD
};

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_HOOKS_H_

// The hooks: one wrapper per hooked entry point, generated from hook_list.inc by a template
// over the entry point's ABI typedef, and the entry table the exported trampolines jump through.
#include <cudaTypedefs.h>

#include "legacy_abi.h"

#include <algorithm>
#include <string>
#include <type_traits>

#include "entry_table.h"
#include "copy_policy.h"
#include "fmt/format.h"
#include "memory_policy.h"
#include "graph_hooks.h"
#include "pacing_hooks.h"
#include "policy.h"
#include "shim.h"

namespace missile::shim {
namespace {

template <typename T>
void AppendArg(std::string* out, const T& value) {
  if (!out->empty()) out->append(", ");
  if constexpr (std::is_pointer_v<T>) {
    fmt::format_to(std::back_inserter(*out), "{}", fmt::ptr(value));
  } else if constexpr (std::is_enum_v<T>) {
    fmt::format_to(std::back_inserter(*out), "{}", static_cast<long long>(value));
  } else if constexpr (std::is_integral_v<T>) {
    fmt::format_to(std::back_inserter(*out), "{}", value);
  } else {
    out->append("{...}");
  }
}

template <HookId id, typename Fn>
struct Hook;

template <HookId id, typename... Args>
struct Hook<id, CUresult(CUDAAPI*)(Args...)> {
  using Fn = CUresult(CUDAAPI*)(Args...);

  static CUresult CUDAAPI Call(Args... args) {
    Shim& shim = Shim::Get();
    if (CUresult status = shim.EnsureResolved(); status != CUDA_SUCCESS) [[unlikely]] {
      return status;
    }
    auto real = reinterpret_cast<Fn>(shim.real(id));
    if (real == nullptr) [[unlikely]] {
      return shim.MissingSymbol(id);
    }
    if (shim.disabled()) [[unlikely]] {
      return real(args...);
    }
    shim.Count(id);
    CUresult result;
    if constexpr (IsPacedWork(id)) {
      result = RunPaced<id>(real, args...);
    } else if constexpr (IsSync(id)) {
      result = RunSynced<id>(real, args...);
    } else if constexpr (IsQuery(id)) {
      result = RunQueried<id>(real, args...);
    } else if constexpr (IsGraphHook(id)) {
      result = RunGraphHook<id>(real, args...);
    } else {
      result = Policy<id>::Run(real, args...);
    }
    if (shim.tracing()) [[unlikely]] {
      std::string text;
      (AppendArg(&text, args), ...);
      shim.Trace(id, result, text);
    }
    return result;
  }
};

template <HookId id>
struct HookAbi;
#define MISSILE_HOOK(sym, pfn, family) \
  template <>                          \
  struct HookAbi<HookId::k_##sym> {    \
    using Fn = pfn;                    \
  };
#include "hook_list.inc"
#undef MISSILE_HOOK

template <HookId id>
void* HookFunction() {
  return reinterpret_cast<void*>(&Hook<id, typename HookAbi<id>::Fn>::Call);
}

}  // namespace

// Defined in proc_address.cc.
CUresult CUDAAPI Hook_cuGetProcAddress(const char* symbol, void** pfn, int version,
                                       cuuint64_t flags);
CUresult CUDAAPI Hook_cuGetProcAddress_v2(const char* symbol, void** pfn, int version,
                                          cuuint64_t flags, CUdriverProcAddressQueryResult* status);

void HookFunctions(void* out[kHookCount]) {
#define MISSILE_HOOK(sym, pfn, family) out[Index(HookId::k_##sym)] = HookFunction<HookId::k_##sym>();
#include "hook_list.inc"
#undef MISSILE_HOOK
  out[Index(HookId::kGetProcAddress)] = reinterpret_cast<void*>(&Hook_cuGetProcAddress);
  out[Index(HookId::kGetProcAddressV2)] = reinterpret_cast<void*>(&Hook_cuGetProcAddress_v2);
}

int ExportIndexOf(HookId id) {
  switch (id) {
#define MISSILE_EXPORT_HOOKED(idx, sym) \
  case HookId::k_##sym:                 \
    return idx;
#define MISSILE_EXPORT_SPECIAL(idx, sym)
#define MISSILE_EXPORT_FORWARD(idx, sym)
#include "exports.inc"
#undef MISSILE_EXPORT_HOOKED
#undef MISSILE_EXPORT_SPECIAL
#undef MISSILE_EXPORT_FORWARD
    case HookId::kGetProcAddress:
      return static_cast<int>(std::find(kExportNames, kExportNames + kExportCount, "cuGetProcAddress") - kExportNames);
    case HookId::kGetProcAddressV2:
      return static_cast<int>(std::find(kExportNames, kExportNames + kExportCount, "cuGetProcAddress_v2") - kExportNames);
    default:
      return -1;
  }
}

}  // namespace missile::shim

// Statically initialised (address constants only), so it is valid before any constructor runs:
// a driver call from another library's constructor still finds its way.
extern "C" {
__attribute__((visibility("hidden"))) void* missile_entry_table[missile::shim::kExportCount] = {
#define MISSILE_EXPORT_HOOKED(idx, sym) \
  reinterpret_cast<void*>(&missile::shim::Hook<missile::shim::HookId::k_##sym, missile::shim::HookAbi<missile::shim::HookId::k_##sym>::Fn>::Call),
#define MISSILE_EXPORT_SPECIAL(idx, sym) reinterpret_cast<void*>(&missile::shim::Hook_##sym),
#define MISSILE_EXPORT_FORWARD(idx, sym) reinterpret_cast<void*>(&missile_forward_slow),
#include "exports.inc"
#undef MISSILE_EXPORT_HOOKED
#undef MISSILE_EXPORT_SPECIAL
#undef MISSILE_EXPORT_FORWARD
};
}  // extern "C"

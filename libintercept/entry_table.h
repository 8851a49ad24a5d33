// The table the exported trampolines (trampolines.S) jump through, one slot per driver entry
// point in exports.inc order. It starts out pointing at the hooks, the cuGetProcAddress
// wrappers and the lazy forwarder (forward_slow.S); slots are overwritten with the real
// driver's functions once resolved (the forwarded ones always, the hooked ones when
// MISSILE_DISABLE=1). A slot is one aligned pointer: loads and stores are atomic.
#ifndef MISSILE_LIBINTERCEPT_ENTRY_TABLE_H_
#define MISSILE_LIBINTERCEPT_ENTRY_TABLE_H_

#include <cstdint>

#include "hooks.h"

extern "C" {
__attribute__((visibility("hidden"))) extern void* missile_entry_table[];
// The lazy forwarder: expects the entry's index in r11 (see forward_slow.S).
__attribute__((visibility("hidden"))) void missile_forward_slow();
// Called by missile_forward_slow: returns the function to jump to for entry `index`.
__attribute__((visibility("hidden"))) void* missile_resolve_forward(uint32_t index);
}

namespace missile::shim {

inline void StoreEntry(uint32_t index, void* fn) {
  __atomic_store_n(&missile_entry_table[index], fn, __ATOMIC_RELEASE);
}

// The export index of a hook's symbol, or -1 when the driver stub does not export it.
int ExportIndexOf(HookId id);

// Fills `out` with the shim's wrapper for every hook (hooks.cc).
void HookFunctions(void* out[kHookCount]);

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_ENTRY_TABLE_H_

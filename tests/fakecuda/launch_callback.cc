#include "launch_callback.h"

#include <cstring>
#include <utility>

#include "fake_state.h"

namespace fakecuda {
namespace {

// The table's entries the fake does not model: a caller that relies on them fails loudly.
int Unsupported() { return 1; }

int SubscribeEntry(uint32_t* handle, LaunchCallbackFn cb, void* userdata) {
  return State().launch_callbacks().Subscribe(handle, cb, userdata);
}

int EnableEntry(uint32_t on, uint32_t handle, int domain, int cbid) {
  return State().launch_callbacks().Enable(on, handle, domain, cbid);
}

// Pointer-sized entries, as the driver lays its export tables out.
struct CallbackTable {
  size_t size;
  int (*entry1)();
  int (*entry2)();
  int (*subscribe)(uint32_t* handle, LaunchCallbackFn cb, void* userdata);
  int (*entry4)();
  int (*entry5)();
  int (*enable)(uint32_t on, uint32_t handle, int domain, int cbid);
};
static_assert(sizeof(CallbackTable) == 7 * sizeof(void*));

constexpr CallbackTable kTable = {
    sizeof(CallbackTable), &Unsupported, &Unsupported, &SubscribeEntry,
    &Unsupported,          &Unsupported, &EnableEntry,
};

}  // namespace

int LaunchCallbacks::Subscribe(uint32_t* handle, LaunchCallbackFn cb, void* userdata) {
  if (handle == nullptr || cb == nullptr) return 1;
  MutexLock lock(&mu_);
  // Handles are 1-based positions: subscribers are never removed.
  subscribers_.push_back({static_cast<uint32_t>(subscribers_.size() + 1), cb, userdata, false});
  *handle = subscribers_.back().handle;
  return 0;
}

int LaunchCallbacks::Enable(uint32_t on, uint32_t handle, int domain, int cbid) {
  MutexLock lock(&mu_);
  if (handle == 0 || handle > subscribers_.size()) return 1;
  Subscriber& s = subscribers_[handle - 1];
  // Other callback sites are accepted and never called.
  if (domain != kLaunchDomain || cbid != kLaunchCbid || s.on_launch == (on != 0)) return 0;
  s.on_launch = on != 0;
  enabled_.fetch_add(s.on_launch ? 1 : -1, std::memory_order_release);
  return 0;
}

TpcMask LaunchCallbacks::DisabledTpcs() const {
  if (enabled_.load(std::memory_order_acquire) == 0) return {};
  std::vector<std::pair<LaunchCallbackFn, void*>> calls;
  {
    MutexLock lock(&mu_);
    for (const Subscriber& s : subscribers_) {
      if (s.on_launch) calls.emplace_back(s.cb, s.userdata);
    }
  }
  // Each launch gets a fresh descriptor, as the driver builds one per launch.
  alignas(16) unsigned char desc[kLaunchDescSize] = {};
  desc[kLaunchDescVersionOffset] = desc_version_;
  alignas(16) unsigned char params[kParamsSize] = {};
  std::memcpy(params, &kParamsSize, sizeof(kParamsSize));
  const unsigned char* desc_address = desc;
  std::memcpy(params + kParamsDescOffset, &desc_address, sizeof(desc_address));
  for (const auto& [cb, userdata] : calls) cb(userdata, kLaunchDomain, kLaunchCbid, params);
  return DisabledTpcsOf(desc);
}

const void* CallbackExportTable() { return &kTable; }

}  // namespace fakecuda

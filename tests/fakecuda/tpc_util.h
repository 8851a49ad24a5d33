// Helpers for tests of the TPC masks: the launch callback's export table as a caller sees it,
// a subscriber that checks what it is handed and writes a mask, and the default layout worked
// out independently of the fake's code (the numbers of the spec, not tpcs.h).

#ifndef MISSILE_TESTS_FAKECUDA_TPC_UTIL_H_
#define MISSILE_TESTS_FAKECUDA_TPC_UTIL_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "kernel_util.h"

namespace fakecuda_test {

inline constexpr unsigned char kCallbackTableUuid[16] = {
    0x2c, 0x8e, 0x0a, 0xd8, 0x07, 0x10, 0xab, 0x4e, 0x90, 0xdd, 0x54, 0x71, 0x9f, 0xe5, 0xf7, 0x4b};
inline constexpr int kDefaultSms = 132;
inline constexpr int kDefaultLiveTpcs = 66;
inline const std::set<int> kDefaultDeadTpcs = {3, 12, 25, 38, 51, 64};

using LaunchCb = void (*)(void* userdata, int domain, int cbid, const void* params);
using SubscribeFn = int (*)(uint32_t* handle, LaunchCb cb, void* userdata);
using EnableFn = int (*)(uint32_t on, uint32_t handle, int domain, int cbid);

// The export table (CUDA_SUCCESS) or the error cuGetExportTable gave, `entries` then null.
struct CallbackTable {
  CUresult Get() {
    CUuuid id;
    std::memcpy(id.bytes, kCallbackTableUuid, sizeof(id.bytes));
    const void* table = nullptr;
    const CUresult r = cuGetExportTable(&table, &id);
    entries = static_cast<const uintptr_t*>(table);
    return r;
  }
  size_t size() const { return entries[0]; }
  SubscribeFn subscribe() const { return reinterpret_cast<SubscribeFn>(entries[3]); }
  EnableFn enable() const { return reinterpret_cast<EnableFn>(entries[6]); }

  const uintptr_t* entries = nullptr;
};

// The words a subscriber writes at descriptor offsets 304..316 to disable physical TPCs `tpcs`
// (bit t, or t + 1 from t = 31 on; bit 31 of the first word enables the mask).
inline std::array<uint32_t, 4> MaskWords(const std::vector<int>& tpcs, bool enable = true) {
  std::array<uint32_t, 4> words{};
  for (int t : tpcs) {
    const int bit = t < 31 ? t : t + 1;
    words[bit / 32] |= 1u << (bit % 32);
  }
  if (enable) words[0] |= 0x80000000u;
  return words;
}

// The SM ids of physical TPC t on the default layout: k and k + 66, k its rank among live TPCs.
inline std::vector<uint32_t> SmsOfTpc(int t) {
  uint32_t k = 0;
  for (int i = 0; i < t; ++i) k += kDefaultDeadTpcs.count(i) == 0 ? 1 : 0;
  return {k, k + kDefaultLiveTpcs};
}

// The default device's SMs without those of `disabled` (physical TPCs), ascending.
inline std::vector<uint32_t> SmsWithout(const std::vector<int>& disabled) {
  std::set<uint32_t> off;
  for (int t : disabled) {
    if (kDefaultDeadTpcs.count(t) != 0) continue;
    for (uint32_t sm : SmsOfTpc(t)) off.insert(sm);
  }
  std::vector<uint32_t> sms;
  for (uint32_t sm = 0; sm < kDefaultSms; ++sm) {
    if (off.count(sm) == 0) sms.push_back(sm);
  }
  return sms;
}

// A launch-callback subscriber: counts its calls, checks each against the documented layout
// and writes `words` into the descriptor's mask when `write`.
struct Subscriber {
  void SetMask(const std::array<uint32_t, 4>& w) {
    std::lock_guard<std::mutex> lock(mu);
    words = w;
    write = true;
  }

  static void OnLaunch(void* userdata, int domain, int cbid, const void* params) {
    auto* self = static_cast<Subscriber*>(userdata);
    self->calls.fetch_add(1);
    const auto* p = static_cast<const unsigned char*>(params);
    uint32_t size = 0;
    std::memcpy(&size, p, sizeof(size));
    void* holder = nullptr;
    std::memcpy(&holder, p + 64, sizeof(holder));
    unsigned char* desc = holder != nullptr ? *static_cast<unsigned char**>(holder) : nullptr;
    std::lock_guard<std::mutex> lock(self->mu);
    self->thread = std::this_thread::get_id();
    bool ok =
        domain == 3 && cbid == 3 && size == 0x58 && desc != nullptr && desc[72] == self->version;
    // A fresh descriptor: zero but for the version (and what earlier subscribers wrote).
    for (int i = 0; ok && i < 512; ++i) ok = desc[i] == 0 || i == 72 || (i >= 304 && i < 320);
    if (!ok) {
      self->bad.fetch_add(1);
      return;
    }
    if (self->write) std::memcpy(desc + 304, self->words.data(), sizeof(self->words));
  }

  uint8_t version = 0x40;  // the descriptor version to expect
  std::atomic<int> calls{0};
  std::atomic<int> bad{0};  // calls that did not see the documented layout
  std::mutex mu;
  std::array<uint32_t, 4> words{};
  bool write = false;
  std::thread::id thread;  // of the latest call
};

}  // namespace fakecuda_test

#endif  // MISSILE_TESTS_FAKECUDA_TPC_UTIL_H_

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
// The one callback site that has an effect ("before the launch descriptor is uploaded").
inline constexpr int kLaunchDomain = 0xb;
inline constexpr int kLaunchCbid = 1;
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

// The words a subscriber writes at descriptor offsets 304, 308, 312, 316 to disable physical
// TPCs `tpcs`: TPC t is bit t % 32 of word t / 32. (They count only with bit 31 of the
// descriptor's word at offset 0 set: Subscriber sets it.)
inline std::array<uint32_t, 4> MaskWords(const std::vector<int>& tpcs) {
  std::array<uint32_t, 4> words{};
  for (int t : tpcs) words[t / 32] |= 1u << (t % 32);
  return words;
}

// Sets (or clears) the mask's enable bit: bit 31 of the little-endian word at offset 0, which is
// bit 7 of byte 3.
inline void SetEnableBit(unsigned char* desc, bool enable) {
  desc[3] = static_cast<unsigned char>(enable ? desc[3] | 0x80 : desc[3] & 0x7f);
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
// and, when `write`, writes `words` into the descriptor's mask words and sets (or clears) the
// mask's enable bit.
struct Subscriber {
  void SetMask(const std::array<uint32_t, 4>& w, bool enable_bit = true) {
    std::lock_guard<std::mutex> lock(mu);
    words = w;
    enable = enable_bit;
    write = true;
  }

  // The params block: 0x30 bytes, its first uint32 0x30, the 8-byte word at byte 32 the
  // descriptor's address, the rest zero. The descriptor: 512 bytes, zero but for the version at
  // byte 72 (and what earlier subscribers may write: the enable bit, bytes 304..319).
  bool LayoutOk(int domain, int cbid, const unsigned char* p, const unsigned char* desc) const {
    uint32_t size = 0;
    std::memcpy(&size, p, sizeof(size));
    bool ok = domain == kLaunchDomain && cbid == kLaunchCbid && size == 0x30 && desc != nullptr;
    for (int i = 4; ok && i < 0x30; ++i) ok = p[i] == 0 || (i >= 32 && i < 40);
    ok = ok && desc[72] == version && (desc[3] & 0x7f) == 0;
    for (int i = 0; ok && i < 512; ++i) {
      ok = desc[i] == 0 || i == 3 || i == 72 || (i >= 304 && i < 320);
    }
    return ok;
  }

  static void OnLaunch(void* userdata, int domain, int cbid, const void* params) {
    auto* self = static_cast<Subscriber*>(userdata);
    self->calls.fetch_add(1);
    const auto* p = static_cast<const unsigned char*>(params);
    unsigned char* desc = nullptr;
    std::memcpy(&desc, p + 32, sizeof(desc));  // pointer index 4: the descriptor itself
    std::lock_guard<std::mutex> lock(self->mu);
    self->thread = std::this_thread::get_id();
    if (!self->LayoutOk(domain, cbid, p, desc)) {
      self->bad.fetch_add(1);
      return;
    }
    if (!self->write) return;
    std::memcpy(desc + 304, self->words.data(), sizeof(self->words));
    SetEnableBit(desc, self->enable);
  }

  uint8_t version = 0x40;  // the descriptor version to expect
  std::atomic<int> calls{0};
  std::atomic<int> bad{0};  // calls that did not see the documented layout
  std::mutex mu;
  std::array<uint32_t, 4> words{};
  bool enable = true;
  bool write = false;
  std::thread::id thread;  // of the latest call
};

}  // namespace fakecuda_test

#endif  // MISSILE_TESTS_FAKECUDA_TPC_UTIL_H_

// The device's TPCs (thread processing clusters, two SMs each) and per-launch TPC masks.
//
// A fake device has kNumTpcs physical TPCs, index t; some are floorswept (dead, config.h). The
// live ones, in ascending t, are numbered k = 0..L-1, and live TPC k holds SM ids k and k + L,
// so the device has 2L SMs. A launch may have TPCs disabled (launch_callback.h): a 128-bit mask
// in which bit t (TpcBit(t)) is physical TPC t. The SMs a kernel may use are those of the live
// TPCs whose bit is clear.
//
// Header-only and free of the fake's state, so tests check the layout directly. Immutable after
// construction; safe to read from any thread.

#ifndef MISSILE_TESTS_FAKECUDA_TPCS_H_
#define MISSILE_TESTS_FAKECUDA_TPCS_H_

#include <cstdint>
#include <functional>
#include <vector>

namespace fakecuda {

inline constexpr int kNumTpcs = 72;

// The bit of physical TPC t in a TPC mask: every one of the 128 bits is a TPC bit.
constexpr int TpcBit(int t) { return t; }

// A 128-bit set of bit positions; as a disable mask, the TPCs a launch may not use.
struct TpcMask {
  uint64_t lo = 0;  // bits 0..63
  uint64_t hi = 0;  // bits 64..127

  bool Has(int bit) const {
    if (bit < 0 || bit >= 128) return false;
    return (((bit < 64 ? lo : hi) >> (bit % 64)) & 1) != 0;
  }
  void Set(int bit) { (bit < 64 ? lo : hi) |= uint64_t{1} << (bit % 64); }
  bool empty() const { return lo == 0 && hi == 0; }
  bool operator==(const TpcMask&) const = default;
};

// The launch descriptor the launch callback sees (launch_callback.h): where its version byte, its
// TPC mask words and the mask's enable bit are.
inline constexpr size_t kLaunchDescSize = 512;
inline constexpr size_t kLaunchDescVersionOffset = 72;
inline constexpr size_t kLaunchDescMaskOffset = 304;  // four little-endian uint32 words
inline constexpr size_t kLaunchDescEnableOffset = 0;  // a little-endian uint32 word
inline constexpr int kLaunchDescEnableBit = 31;       // of the word at kLaunchDescEnableOffset

// The little-endian uint32 word at `b`.
inline uint32_t LoadLe32(const unsigned char* b) {
  return uint32_t{b[0]} | (uint32_t{b[1]} << 8) | (uint32_t{b[2]} << 16) | (uint32_t{b[3]} << 24);
}

// The TPCs a launch descriptor disables: with bit 31 of its first word (offset 0) set, the
// 128-bit value w304 | w308 << 32 | w312 << 64 | w316 << 96 of its mask words; else none.
inline TpcMask DisabledTpcsOf(const unsigned char* desc) {
  if (((LoadLe32(desc + kLaunchDescEnableOffset) >> kLaunchDescEnableBit) & 1) == 0) return {};
  uint32_t w[4];
  for (int i = 0; i < 4; ++i) w[i] = LoadLe32(desc + kLaunchDescMaskOffset + 4 * i);
  return {w[0] | (uint64_t{w[1]} << 32), w[2] | (uint64_t{w[3]} << 32)};
}

class TpcLayout {
 public:
  // `dead`: physical indices in [0, kNumTpcs); others are ignored.
  explicit TpcLayout(const std::vector<int>& dead) {
    std::vector<bool> is_dead(kNumTpcs, false);
    for (int t : dead) {
      if (t >= 0 && t < kNumTpcs) is_dead[t] = true;
    }
    for (int t = 0; t < kNumTpcs; ++t) {
      if (!is_dead[t]) live_.push_back(t);
    }
  }

  int live_tpcs() const { return static_cast<int>(live_.size()); }
  int sm_count() const { return 2 * live_tpcs(); }
  // The physical index of live TPC k.
  int PhysicalTpc(int k) const { return live_[k]; }

  // The SM ids, ascending, of the live TPCs whose bit `disabled` leaves clear.
  std::vector<uint32_t> AllowedSms(const TpcMask& disabled) const {
    const int n = live_tpcs();
    std::vector<uint32_t> sms;
    sms.reserve(2 * n);
    for (int half = 0; half < 2; ++half) {
      for (int k = 0; k < n; ++k) {
        if (!disabled.Has(TpcBit(live_[k]))) sms.push_back(static_cast<uint32_t>(k + half * n));
      }
    }
    return sms;
  }

 private:
  std::vector<int> live_;  // physical indices, ascending
};

// A kernel launch whose checks are done, waiting to run with the TPCs its launch disabled (what
// the launch callback wrote at the launch, or, for a graph's kernel node, at the graph's upload).
using KernelTask = std::function<void(const TpcMask& disabled)>;

}  // namespace fakecuda

#endif  // MISSILE_TESTS_FAKECUDA_TPCS_H_

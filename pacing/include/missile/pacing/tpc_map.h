// Which of a GPU's TPCs (thread processing clusters: 2 SMs each on Hopper) a launch's TPC mask
// bits name, and the mask that keeps a reserve of them free of best-effort (BE) kernels: the
// decisions, over plain numbers (no CUDA). The shim (libintercept/tpc_mask.h) runs the probe
// kernel and writes the mask into each BE launch's descriptor.
//
// The mask is the driver's per-launch TPC disable mask: 128 bits in four 32-bit words, a set bit
// disables a TPC (the launch descriptor has a separate enable bit). The bits index physical
// TPCs, floorswept ones included (measured on an H200, driver 580.159.04: a mask with 16 bits
// enabled confined a kernel to 22 SMs, docs/pacing.md), so which bits are live and which SMs each
// one holds is discovered on each GPU: a probe kernel records the SM of every block, once with
// nothing disabled and once with each candidate bit disabled alone; the SMs that disappear are
// that bit's. Disabling one bit at a time never disables every live TPC, so no probe launch can
// be left with nowhere to run.
//
// As an MPS client the SM ids a kernel reads are not physical (measured on the H200, driver
// 580.159.04: with any one live bit disabled, the two highest ids vanished, whichever the bit).
// The mask still acts on physical TPCs, so there the map is derived from counts alone: a bit is
// live when disabling it removes SMs, every live bit must remove the same number, and together
// they must account for every SM; which SMs a bit holds is then unknown.
// Thread-safety: none needed (values and pure functions).
#ifndef MISSILE_PACING_TPC_MAP_H_
#define MISSILE_PACING_TPC_MAP_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace missile::pacing {

inline constexpr uint32_t kTpcMaskBits = 128;

// A launch's TPC disable mask as the launch descriptor holds it.
struct TpcMask {
  std::array<uint32_t, 4> words = {};
  bool operator==(const TpcMask&) const = default;
  bool Disables(uint32_t bit) const { return (words[bit / 32] >> (bit % 32)) & 1u; }
  bool empty() const { return words == std::array<uint32_t, 4>{}; }
};

// The bits a probe tries, in order: every bit of the mask.
std::vector<uint32_t> ProbeBits();

// A mask disabling `bits` (those >= kTpcMaskBits are ignored).
TpcMask DisableMask(const std::vector<uint32_t>& bits);

// What the probe saw: the SM ids the probe kernel's blocks ran on with nothing disabled, and
// with each bit of ProbeBits() disabled alone (same order).
struct TpcProbeResult {
  std::vector<uint32_t> all;
  std::vector<std::vector<uint32_t>> with_bit_disabled;
};

struct LiveTpc {
  uint32_t bit = 0;
  std::vector<uint32_t> sms;  // ascending; empty where the SM ids are virtual
};

// The GPU's live TPC bits, ascending, each with its SMs.
struct TpcMap {
  std::vector<LiveTpc> live;
  uint32_t sm_count = 0;         // SMs the probe saw with nothing disabled
  bool physical_ids = true;      // false: SM ids are virtual (MPS), the map is from counts
};

// Derives the map from a probe, or says why the probe does not describe a mask that works.
// With physical SM ids: a bit-disabled launch that used an SM the full launch did not, or ran
// nowhere; two bits claiming one SM; SMs no bit accounts for; no live bit at all. Where two
// bits claim the same SMs, the ids are taken as virtual and the counts must add up instead.
absl::StatusOr<TpcMap> DeriveTpcMap(const TpcProbeResult& probe);

// The mask for BE work that leaves `reserve` TPCs free: the last `reserve` live bits disabled
// (at most all live bits but one, so a BE kernel always has somewhere to run). Empty (no mask)
// when reserve is 0.
TpcMask ReserveMask(const TpcMap& map, uint32_t reserve);
// How many TPCs ReserveMask keeps free for `reserve` (after the clamp), and their SMs (none
// known where the ids are virtual).
uint32_t ReservedTpcs(const TpcMap& map, uint32_t reserve);
std::vector<uint32_t> ReservedSms(const TpcMap& map, uint32_t reserve);

// "66 live TPCs (bits 0-2, 4-11, ...), 132 SMs" for logs and the exit report.
std::string DescribeTpcMap(const TpcMap& map);

}  // namespace missile::pacing

#endif  // MISSILE_PACING_TPC_MAP_H_

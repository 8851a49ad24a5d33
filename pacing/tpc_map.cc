#include "missile/pacing/tpc_map.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace missile::pacing {

std::vector<uint32_t> ProbeBits() {
  std::vector<uint32_t> bits;
  for (uint32_t b = 0; b < kTpcMaskBits; ++b) bits.push_back(b);
  return bits;
}

TpcMask DisableMask(const std::vector<uint32_t>& bits) {
  TpcMask m;
  for (uint32_t b : bits) {
    if (b < kTpcMaskBits) m.words[b / 32] |= 1u << (b % 32);
  }
  return m;
}

namespace {

// The map from counts alone (virtual SM ids): `missing[i]` SMs vanished with bit i disabled.
absl::StatusOr<TpcMap> FromCounts(const std::vector<uint32_t>& bits,
                                  const std::vector<size_t>& missing, uint32_t sm_count) {
  TpcMap map;
  map.sm_count = sm_count;
  map.physical_ids = false;
  size_t per_tpc = 0;
  for (size_t i = 0; i < bits.size(); ++i) {
    if (missing[i] == 0) continue;
    if (per_tpc != 0 && missing[i] != per_tpc) {
      return absl::FailedPreconditionError(absl::StrCat(
          "mask bit ", bits[i], " removed ", missing[i], " SMs, others ", per_tpc));
    }
    per_tpc = missing[i];
    map.live.push_back(LiveTpc{bits[i], {}});
  }
  if (map.live.empty()) return absl::FailedPreconditionError("no mask bit confined the probe");
  if (map.live.size() * per_tpc != sm_count) {
    return absl::FailedPreconditionError(absl::StrCat(map.live.size(), " live bits of ", per_tpc,
                                                      " SMs do not make the ", sm_count, " SMs"));
  }
  return map;
}

}  // namespace

absl::StatusOr<TpcMap> DeriveTpcMap(const TpcProbeResult& probe) {
  const std::vector<uint32_t> bits = ProbeBits();
  if (probe.with_bit_disabled.size() != bits.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the probe has ", probe.with_bit_disabled.size(),
                                                   " bit results, expected ", bits.size()));
  }
  const std::set<uint32_t> all(probe.all.begin(), probe.all.end());
  if (all.empty()) return absl::FailedPreconditionError("the probe kernel ran on no SM");
  TpcMap map;
  map.sm_count = static_cast<uint32_t>(all.size());
  std::map<uint32_t, uint32_t> owner;  // SM -> bit
  std::vector<size_t> missing(bits.size(), 0);
  bool shared = false;  // two bits claimed one SM: the ids are virtual
  for (size_t i = 0; i < bits.size(); ++i) {
    const std::set<uint32_t> used(probe.with_bit_disabled[i].begin(),
                                  probe.with_bit_disabled[i].end());
    if (used.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("with mask bit ", bits[i], " disabled the probe ran nowhere"));
    }
    LiveTpc tpc;
    tpc.bit = bits[i];
    for (uint32_t sm : used) {
      if (!all.contains(sm)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "with mask bit ", bits[i], " disabled the probe ran on SM ", sm, ", unseen unmasked"));
      }
    }
    std::set_difference(all.begin(), all.end(), used.begin(), used.end(),
                        std::back_inserter(tpc.sms));
    missing[i] = tpc.sms.size();
    if (tpc.sms.empty()) continue;
    for (uint32_t sm : tpc.sms) shared |= !owner.emplace(sm, bits[i]).second;
    map.live.push_back(std::move(tpc));
  }
  if (shared) return FromCounts(bits, missing, map.sm_count);
  if (map.live.empty()) return absl::FailedPreconditionError("no mask bit confined the probe");
  if (owner.size() != all.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        all.size() - owner.size(), " of ", all.size(), " SMs are under no mask bit"));
  }
  return map;
}

uint32_t ReservedTpcs(const TpcMap& map, uint32_t reserve) {
  const uint32_t live = static_cast<uint32_t>(map.live.size());
  return live == 0 ? 0 : std::min(reserve, live - 1);
}

TpcMask ReserveMask(const TpcMap& map, uint32_t reserve) {
  const uint32_t n = ReservedTpcs(map, reserve);
  if (n == 0) return TpcMask{};
  std::vector<uint32_t> bits;
  for (size_t i = map.live.size() - n; i < map.live.size(); ++i) bits.push_back(map.live[i].bit);
  return DisableMask(bits);
}

std::vector<uint32_t> ReservedSms(const TpcMap& map, uint32_t reserve) {
  const uint32_t n = ReservedTpcs(map, reserve);
  std::vector<uint32_t> sms;
  for (size_t i = map.live.size() - n; i < map.live.size(); ++i) {
    sms.insert(sms.end(), map.live[i].sms.begin(), map.live[i].sms.end());
  }
  std::sort(sms.begin(), sms.end());
  return sms;
}

std::string DescribeTpcMap(const TpcMap& map) {
  // Runs of consecutive live bits: "0-2, 4-11".
  std::vector<std::string> runs;
  for (size_t i = 0; i < map.live.size();) {
    size_t j = i;
    while (j + 1 < map.live.size() && map.live[j + 1].bit == map.live[j].bit + 1) ++j;
    runs.push_back(i == j ? absl::StrCat(map.live[i].bit)
                          : absl::StrCat(map.live[i].bit, "-", map.live[j].bit));
    i = j + 1;
  }
  return absl::StrCat(map.live.size(), " live TPCs (mask bits ", absl::StrJoin(runs, ", "), "), ",
                      map.sm_count, " SMs", map.physical_ids ? "" : " (virtual SM ids: by count)");
}

}  // namespace missile::pacing

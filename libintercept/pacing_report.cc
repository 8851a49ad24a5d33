// The exit report's pacing lines, over the pacer of every GPU in every session (session_gpu.h).
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "pacer.h"
#include "session_gpu.h"
#include "session_manager.h"

namespace missile::shim {

std::string PacingSummary(const SessionManager& sessions) {
  uint64_t marked = 0, held = 0, held_ns = 0, by[Pacer::kReasons] = {};
  sessions.ForEachGpu([&](const SessionGpu& gpu) {
    const Pacer* p = gpu.opened_pacer();
    if (p == nullptr) return;
    marked += p->marked();
    held += p->held();
    held_ns += p->held_ns();
    for (size_t r = 0; r < Pacer::kReasons; ++r) {
      by[r] += p->held_by_ns(static_cast<pacing::Verdict>(r));
    }
  });
  return std::to_string(marked) + " work items marked, " + std::to_string(held) + " held for " +
         std::to_string(held_ns / 1000000) + " ms in all (LS busy " +
         std::to_string(by[static_cast<size_t>(pacing::Verdict::kWaitLs)] / 1000000) +
         " ms, window " +
         std::to_string(by[static_cast<size_t>(pacing::Verdict::kWaitWindow)] / 1000000) +
         " ms, share " +
         std::to_string(by[static_cast<size_t>(pacing::Verdict::kWaitShare)] / 1000000) + " ms)";
}

std::string ReserveSummary(const SessionManager& sessions, const TpcMasker* masker) {
  // Per device, the newest session's try (the SessionGpus come oldest first).
  std::map<int, const Pacer*> newest;
  sessions.ForEachGpu([&](const SessionGpu& gpu) {
    if (gpu.pacer_tried()) newest[static_cast<int>(gpu.device())] = gpu.opened_pacer();
  });
  std::string out;
  for (const auto& [dev, p] : newest) {
    if (p == nullptr || p->reserve_state() == pacingreg::kReserveOff) continue;
    absl::StrAppend(&out, out.empty() ? "" : "; ", "GPU ", dev, ": ");
    if (p->reserve_state() == pacingreg::kReserveActive) {
      absl::StrAppend(&out, p->reserve_tpcs(), " TPCs kept free for LS tenants, ");
    }
    absl::StrAppend(&out, p->reserve_note());
  }
  if (out.empty()) return out;
  if (masker != nullptr) {
    absl::StrAppend(&out, "; ", masker->applied(), " launches masked, ", masker->refused(),
                    " refused");
  }
  return out;
}

}  // namespace missile::shim

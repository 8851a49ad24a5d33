// Per-entry-point call counters and injected failures.
//
// OnCall is the hot path of every entry point: one relaxed atomic increment, plus a mutex only
// when a failure is armed for that entry point. Thread-safe. Counts are per process.

#ifndef MISSILE_TESTS_FAKECUDA_CALL_STATS_H_
#define MISSILE_TESTS_FAKECUDA_CALL_STATS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "entry_points.h"
#include "thread_annotations.h"

namespace fakecuda {

class CallStats {
 public:
  CallStats() = default;
  CallStats(const CallStats&) = delete;
  CallStats& operator=(const CallStats&) = delete;

  // Counts a call; returns the injected code if this call is the one a failure was armed for,
  // else CUDA_SUCCESS.
  CUresult OnCall(EntryId id);

  uint64_t Count(EntryId id) const;

  // The call with 1-based number `nth` (counted from the start of the process) fails with `code`.
  void ArmAbsolute(EntryId id, uint64_t nth, CUresult code);
  // The nth call from now on (1 = the next) fails with `code`.
  void ArmRelative(EntryId id, uint64_t nth, CUresult code);

 private:
  struct Rule {
    EntryId id;
    uint64_t nth;
    CUresult code;
  };

  std::array<std::atomic<uint64_t>, kNumEntryPoints> counts_{};
  std::array<std::atomic<int>, kNumEntryPoints> armed_{};  // rules pending per entry point
  Mutex mu_;
  std::vector<Rule> rules_ FAKECUDA_GUARDED_BY(mu_);
};

}  // namespace fakecuda

#endif  // MISSILE_TESTS_FAKECUDA_CALL_STATS_H_

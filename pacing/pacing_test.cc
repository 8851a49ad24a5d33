#include "missile/pacing/pacing.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

namespace missile::pacing {
namespace {

constexpr uint64_t kUs = 1000;
constexpr uint64_t kMs = 1000 * kUs;

TEST(LsInFlightCounts, OnlyWhileTheLastSubmissionIsFresh) {
  EXPECT_FALSE(LsInFlightCounts(false, 100, 200, kMs));
  EXPECT_TRUE(LsInFlightCounts(true, 100, 200, kMs));
  EXPECT_TRUE(LsInFlightCounts(true, 10 * kMs, 10 * kMs + kMs - 1, kMs));
  EXPECT_FALSE(LsInFlightCounts(true, 10 * kMs, 11 * kMs, kMs));  // hung LS: ignored
  // A mark in the future never counts: readers clamp marks within the clock slack to their own
  // clock first (pacingreg::ReadLanes), so what is still in the future here is a lie.
  EXPECT_FALSE(LsInFlightCounts(true, 500, 100, kMs));
  EXPECT_FALSE(LsInFlightCounts(true, UINT64_MAX, 100, kMs));
}

TEST(LsBusyTracker, BusyWhileInFlightAndForTheHysteresisAfter) {
  LsBusyTracker t;
  EXPECT_FALSE(t.Busy({false, 0}, 1 * kMs, 200 * kUs));  // never busy
  EXPECT_TRUE(t.Busy({true, 1 * kMs}, 2 * kMs, 200 * kUs));
  EXPECT_TRUE(t.Busy({true, 1 * kMs}, 3 * kMs, 200 * kUs));
  // Completed at 3 ms (last seen in flight): busy until 3.2 ms.
  EXPECT_TRUE(t.Busy({false, 1 * kMs}, 3 * kMs + 100 * kUs, 200 * kUs));
  EXPECT_TRUE(t.Busy({false, 1 * kMs}, 3 * kMs + 199 * kUs, 200 * kUs));
  EXPECT_FALSE(t.Busy({false, 1 * kMs}, 3 * kMs + 200 * kUs, 200 * kUs));
  EXPECT_EQ(t.last_busy_ns(), 3 * kMs);
}

TEST(LsBusyTracker, ARecentSubmissionCountsEvenIfItsWorkIsAlreadyDone) {
  // An eager LS: its kernel finished before the reader looked, but it submitted 50 us ago and
  // will submit again: the gap is inside the hysteresis.
  LsBusyTracker t;
  EXPECT_TRUE(t.Busy({false, 10 * kMs}, 10 * kMs + 50 * kUs, 200 * kUs));
  EXPECT_FALSE(t.Busy({false, 10 * kMs}, 10 * kMs + 250 * kUs, 200 * kUs));
}

TEST(InflightWindow, AdmitsOneAlwaysThenByCountAndPredictedDuration) {
  InflightWindow w;
  InflightWindow::Limits lim{.items = 3, .predicted_ns = 100 * kUs};
  EXPECT_TRUE(w.Admits(500 * kUs, lim, 0));  // empty: even a long one
  w.Add(0, 1, 7, 60 * kUs, 0);
  EXPECT_TRUE(w.Admits(40 * kUs, lim, 0));
  EXPECT_FALSE(w.Admits(41 * kUs, lim, 0));  // 60 + 41 > 100
  w.Add(0, 2, 7, 20 * kUs, 0);
  w.Add(1, 1, 8, 10 * kUs, 0);
  EXPECT_EQ(w.count(), 3u);
  EXPECT_EQ(w.predicted_in_flight_ns(), 90 * kUs);
  EXPECT_FALSE(w.Admits(1, lim, 0));  // count
}

TEST(InflightWindow, ABudgetWidensTheLimitsWithinBounds) {
  const InflightWindow::Limits lim{.items = 8, .predicted_ns = 100 * kUs, .refill_ns = 25 * kUs};
  const InflightWindow::Limits x4 = InflightWindow::Scaled(lim, 4);
  EXPECT_EQ(x4.items, 32u);
  EXPECT_EQ(x4.predicted_ns, 400 * kUs);
  EXPECT_EQ(x4.refill_ns, 100 * kUs);
  // 0 is 1; the count stops at kMaxItems, a time at the largest value.
  EXPECT_EQ(InflightWindow::Scaled(lim, 0).items, 8u);
  EXPECT_EQ(InflightWindow::Scaled({.items = 1000, .predicted_ns = UINT64_MAX / 2}, 16).items,
            InflightWindow::kMaxItems);
  EXPECT_EQ(InflightWindow::Scaled({.items = 1, .predicted_ns = UINT64_MAX / 2}, 16).predicted_ns,
            UINT64_MAX);
  // What the widened window admits: four times the work in flight.
  InflightWindow w;
  w.Add(0, 1, 7, 90 * kUs, 0);
  EXPECT_FALSE(w.Admits(60 * kUs, lim, 0));
  EXPECT_TRUE(w.Admits(60 * kUs, x4, 0));
}

TEST(InflightWindow, WhatIsLeftToRunDecidesAsTimePasses) {
  InflightWindow w;
  InflightWindow::Limits lim{.items = 8, .predicted_ns = 100 * kUs, .refill_ns = 25 * kUs};
  w.Add(0, 1, 1, 150 * kUs, 1000 * kUs);  // one long item on lane 0
  EXPECT_EQ(w.RemainingNs(1000 * kUs), 150 * kUs);
  EXPECT_FALSE(w.Admits(10 * kUs, lim, 1000 * kUs));
  EXPECT_EQ(w.RemainingNs(1080 * kUs), 70 * kUs);
  EXPECT_TRUE(w.Admits(30 * kUs, lim, 1080 * kUs));   // 70 + 30 fits
  EXPECT_FALSE(w.Admits(80 * kUs, lim, 1080 * kUs));  // 70 + 80 does not, 70 > 25
  // Under refill_ns left: even a long next item goes, so the GPU stays fed; not with 0.
  EXPECT_TRUE(w.Admits(300 * kUs, lim, 1130 * kUs));
  InflightWindow::Limits strict = lim;
  strict.refill_ns = 0;
  EXPECT_FALSE(w.Admits(300 * kUs, strict, 1130 * kUs));
  // Lanes run side by side: their remainders add up; overdue items count 0.
  w.Add(2, 1, 2, 40 * kUs, 1100 * kUs);
  EXPECT_EQ(w.RemainingNs(1120 * kUs), 30 * kUs + 20 * kUs);
  EXPECT_EQ(w.RemainingNs(2000 * kUs), 0u);
}

// A long item (a copy, a long kernel) is reported by itself: what waits behind it on its lane has
// not started while it runs, however far it outlasts its prediction. Counted down from the
// lane's start instead, kernels queued behind a long copy looked done before they ran, and the
// window let a burst of them wait on the GPU (pair (a)'s LS tail).
TEST(InflightWindow, ItemsBehindAnUnfinishedAloneItemCountInFull) {
  InflightWindow::Limits lim{.items = 8, .predicted_ns = 100 * kUs, .refill_ns = 25 * kUs};
  for (const bool alone : {false, true}) {
    InflightWindow w;
    w.Add(0, 1, 1, 200 * kUs, 0, alone);  // the copy, predicted 200 us
    w.Add(0, 2, 2, 30 * kUs, 10 * kUs);   // kernels behind it
    w.Add(0, 3, 3, 30 * kUs, 20 * kUs);
    // 1 ms on, the copy is still running (not reported done).
    if (!alone) {
      EXPECT_EQ(w.RemainingNs(1000 * kUs), 0u);
      EXPECT_TRUE(w.Admits(90 * kUs, lim, 1000 * kUs));
      continue;
    }
    EXPECT_EQ(w.RemainingNs(1000 * kUs), 60 * kUs);
    EXPECT_FALSE(w.Admits(41 * kUs, lim, 1000 * kUs));
    EXPECT_TRUE(w.Admits(40 * kUs, lim, 1000 * kUs));
    // Before it overran, it counted down as usual: 200 - 50 left, plus the queued 60.
    EXPECT_EQ(w.RemainingNs(50 * kUs), 150 * kUs + 60 * kUs);
    // Once it is seen done, the kernels count down from its end.
    w.Retire([](uint32_t) { return uint64_t{1}; }, 1000 * kUs, 1000, nullptr);
    EXPECT_EQ(w.RemainingNs(1000 * kUs), 60 * kUs);
    EXPECT_EQ(w.RemainingNs(1040 * kUs), 20 * kUs);
  }
  // Another lane is not held up by it.
  InflightWindow w;
  w.Add(0, 1, 1, 200 * kUs, 0, /*alone=*/true);
  w.Add(1, 1, 2, 30 * kUs, 10 * kUs);
  EXPECT_EQ(w.RemainingNs(1000 * kUs), 0u);
}

TEST(InflightWindow, RetiresByLaneSequenceAndSamplesDurations) {
  InflightWindow w;
  w.Add(0, 1, 100, 10 * kUs, 1000 * kUs);
  w.Add(0, 2, 200, 10 * kUs, 1001 * kUs);
  w.Add(3, 1, 300, 10 * kUs, 1002 * kUs);
  uint64_t done[4] = {1, 0, 0, 0};
  auto completed = [&](uint32_t lane) { return done[lane]; };
  std::vector<DurationSample> s;
  w.Retire(completed, 1010 * kUs, /*since_last_check_ns=*/1000, &s);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].key, 100u);
  EXPECT_EQ(s[0].ns, 10 * kUs);
  EXPECT_EQ(w.count(), 2u);
  EXPECT_EQ(w.oldest_issued_ns(), 1001 * kUs);
  // The second item on lane 0 could start only when the first ended (1010 us).
  done[0] = 2;
  done[3] = 1;
  s.clear();
  w.Retire(completed, 1030 * kUs, /*since_last_check_ns=*/1000, &s);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].key, 200u);
  EXPECT_EQ(s[0].ns, 20 * kUs);
  EXPECT_EQ(s[1].key, 300u);
  EXPECT_EQ(s[1].ns, 28 * kUs);
  EXPECT_EQ(w.count(), 0u);
  EXPECT_EQ(w.predicted_in_flight_ns(), 0u);
}

TEST(InflightWindow, ItemsReportedTogetherShareTheirTime) {
  // A lane that writes its completion only every few items: three items finish at once.
  InflightWindow w;
  w.Add(0, 1, 1, kUs, 100 * kUs);
  w.Add(0, 2, 2, kUs, 101 * kUs);
  w.Add(0, 3, 3, kUs, 102 * kUs);
  w.Add(1, 1, 9, kUs, 103 * kUs);  // another lane, not done yet
  std::vector<DurationSample> s;
  w.Retire([](uint32_t lane) { return lane == 0 ? uint64_t{3} : uint64_t{0}; }, 130 * kUs,
           /*since_last_check_ns=*/1000, &s);
  ASSERT_EQ(s.size(), 3u);
  for (const DurationSample& d : s) EXPECT_EQ(d.ns, 10 * kUs);
  EXPECT_EQ(w.count(), 1u);
}

TEST(InflightWindow, ManyItemsReportedTogetherTeachNothing) {
  // Their mean says too little of each: past kMaxSampleItems on a lane, no samples.
  for (const uint64_t n : {InflightWindow::kMaxSampleItems, InflightWindow::kMaxSampleItems + 1}) {
    InflightWindow w;
    for (uint64_t i = 1; i <= n; ++i) w.Add(0, i, i, kUs, 100 * kUs);
    std::vector<DurationSample> s;
    w.Retire([n](uint32_t) { return n; }, 100 * kUs + n * kUs, /*since_last_check_ns=*/0, &s);
    EXPECT_EQ(s.size(), n <= InflightWindow::kMaxSampleItems ? n : 0u) << n;
    EXPECT_EQ(w.count(), 0u);
  }
}

// A lane writes its completion every quarter of the window's items, within bounds.
TEST(InflightWindow, AWiderWindowIsReportedLessOften) {
  auto every = [](uint32_t items) { return InflightWindow::MarkEvery({.items = items}); };
  EXPECT_EQ(every(1), InflightWindow::kMinMarkEvery);
  EXPECT_EQ(every(8), 4u);  // the default window
  EXPECT_EQ(every(128), 32u);
  EXPECT_EQ(every(InflightWindow::kMaxItems), 256u);
  EXPECT_EQ(every(UINT32_MAX), InflightWindow::kMaxMarkEvery);
}

TEST(InflightWindow, LooseObservationsGiveNoSamples) {
  InflightWindow w;
  w.Add(0, 5, 1, kUs, 0);
  std::vector<DurationSample> s;
  w.Retire([](uint32_t) { return uint64_t{9}; }, 50 * kMs, /*since_last_check_ns=*/10 * kMs, &s);
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(w.count(), 0u);
}

// The window keeps per-lane sums as items come and go, so a launch costs the same at 8 items in
// flight as at kMaxItems. This is the rule it keeps, written out as a scan over every item (the
// old implementation, without its limit of 32 lanes counted down), run side by side with it.
class ScanWindow {
 public:
  void Add(uint32_t lane, uint64_t seq, uint64_t key, uint64_t predicted_ns, uint64_t now,
           bool alone, bool teach) {
    items_.push_back({lane, seq, key, predicted_ns, now, alone, teach});
  }
  template <typename Completed>
  void Retire(const Completed& completed, uint64_t now, uint64_t since_last,
              std::vector<DurationSample>* samples) {
    std::map<uint32_t, std::pair<uint64_t, uint64_t>> batch;  // lane -> start, count
    std::vector<Item> done;
    for (auto it = items_.begin(); it != items_.end();) {
      if (completed(it->lane) < it->seq) {
        ++it;
        continue;
      }
      auto [b, fresh] = batch.try_emplace(it->lane, 0, 0);
      if (fresh) b->second.first = std::max(it->issued, last_done_[it->lane]);
      ++b->second.second;
      done.push_back(*it);
      it = items_.erase(it);
    }
    for (const auto& [lane, b] : batch) last_done_[lane] = now;
    for (const Item& d : done) {
      const auto [start, count] = batch[d.lane];
      if (!d.teach || now <= start || count > InflightWindow::kMaxSampleItems) continue;
      const uint64_t each = (now - start) / count;
      const uint64_t late = since_last / count;
      if (late <= 20'000 || late <= each / 8) samples->push_back({d.key, each, start});
    }
  }
  uint64_t RemainingNs(uint64_t now) const {
    std::map<uint32_t, std::tuple<uint64_t, uint64_t, uint64_t, bool>> lanes;
    for (const Item& i : items_) {
      auto [l, fresh] = lanes.try_emplace(i.lane, 0, 0, 0, false);
      auto& [start, running, queued, blocked] = l->second;
      if (fresh) start = std::max(i.issued, last_done_.count(i.lane) ? last_done_.at(i.lane) : 0);
      (blocked ? queued : running) += i.predicted;
      blocked = blocked || i.alone;
    }
    uint64_t left = 0;
    for (const auto& [lane, l] : lanes) {
      const auto& [start, running, queued, blocked] = l;
      const uint64_t elapsed = now > start ? now - start : 0;
      left += (running > elapsed ? running - elapsed : 0) + queued;
    }
    return left;
  }
  uint64_t Oldest() const {
    uint64_t oldest = 0;
    for (const Item& i : items_) {
      if (oldest == 0 || i.issued < oldest) oldest = i.issued;
    }
    return oldest;
  }
  size_t count() const { return items_.size(); }
  uint64_t predicted() const {
    uint64_t sum = 0;
    for (const Item& i : items_) sum += i.predicted;
    return sum;
  }

 private:
  struct Item {
    uint32_t lane;
    uint64_t seq, key, predicted, issued;
    bool alone, teach;
  };
  std::vector<Item> items_;
  std::map<uint32_t, uint64_t> last_done_;
};

TEST(InflightWindow, KeepsTheRuleOfAScanOverEveryItem) {
  std::mt19937_64 rng(20261205);
  for (int round = 0; round < 40; ++round) {
    const uint32_t lanes = 1 + static_cast<uint32_t>(rng() % (round < 20 ? 4 : 40));
    InflightWindow w;
    ScanWindow ref;
    std::vector<uint64_t> submitted(lanes, 0), completed(lanes, 0);
    uint64_t now = 1'000'000;
    for (int step = 0; step < 3000; ++step) {
      now += rng() % (30 * kUs);
      const uint32_t lane = static_cast<uint32_t>(rng() % lanes);
      switch (rng() % 4) {
        case 0:
        case 1: {  // a launch
          const uint64_t predicted = 1 + rng() % (200 * kUs);
          const bool alone = rng() % 8 == 0, teach = rng() % 4 != 0;
          const uint64_t key = rng() % 16;
          w.Add(lane, ++submitted[lane], key, predicted, now, alone, teach);
          ref.Add(lane, submitted[lane], key, predicted, now, alone, teach);
          break;
        }
        case 2:  // the GPU completes some of a lane's items
          completed[lane] += rng() % (submitted[lane] - completed[lane] + 1);
          break;
        default: {  // a check
          const uint64_t since = rng() % (50 * kUs);
          std::vector<DurationSample> got, want;
          auto done = [&](uint32_t l) { return completed[l]; };
          w.Retire(done, now, since, &got);
          ref.Retire(done, now, since, &want);
          ASSERT_EQ(got.size(), want.size()) << "round " << round << " step " << step;
          for (size_t i = 0; i < got.size(); ++i) {
            EXPECT_EQ(got[i].key, want[i].key);
            EXPECT_EQ(got[i].ns, want[i].ns);
            EXPECT_EQ(got[i].start_ns, want[i].start_ns);
          }
        }
      }
      ASSERT_EQ(w.count(), ref.count());
      ASSERT_EQ(w.predicted_in_flight_ns(), ref.predicted());
      ASSERT_EQ(w.oldest_issued_ns(), ref.Oldest());
      for (const uint64_t later : {uint64_t{0}, 40 * kUs, 5 * kMs}) {
        ASSERT_EQ(w.RemainingNs(now + later), ref.RemainingNs(now + later))
            << "round " << round << " step " << step;
      }
    }
  }
}

TEST(DurationPredictor, UnknownThenMeanThatFollowsChange) {
  DurationPredictor p(4);
  EXPECT_EQ(p.Predict(1, 50 * kUs), 50 * kUs);
  p.Observe(1, 100 * kUs);
  EXPECT_EQ(p.Predict(1, 50 * kUs), 100 * kUs);
  p.Observe(1, 200 * kUs);
  EXPECT_EQ(p.Predict(1, 50 * kUs), 125 * kUs);
  for (int i = 0; i < 40; ++i) p.Observe(1, 20 * kUs);
  EXPECT_NEAR(static_cast<double>(p.Predict(1, 0)), 20.0 * kUs, 1.0 * kUs);
  p.Observe(1, 1 * kUs);  // one short outlier moves it by a quarter
  EXPECT_GT(p.Predict(1, 0), 14 * kUs);
}

TEST(DurationPredictor, BoundedInSize) {
  DurationPredictor p(3);
  for (uint64_t k = 0; k < 3; ++k) p.Observe(k, 10);
  EXPECT_EQ(p.size(), 3u);
  p.Observe(1, 20);  // known key: no reset
  EXPECT_EQ(p.size(), 3u);
  p.Observe(99, 10);  // a fourth key: starts again
  EXPECT_EQ(p.size(), 1u);
  EXPECT_EQ(p.Predict(0, 7), 7u);
}

TEST(ShareAllows, WeightedTimeDecides) {
  const uint64_t slack = 1 * kMs;
  // Alone: always.
  EXPECT_TRUE(ShareAllows({100 * kMs, 1}, {}, slack));
  // Weights 1:3, equal weighted time (10 ms at weight 1, 30 ms at weight 3): both may run.
  EXPECT_TRUE(ShareAllows({10 * kMs, 1}, {{30 * kMs, 3}}, slack));
  EXPECT_TRUE(ShareAllows({30 * kMs, 3}, {{10 * kMs, 1}}, slack));
  // The weight-1 tenant 2 ms ahead of its share: held; within its slack: allowed.
  EXPECT_FALSE(ShareAllows({12 * kMs, 1}, {{30 * kMs, 3}}, slack));
  EXPECT_TRUE(ShareAllows({10 * kMs + 900 * kUs, 1}, {{30 * kMs, 3}}, slack));
  // The weight-3 tenant may run 1 ms ahead of its share (a third of a ms of weighted time).
  EXPECT_TRUE(ShareAllows({31 * kMs, 3}, {{10 * kMs, 1}}, slack));
  EXPECT_FALSE(ShareAllows({32 * kMs, 3}, {{10 * kMs, 1}}, slack));
  // The least of several peers decides.
  EXPECT_FALSE(ShareAllows({20 * kMs, 1}, {{5 * kMs, 1}, {40 * kMs, 1}}, slack));
  // Within the slack but not the least: only while no other one's work is running.
  EXPECT_TRUE(ShareAllows({10 * kMs + 900 * kUs, 1}, {{30 * kMs, 3, false}}, slack));
  EXPECT_FALSE(ShareAllows({10 * kMs + 900 * kUs, 1}, {{30 * kMs, 3, true}}, slack));
  // The least may always go, running peers or not.
  EXPECT_TRUE(ShareAllows({9 * kMs, 1}, {{30 * kMs, 3, true}}, slack));
}

TEST(CatchUp, AReturningTenantStartsAtTheLeastWeightedTime) {
  const uint64_t slack = 1 * kMs;
  EXPECT_EQ(CatchUp({5 * kMs, 1}, {}, slack), 5 * kMs);
  // Peer at 300 ms of weight 3 (100 ms weighted): a weight-1 tenant at 2 ms jumps to 99 ms.
  EXPECT_EQ(CatchUp({2 * kMs, 1}, {{300 * kMs, 3}}, slack), 99 * kMs);
  // Never moves back.
  EXPECT_EQ(CatchUp({150 * kMs, 1}, {{300 * kMs, 3}}, slack), 150 * kMs);
}

TEST(Decide, GoOnlyWhenNothingHolds) {
  AdmissionInput in;
  in.now = 10 * kMs;
  in.waiting_since = 10 * kMs;
  EXPECT_EQ(Decide(in), Verdict::kGo);
  in.ls_busy = true;
  EXPECT_EQ(Decide(in), Verdict::kWaitLs);
  in.ls_busy = false;
  in.window_admits = false;
  in.in_flight = 3;
  EXPECT_EQ(Decide(in), Verdict::kWaitWindow);
  in.window_admits = true;
  in.share_allows = false;
  EXPECT_EQ(Decide(in), Verdict::kWaitShare);
}

TEST(Decide, MaxHoldLetsOneItemThroughWhenNothingIsInFlight) {
  AdmissionInput in;
  in.ls_busy = true;
  in.max_hold_ns = 20 * kMs;
  in.waiting_since = 100 * kMs;
  in.now = 119 * kMs;
  EXPECT_EQ(Decide(in), Verdict::kWaitLs);
  in.now = 120 * kMs;
  EXPECT_EQ(Decide(in), Verdict::kGo);
  in.in_flight = 1;  // its last item still runs: wait for it
  EXPECT_EQ(Decide(in), Verdict::kWaitLs);
  in.max_hold_ns = 0;  // no bound
  in.in_flight = 0;
  EXPECT_EQ(Decide(in), Verdict::kWaitLs);
}

TEST(Decide, AStalledWindowAdmits) {
  AdmissionInput in;
  in.window_admits = false;
  in.in_flight = 8;
  in.stall_ns = 50 * kMs;
  in.oldest_in_flight_ns = 100 * kMs;
  in.now = 149 * kMs;
  EXPECT_EQ(Decide(in), Verdict::kWaitWindow);
  in.now = 150 * kMs;
  EXPECT_EQ(Decide(in), Verdict::kGo);
  in.ls_busy = true;  // but never past a busy LS (that one has its own bound)
  EXPECT_EQ(Decide(in), Verdict::kWaitLs);
}

}  // namespace
}  // namespace missile::pacing

namespace missile::pacing {
namespace {

TEST(Decide, AQuietTimeHoldsEvenPastMaxHold) {
  AdmissionInput in;
  in.now = 100 * 1000 * 1000;
  in.waiting_since = 1;
  in.max_hold_ns = 1000;  // held long, nothing in flight: would go
  EXPECT_EQ(Decide(in), Verdict::kGo);
  in.ls_busy = true;
  EXPECT_EQ(Decide(in), Verdict::kGo);
  in.quiet = true;
  EXPECT_EQ(Decide(in), Verdict::kWaitLs);
}

}  // namespace
}  // namespace missile::pacing

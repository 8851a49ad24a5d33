#include "missile/pacing/budget.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

namespace missile::pacing {
namespace {

constexpr uint64_t kUs = 1000;
constexpr uint64_t kMs = 1000 * kUs;

// Polls an LS every 20 us: `work` says, per poll, whether its work is in flight; every rising
// edge is one new item with key `key`.
struct Feed {
  BusyPeriodTracker tracker;
  BusyPeriodTracker::Limits limits{200 * kUs, 200 * kUs, 1000 * kMs, 0};
  uint64_t now = 0;
  uint64_t submissions = 0;
  uint64_t work_sum = 0;
  std::vector<BusyPeriod> periods;

  void Run(uint64_t ns, bool in_flight, bool be = false, uint64_t items = 0, uint64_t key = 7) {
    for (uint64_t t = 0; t < ns; t += 20 * kUs) {
      now += 20 * kUs;
      if (items > 0) {
        submissions += items;
        work_sum += items * key;
        items = 0;
      }
      if (auto p = tracker.Poll({now, in_flight, submissions, work_sum, be}, limits)) {
        periods.push_back(*p);
      }
    }
  }
};

TEST(BusyPeriodTracker, APeriodLastsFromThePollBeforeItsWorkToThePollThatSawItDone) {
  Feed f;
  f.Run(1 * kMs, false);
  f.Run(1 * kMs, true, false, 3);  // 1 ms in flight
  f.Run(1 * kMs, false);
  ASSERT_EQ(f.periods.size(), 1u);
  // Starts at the poll before the first one that saw work, ends at the first that saw none.
  EXPECT_EQ(f.periods[0].ns, 1 * kMs + 20 * kUs);
  EXPECT_TRUE(f.periods[0].alone);
}

TEST(BusyPeriodTracker, GapsShorterThanTheIdleTimeAreOnePeriod) {
  Feed f;
  f.Run(1 * kMs, false);
  f.Run(300 * kUs, true, false, 1);
  f.Run(100 * kUs, false);  // a CPU gap of an eager LS
  f.Run(300 * kUs, true, false, 1);
  f.Run(1 * kMs, false);
  ASSERT_EQ(f.periods.size(), 1u);
  EXPECT_EQ(f.periods[0].ns, 720 * kUs);
  // The same work in two periods apart makes another signature than one period of both.
  f.Run(300 * kUs, true, false, 1);
  f.Run(300 * kUs, false);
  f.Run(300 * kUs, true, false, 1);
  f.Run(1 * kMs, false);
  ASSERT_EQ(f.periods.size(), 3u);
  EXPECT_EQ(f.periods[1].signature, f.periods[2].signature);
  EXPECT_NE(f.periods[0].signature, f.periods[1].signature);
}

TEST(BusyPeriodTracker, AnItemDoneBetweenTwoPollsStillMakesAPeriod) {
  Feed f;
  f.Run(1 * kMs, false);
  f.Run(20 * kUs, false, false, 1);  // submitted and completed between two polls
  f.Run(1 * kMs, false);
  ASSERT_EQ(f.periods.size(), 1u);
}

TEST(BusyPeriodTracker, BeWorkAtAnyPollOfThePeriodOrJustBeforeItMakesItNotAlone) {
  Feed f;
  f.Run(1 * kMs, false);
  f.Run(200 * kUs, true, false, 1);
  f.Run(100 * kUs, true, true);
  f.Run(1 * kMs, false);
  f.Run(1 * kMs, false, true);  // BE work while the LS is idle: no matter
  f.Run(20 * kUs, false, false);
  f.Run(300 * kUs, true, false, 1);
  f.Run(1 * kMs, false);
  f.Run(20 * kUs, false, true);  // BE work running when the LS arrives
  f.Run(300 * kUs, true, false, 1);
  f.Run(1 * kMs, false);
  ASSERT_EQ(f.periods.size(), 3u);
  EXPECT_FALSE(f.periods[0].alone);
  EXPECT_TRUE(f.periods[1].alone);
  EXPECT_FALSE(f.periods[2].alone);
}

TEST(BusyPeriodTracker, ALatePollOrWorkInFlightAtTheFirstLookDropsThePeriod) {
  Feed f;
  f.Run(500 * kUs, true, false, 1);  // in flight from the first poll: start unknown
  f.Run(1 * kMs, false);
  EXPECT_TRUE(f.periods.empty());
  f.Run(100 * kUs, true, false, 1);
  f.now += 5 * kMs;  // the poller slept through the period's middle
  f.Run(100 * kUs, true);
  f.Run(1 * kMs, false);
  EXPECT_TRUE(f.periods.empty());
  f.Run(100 * kUs, true, false, 1);
  f.Run(1 * kMs, false);
  EXPECT_EQ(f.periods.size(), 1u);
}

TEST(BusyPeriodTracker, ALatePollInsideAPeriodShorterThanTheIdleTimeKeepsIt) {
  Feed f;
  f.limits.max_gap_ns = 50 * kUs;
  f.Run(1 * kMs, false);
  f.Run(100 * kUs, true, false, 1);
  f.now += 150 * kUs;  // late, but too short to hide an idle time
  f.Run(100 * kUs, true);
  f.Run(1 * kMs, false);
  ASSERT_EQ(f.periods.size(), 1u);
  EXPECT_EQ(f.periods[0].ns, 370 * kUs);
  // Late where it ends: its end is not known.
  f.Run(100 * kUs, true, false, 1);
  f.now += 150 * kUs;
  f.Run(1 * kMs, false);
  EXPECT_EQ(f.periods.size(), 1u);
  EXPECT_EQ(f.tracker.dropped(), 1u);
}

// The first poll past the idle time after a period sees new work, and the poll before it came
// within the idle time: the new work may have come within the idle time too (a late poller),
// so the period may go on, and where it ends is not known. Reported, it would be a request cut
// short (a fresh-clone CI run on the test double learned 0.59 ms alone for a 2 ms request).
TEST(BusyPeriodTracker, NewWorkSeenOnlyByALatePollPastTheIdleTimeDropsThePeriod) {
  Feed f;
  f.Run(1 * kMs, false);
  f.Run(300 * kUs, true, false, 1);
  f.Run(40 * kUs, false);
  f.now += 250 * kUs;  // the poller is late, and the LS's next item came meanwhile
  f.Run(300 * kUs, true, false, 1);
  f.Run(1 * kMs, false);
  EXPECT_TRUE(f.periods.empty());
  EXPECT_EQ(f.tracker.dropped(), 2u);  // the second began at an unknown time too
  // The same late poll seeing nothing new: the period was over.
  f.Run(300 * kUs, true, false, 1);
  f.Run(40 * kUs, false);
  f.now += 250 * kUs;
  f.Run(20 * kUs, false);
  ASSERT_EQ(f.periods.size(), 1u);
  EXPECT_EQ(f.periods[0].ns, 320 * kUs);
}

TEST(BusyPeriodTracker, APeriodLongerThanTheBoundIsDropped) {
  Feed f;
  f.limits.max_period_ns = 2 * kMs;
  f.Run(1 * kMs, false);
  f.Run(3 * kMs, true, false, 1);  // a hung LS: in flight too long to be a request
  f.Run(1 * kMs, false);
  EXPECT_TRUE(f.periods.empty());
}

// A period's duration over what it is measured against, as missiled takes it.
std::optional<double> Stretch(const AloneDurations& alone, const BusyPeriod& p) {
  const std::optional<double> ns = alone.AloneNs(p);
  if (!ns) return std::nullopt;
  return static_cast<double>(p.ns) / *ns;
}

TEST(AloneDurations, StretchIsTheDurationOverTheLeastRecentAloneOnceKnown) {
  AloneDurations alone;
  BusyPeriod p{42, 10, 1500 * kUs, false};
  EXPECT_FALSE(Stretch(alone, p).has_value());
  alone.Learn({42, 10, 1000 * kUs, true});
  EXPECT_FALSE(Stretch(alone, p).has_value());  // one sample is not enough
  alone.Learn({42, 10, 1000 * kUs, true});
  ASSERT_TRUE(Stretch(alone, p).has_value());
  EXPECT_DOUBLE_EQ(*Stretch(alone, p), 1.5);
  EXPECT_DOUBLE_EQ(*alone.AloneNs(p), 1000.0 * kUs);  // what it was measured against
  // Work never seen alone: per item (here 100 us alone), 15 items in 3 ms is 2x.
  ASSERT_TRUE(Stretch(alone, {43, 15, 3000 * kUs, false}).has_value());
  EXPECT_DOUBLE_EQ(*Stretch(alone, {43, 15, 3000 * kUs, false}), 2.0);
  EXPECT_DOUBLE_EQ(*alone.AloneNs({43, 15, 3000 * kUs, false}), 1500.0 * kUs);
  EXPECT_FALSE(Stretch(alone, {43, 0, 3000 * kUs, false}).has_value());
  EXPECT_FALSE(alone.AloneNs({43, 0, 3000 * kUs, false}).has_value());
  // Work that repeats gets its own alone duration, not the per item guess.
  EXPECT_FALSE(alone.AloneNs({43, 15, 3000 * kUs, false}, 2, /*repeats=*/true).has_value());
  EXPECT_FALSE(alone.Knows({43, 15, 3000 * kUs, false}));
  EXPECT_TRUE(alone.Knows(p));
  EXPECT_DOUBLE_EQ(*alone.AloneNs(p, 2, /*repeats=*/true), 1000.0 * kUs);
  // The least of the last eight: slower alone periods (a measured period is never shorter than
  // its work) do not raise it, and once eight newer ones came, the old least is forgotten.
  alone.Learn({42, 10, 1600 * kUs, true});
  EXPECT_DOUBLE_EQ(*alone.AloneNs(p), 1000.0 * kUs);
  for (int i = 0; i < 5; ++i) alone.Learn({42, 10, 1200 * kUs, true});
  EXPECT_DOUBLE_EQ(*alone.AloneNs(p), 1000.0 * kUs);
  alone.Learn({42, 10, 1300 * kUs, true});  // the eighth after the first 1000
  EXPECT_DOUBLE_EQ(*alone.AloneNs(p), 1000.0 * kUs);
  alone.Learn({42, 10, 1400 * kUs, true});  // the ninth: both 1000 are gone
  EXPECT_DOUBLE_EQ(*alone.AloneNs(p), 1200.0 * kUs);
  EXPECT_DOUBLE_EQ(*Stretch(alone, p), 1.5e6 / 1.2e6);
  // Per item, a mean: plain over the first 8 (a slow first one does not stay), then the newest
  // weighs 1/8. The per item samples so far: 100, 100, 160, 120 x5, 130, 140 (us).
  const double mean8 = (100 + 100 + 160 + 5 * 120) / 8.0;
  const double per_item = (mean8 + (130 - mean8) / 8 + (140 - (mean8 + (130 - mean8) / 8)) / 8);
  EXPECT_NEAR(*alone.AloneNs({43, 15, 3000 * kUs, false}), 15 * per_item * kUs, 1.0);
}

TEST(AloneDurations, IsBoundedInSize) {
  AloneDurations alone(4);
  for (uint64_t s = 0; s < 10; ++s) alone.Learn({s, 1, kMs, true});
  EXPECT_LE(alone.size(), 4u);
}

// Feeds `n` decisions' worth of periods of stretch `s`.
void Feed8(BudgetController* c, double s, int decisions = 1) {
  for (int d = 0; d < decisions; ++d) {
    for (size_t i = 0; i < BudgetController::kDecisionEvery; ++i) c->Observe(s);
  }
}

TEST(BudgetController, ABudgetOfAHundredPercentGivesNoShare) {
  BudgetController c;
  EXPECT_EQ(c.status().state, BudgetState::kOff);
  Feed8(&c, 1.0, 5);
  EXPECT_EQ(c.status().share_ppm, 0u);
  EXPECT_EQ(c.status().state, BudgetState::kOff);
  EXPECT_EQ(c.status().periods, 40u);
}

TEST(BudgetController, TheShareGrowsWithinTheBudgetAndHalvesAboveIt) {
  BudgetController c;
  c.set_budget_pct(125);
  EXPECT_EQ(c.status().state, BudgetState::kLearning);
  Feed8(&c, 1.0);  // all the room: +10 points
  EXPECT_EQ(c.status().share_ppm, 100'000u);
  EXPECT_EQ(c.status().state, BudgetState::kSpending);
  Feed8(&c, 1.125);  // half the room: +5 points
  EXPECT_EQ(c.status().share_ppm, 150'000u);
  Feed8(&c, 1.3);  // over: halves
  EXPECT_EQ(c.status().share_ppm, 75'000u);
  EXPECT_DOUBLE_EQ(c.status().stretch, 1.3);
  // The slow periods stay in the window for three more decisions: the share holds, no more
  // halving for them.
  Feed8(&c, 1.0, 3);
  EXPECT_EQ(c.status().share_ppm, 75'000u);
  EXPECT_DOUBLE_EQ(c.status().stretch, 1.3);
  Feed8(&c, 1.0);  // out of the window: grows again
  EXPECT_EQ(c.status().share_ppm, 175'000u);
  // Past 40 %, by a quarter of itself; up to the bound, which passes the whole busy time (on
  // MPS the BE runs beside the LS).
  Feed8(&c, 1.0, 3);
  EXPECT_EQ(c.status().share_ppm, 475'000u);
  Feed8(&c, 1.0);
  EXPECT_EQ(c.status().share_ppm, 593'750u);
  int decisions = 0;
  while (c.status().share_ppm < kMaxSharePpm && decisions < 30) {
    Feed8(&c, 1.0);
    ++decisions;
  }
  EXPECT_EQ(c.status().share_ppm, kMaxSharePpm);
  EXPECT_EQ(c.status().window_scale, 1u);
}

TEST(BudgetController, PastTheLargestShareTheWindowWidensAndNarrowsFirst) {
  BudgetController c;
  c.set_budget_pct(200);
  Feed8(&c, 1.0, 60);  // the share reaches its bound, then the window doubles to its own,
  EXPECT_EQ(c.status().window_scale, kMaxWindowScale);
  EXPECT_EQ(c.status().share_ppm, kUnheldSharePpm);  // then the BE is not held at all
  // Over the budget: held again, at the largest share.
  Feed8(&c, 2.5);
  EXPECT_EQ(c.status().share_ppm, kMaxSharePpm);
  EXPECT_EQ(c.status().window_scale, kMaxWindowScale);
  // Over again: the window halves, the share holds.
  Feed8(&c, 1.0, 3);
  Feed8(&c, 2.5);
  EXPECT_EQ(c.status().window_scale, kMaxWindowScale / 2);
  EXPECT_EQ(c.status().share_ppm, kMaxSharePpm);
  Feed8(&c, 1.0, 3);  // the slow periods leave the 32: nothing decided on them again
  EXPECT_EQ(c.status().window_scale, kMaxWindowScale / 2);
  // Little room (under a fifth of the budget's): the window holds.
  Feed8(&c, 1.9, 4);
  EXPECT_EQ(c.status().window_scale, kMaxWindowScale / 2);
  // Over again, once per doubling left: the window is back to 1 before the share halves.
  for (uint32_t scale = kMaxWindowScale / 2; scale > 1; scale /= 2) {
    Feed8(&c, 1.0, 3);
    Feed8(&c, 2.5);
  }
  EXPECT_EQ(c.status().window_scale, 1u);
  EXPECT_EQ(c.status().share_ppm, kMaxSharePpm);
  Feed8(&c, 1.0, 3);
  Feed8(&c, 2.5);
  EXPECT_EQ(c.status().share_ppm, kMaxSharePpm / 2);
  EXPECT_EQ(c.status().window_scale, 1u);
  // A new budget starts again from nothing.
  c.set_budget_pct(150);
  EXPECT_EQ(c.status().window_scale, 1u);
  EXPECT_EQ(c.status().share_ppm, 0u);
}

TEST(BudgetController, DecidesOnTheSecondHighestOfTheLastThirtyTwo) {
  BudgetController c;
  c.set_budget_pct(125);
  Feed8(&c, 1.0, 4);
  const uint32_t share = c.status().share_ppm;
  // One period over the budget in 32 is let through (about the 97th percentile)...
  for (size_t i = 0; i < 7; ++i) c.Observe(1.0);
  c.Observe(1.4);
  EXPECT_GT(c.status().share_ppm, share);
  EXPECT_DOUBLE_EQ(c.status().stretch, 1.0);
  // ... a second one 16 periods later halves the share, although each batch of eight has one.
  Feed8(&c, 1.0);
  const uint32_t grown = c.status().share_ppm;
  for (size_t i = 0; i < 7; ++i) c.Observe(1.0);
  c.Observe(1.3);
  EXPECT_EQ(c.status().share_ppm, grown / 2);
  EXPECT_DOUBLE_EQ(c.status().stretch, 1.3);
}

TEST(BudgetController, OneSlowPeriodInEightDoesNotDecideButTwoDo) {
  BudgetController c;
  c.set_budget_pct(150);
  Feed8(&c, 1.0, 3);
  const uint32_t share = c.status().share_ppm;
  for (size_t i = 0; i < 7; ++i) c.Observe(1.1);
  c.Observe(3.0);  // one outlier: the decision reads the second highest
  EXPECT_GT(c.status().share_ppm, share);
  for (size_t i = 0; i < 6; ++i) c.Observe(1.1);
  c.Observe(3.0);
  c.Observe(2.0);
  EXPECT_LT(c.status().share_ppm, share);
}

TEST(BudgetController, ABudgetThatCannotBeMetFallsBackToNoShareAndSaysSo) {
  BudgetController c;
  c.set_budget_pct(110);
  Feed8(&c, 1.0);
  EXPECT_GT(c.status().share_ppm, 0u);
  Feed8(&c, 1.3, 4);  // halves to nothing
  EXPECT_EQ(c.status().share_ppm, 0u);
  EXPECT_EQ(c.status().state, BudgetState::kSpending);
  Feed8(&c, 1.3, 3);  // and still over, 3 times
  EXPECT_EQ(c.status().share_ppm, 0u);
  EXPECT_EQ(c.status().state, BudgetState::kUnmet);
  Feed8(&c, 1.05, 3);  // the slow periods still in the window: still unmet, no share
  EXPECT_EQ(c.status().state, BudgetState::kUnmet);
  EXPECT_EQ(c.status().share_ppm, 0u);
  Feed8(&c, 1.05);  // met again
  EXPECT_EQ(c.status().state, BudgetState::kSpending);
  EXPECT_GT(c.status().share_ppm, 0u);
}

TEST(BudgetController, ANewBudgetStartsOver) {
  BudgetController c;
  c.set_budget_pct(200);
  Feed8(&c, 1.0, 3);
  EXPECT_GT(c.status().share_ppm, 0u);
  c.set_budget_pct(100);
  EXPECT_EQ(c.status().share_ppm, 0u);
  EXPECT_EQ(c.status().state, BudgetState::kOff);
  Feed8(&c, 1.0, 3);
  EXPECT_EQ(c.status().share_ppm, 0u);
}

TEST(BusyCredit, AccruesTheShareOfTheBusyTimeAndStartsAtZeroEachPeriod) {
  BusyCredit c;
  EXPECT_TRUE(c.Take(0, false, 250'000, 50 * kUs, 100 * kUs));  // LS idle: always
  EXPECT_FALSE(c.Take(1 * kMs, true, 250'000, 50 * kUs, 100 * kUs));  // a period starts
  // 25 us earned: positive, so a 50 us item goes (the debt is paid back before the next).
  EXPECT_TRUE(c.Take(1 * kMs + 100 * kUs, true, 250'000, 50 * kUs, 100 * kUs));
  EXPECT_FALSE(c.Take(1 * kMs + 200 * kUs, true, 250'000, 50 * kUs, 100 * kUs));  // at 0
  // An item the window holds anyway takes none of the credit.
  c.Advance(1 * kMs + 300 * kUs, true, 250'000, 100 * kUs);
  const int64_t credit = c.credit_ns();
  EXPECT_GT(credit, 0);
  EXPECT_FALSE(c.Lets(250'000, 50 * kUs, /*window_admits=*/false));
  EXPECT_EQ(c.credit_ns(), credit);
  EXPECT_TRUE(c.Take(1 * kMs + 300 * kUs, true, 250'000, 50 * kUs, 100 * kUs));
  // Over 1 ms of busy time, 250 us of items went: a quarter.
  uint64_t took = 0;
  for (uint64_t t = 1300; t < 2300; t += 10) {
    if (c.Take(1 * kMs + t * kUs, true, 250'000, 50 * kUs, 100 * kUs)) took += 50;
  }
  EXPECT_NEAR(static_cast<double>(took), 300, 50);
  // The credit is capped: a long busy period does not save up a burst.
  c.Take(10 * kMs, true, 250'000, 0, 100 * kUs);
  EXPECT_LE(c.credit_ns(), static_cast<int64_t>(100 * kUs));
  // Idle, then busy again: from zero.
  c.Take(11 * kMs, false, 250'000, 50 * kUs, 100 * kUs);
  EXPECT_FALSE(c.Take(12 * kMs, true, 250'000, 50 * kUs, 100 * kUs));
  // No share, no BE work while busy.
  for (uint64_t t = 0; t < 100; ++t) EXPECT_FALSE(c.Take(13 * kMs + t * kMs, true, 0, 1, kMs));
}

TEST(BusyCredit, AShareAboveTheBusyTimeLetsMoreBeWorkGoThanTheLsIsBusy) {
  // Microseconds of 50 us items that go over 1 ms of LS busy time at `share_ppm`, taking all
  // the credit has at each 10 us step.
  auto taken_in_1ms = [](uint32_t share_ppm) {
    BusyCredit c;
    EXPECT_FALSE(c.Take(0, true, share_ppm, 50 * kUs, 200 * kUs));  // a period starts
    uint64_t took = 0;
    for (uint64_t t = 10; t <= 1000; t += 10) {
      while (c.Take(t * kUs, true, share_ppm, 50 * kUs, 200 * kUs)) took += 50;
    }
    return static_cast<double>(took);
  };
  // On MPS: four times the busy time.
  EXPECT_NEAR(taken_in_1ms(4 * kFullSharePpm), 4000, 100);
  // Bounded at kMaxSharePpm: a larger share gives no more...
  EXPECT_NEAR(taken_in_1ms(kUnheldSharePpm - 1), 1000.0 * kMaxSharePpm / kFullSharePpm, 100);
  // ... but the last step's holds nothing, from the start of a period on.
  BusyCredit c;
  for (uint64_t t = 0; t < 100; ++t) EXPECT_TRUE(c.Take(t * kUs, true, kUnheldSharePpm, kMs, kUs));
}

// A quiet time comes every 10 s while the controller trades near the budget, once a minute
// once it released the BE with the stretch at most 90 % of the budget.
TEST(RelearnTest, ReleasedWithRoomRelearnsLessOften) {
  BudgetStatus st;
  st.state = BudgetState::kSpending;
  st.share_ppm = kUnheldSharePpm;
  st.stretch = 1.7;
  EXPECT_EQ(RelearnEveryNs(st, 200), kRelearnReleasedNs);
  EXPECT_TRUE(ReleasedWithRoom(st, 200));
  EXPECT_EQ(RelearnEveryNs(st, 185), kRelearnNs);  // 1.7 > 0.9 * 1.85
  EXPECT_FALSE(ReleasedWithRoom(st, 185));
  st.share_ppm = kMaxSharePpm;
  EXPECT_EQ(RelearnEveryNs(st, 200), kRelearnNs);  // a share: near the budget's trade
  st.share_ppm = kUnheldSharePpm;
  st.stretch = 0;
  EXPECT_EQ(RelearnEveryNs(st, 200), kRelearnNs);  // no stretch measured yet
  st.stretch = 1.1;
  st.state = BudgetState::kUnmet;
  EXPECT_EQ(RelearnEveryNs(st, 200), kRelearnNs);
}

}  // namespace
}  // namespace missile::pacing

#include "missile/pacing/graph_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace missile::pacing {
namespace {

using ::testing::ElementsAre;

TEST(TopologicalOrder, KeepsAnOrderedGraphsOrderAndPutsEveryEdgeForward) {
  // 0 -> 2, 1 -> 2, 2 -> 3, 4 alone: already in order.
  auto order = TopologicalOrder(5, {{0, 2}, {1, 2}, {2, 3}});
  ASSERT_TRUE(order.has_value());
  EXPECT_THAT(*order, ElementsAre(0, 1, 2, 3, 4));

  // Reversed numbering: 3 -> 2 -> 1 -> 0.
  order = TopologicalOrder(4, {{3, 2}, {2, 1}, {1, 0}});
  ASSERT_TRUE(order.has_value());
  EXPECT_THAT(*order, ElementsAre(3, 2, 1, 0));

  // A diamond with a side branch: every edge goes forward in the order.
  const std::vector<std::pair<size_t, size_t>> edges{{5, 1}, {5, 2}, {1, 0}, {2, 0}, {3, 4}, {0, 4}};
  order = TopologicalOrder(6, edges);
  ASSERT_TRUE(order.has_value());
  std::vector<size_t> position(6);
  for (size_t i = 0; i < order->size(); ++i) position[(*order)[i]] = i;
  for (const auto& [from, to] : edges) EXPECT_LT(position[from], position[to]);
}

TEST(TopologicalOrder, RefusesCyclesAndUnknownNodes) {
  EXPECT_FALSE(TopologicalOrder(3, {{0, 1}, {1, 2}, {2, 0}}).has_value());
  EXPECT_FALSE(TopologicalOrder(2, {{0, 2}}).has_value());
  auto empty = TopologicalOrder(0, {});
  ASSERT_TRUE(empty.has_value());
  EXPECT_TRUE(empty->empty());
}

TEST(PiecePlanner, CutsByThePriorUntilMeasured) {
  // Six kernels at a 50 us prior, bound 100 us: pieces of two.
  PiecePlanner p(std::vector<bool>(6, true), 50'000);
  EXPECT_THAT(p.Plan(100'000, 64), ElementsAre(0, 2, 4, 6));
  // Bounded by the piece count: at most two pieces, so the bound widens.
  EXPECT_THAT(p.Plan(100'000, 2), ElementsAre(0, 4, 6));
  EXPECT_THAT(p.Plan(100'000, 1), ElementsAre(0, 6));
}

TEST(PiecePlanner, CutsOnlyInFrontOfWorkAndKeepsNonWorkNodesWithTheirPiece) {
  // event, kernel, kernel, host, kernel, event-wait, kernel
  PiecePlanner p({false, true, true, false, true, false, true}, 60'000);
  // 60 us per kernel, bound 100 us: each kernel is its own piece; the host node after kernel 2
  // and the wait after kernel 4 stay with the piece before them.
  EXPECT_THAT(p.Plan(100'000, 64), ElementsAre(0, 2, 4, 6, 7));
  EXPECT_EQ(p.work_nodes(), 4u);
}

TEST(PiecePlanner, LearnsFromMeasuredPiecesAndSplitsTheLongOnes) {
  PiecePlanner p(std::vector<bool>(8, true), 10'000);
  std::vector<size_t> bounds = p.Plan(100'000, 64);
  EXPECT_THAT(bounds, ElementsAre(0, 8));  // 80 us predicted: one piece
  // It took 800 us: every node is about 100 us, so each becomes its own piece.
  p.Observe(0, 8, 800'000);
  EXPECT_EQ(p.Estimate(0, 8), 800'000u);
  EXPECT_TRUE(p.WorthReplanning(bounds, 100'000, 64));
  bounds = p.Plan(100'000, 64);
  EXPECT_THAT(bounds, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8));
  // Measured one by one: the first four take 10 us, the last four 190 us.
  for (size_t i = 0; i < 8; ++i) p.Observe(i, i + 1, i < 4 ? 10'000 : 190'000);
  EXPECT_TRUE(p.WorthReplanning(bounds, 100'000, 64));  // five pieces instead of eight
  bounds = p.Plan(100'000, 64);
  EXPECT_THAT(bounds, ElementsAre(0, 4, 5, 6, 7, 8));
  // Settled: the same measurements again change nothing.
  p.Observe(0, 4, 40'000);
  EXPECT_FALSE(p.WorthReplanning(bounds, 100'000, 64));
}

TEST(PiecePlanner, ASingleLongNodeIsNotReplannedForEver) {
  PiecePlanner p({true, true}, 50'000);
  std::vector<size_t> bounds = p.Plan(100'000, 64);
  EXPECT_THAT(bounds, ElementsAre(0, 2));
  p.Observe(0, 2, 1'000'000);
  EXPECT_TRUE(p.WorthReplanning(bounds, 100'000, 64));
  bounds = p.Plan(100'000, 64);
  EXPECT_THAT(bounds, ElementsAre(0, 1, 2));
  // Each kernel alone is over the bound: nothing more to cut.
  p.Observe(0, 1, 500'000);
  p.Observe(1, 2, 500'000);
  EXPECT_FALSE(p.WorthReplanning(bounds, 100'000, 64));
}

TEST(PiecePlanner, PiecesWithNothingToScaleSpreadTheirTime) {
  PiecePlanner p({false, false, true}, 0);
  p.Observe(0, 2, 30'000);  // no work nodes: over every node
  EXPECT_EQ(p.Estimate(0, 1), 15'000u);
  p.Observe(2, 3, 70'000);  // a zero prior: over the work node
  EXPECT_EQ(p.Estimate(0, 3), 100'000u);
  // Out-of-range and empty observations change nothing.
  p.Observe(2, 2, 5);
  p.Observe(7, 9, 5);
  EXPECT_EQ(p.Estimate(0, 3), 100'000u);
}

TEST(PiecePlanner, EmptyGraphHasNoPieces) {
  PiecePlanner p({}, 50'000);
  EXPECT_THAT(p.Plan(100'000, 64), ElementsAre(0));
  EXPECT_FALSE(p.WorthReplanning({0}, 100'000, 64));
}

}  // namespace
}  // namespace missile::pacing

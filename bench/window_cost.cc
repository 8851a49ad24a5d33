// window_cost: what the BE's in-flight window (pacing/pacing.h, InflightWindow) costs the CPU at
// each paced launch, by how many items are in flight. An LS latency budget widens the window up
// to InflightWindow::kMaxItems (budget.h, kMaxWindowScale), and every BE launch goes through it
// on the program's own thread (libintercept/pacer.cc: Admit retires what completed, asks the
// window, reads the oldest item; Begin adds the item and counts down what is left to run).
//
// No GPU: the window is pure logic, fed by a simulated GPU that completes the oldest item in
// flight at each launch, so the window stays at N items. The items go round-robin over L lanes
// (streams). Two limits: "fits", where the window has room for all the predicted work in flight
// (the short path), and "full", where it does not and the window counts down what is left to
// run on every lane (the path of a widened window that is nearly full).
//
// Prints, per case, the median and range of the nanoseconds per launch over 5 rounds.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "missile/pacing/pacing.h"

namespace {

using missile::pacing::DurationSample;
using missile::pacing::InflightWindow;

constexpr uint64_t kItemNs = 20'000;  // each item's predicted (and simulated) duration

struct Case {
  uint32_t items;
  uint32_t lanes;
  bool full;
};

// One round: `iterations` launches at N items in flight; returns nanoseconds per launch.
double Round(const Case& c, uint32_t iterations, uint64_t* sink) {
  InflightWindow w;
  std::vector<uint64_t> submitted(c.lanes, 0), completed(c.lanes, 0);
  uint64_t now = 1'000'000'000;
  uint64_t next = 0;  // launches so far: item i goes on lane i % L
  auto launch = [&](uint64_t t) {
    const uint32_t lane = static_cast<uint32_t>(next % c.lanes);
    w.Add(lane, ++submitted[lane], next % 64, kItemNs, t);
    ++next;
  };
  for (uint32_t i = 0; i < c.items; ++i) launch(now);
  // "fits": room for twice the work in flight; "full": room for half of it, and no refill
  // threshold, so every check counts down every lane.
  const InflightWindow::Limits limits{
      .items = c.items + 1,
      .predicted_ns = c.full ? uint64_t{c.items} * kItemNs / 2 : uint64_t{c.items} * kItemNs * 2,
      .refill_ns = c.full ? UINT64_MAX : 0};
  std::vector<DurationSample> samples;
  uint64_t done = 0;  // items completed: the oldest is item `done`, on lane done % L
  const auto start = std::chrono::steady_clock::now();
  for (uint32_t i = 0; i < iterations; ++i) {
    now += 1'000;
    ++completed[done % c.lanes];
    ++done;
    // What Pacer::Admit and Pacer::Begin do with the window at one launch.
    samples.clear();
    w.Retire([&](uint32_t lane) { return completed[lane]; }, now, 1'000, &samples);
    *sink += w.RemainingNs(now);
    *sink += w.Admits(kItemNs, limits, now) ? 1 : 0;
    *sink += w.oldest_issued_ns();
    launch(now);
    *sink += w.RemainingNs(now) + samples.size();
  }
  const auto end = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(end - start).count() / iterations;
}

}  // namespace

int main() {
  const Case cases[] = {{8, 1, false},    {8, 1, true},     {128, 1, false},  {128, 1, true},
                        {1024, 1, false}, {1024, 1, true},  {128, 4, true},   {1024, 4, true},
                        {1024, 32, true}, {1024, 64, true}};
  uint64_t sink = 0;
  std::printf("%-6s %-5s %-4s  %s\n", "items", "lanes", "path", "ns per launch: median (min-max) of 5");
  for (const Case& c : cases) {
    const uint32_t iterations = c.items >= 1024 ? 20'000 : 200'000;
    Round(c, iterations / 10, &sink);  // warm-up
    std::vector<double> ns;
    for (int r = 0; r < 5; ++r) ns.push_back(Round(c, iterations, &sink));
    std::sort(ns.begin(), ns.end());
    std::printf("%-6u %-5u %-4s  %.0f (%.0f-%.0f)\n", c.items, c.lanes, c.full ? "full" : "fits",
                ns[2], ns[0], ns[4]);
  }
  std::fprintf(stderr, "(checksum %llu)\n", static_cast<unsigned long long>(sink));
  return 0;
}

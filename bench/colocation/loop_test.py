#!/usr/bin/env python3
"""ls_service.py's load loops on a fake service (no GPU, no torch): a closed loop serves more
requests when they are faster; at a fixed rate (--period-ms, open_loop with a constant gap)
every mode serves the same requests, a request due while the one before still runs counts its
wait, and one never served by the end of the overrun is counted as dropped."""
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ls_service  # noqa: E402


class Served:
    """A request takes the next of `durations` seconds (the last one repeats)."""

    def __init__(self, *durations):
        self.durations = list(durations)
        self.count = 0

    def request(self):
        d = self.durations[min(self.count, len(self.durations) - 1)]
        self.count += 1
        ls_service.sleep_until(time.perf_counter() + d)


class LoopTest(unittest.TestCase):
    def test_a_closed_loop_serves_more_requests_when_they_are_faster(self):
        slow = ls_service.closed_loop(Served(0.020), 0.4, 0.005)
        fast = ls_service.closed_loop(Served(0.010), 0.4, 0.005)
        self.assertGreater(len(fast), len(slow) * 1.3)

    def test_at_a_fixed_rate_fast_and_slow_requests_are_as_many(self):
        slow, due, dropped = ls_service.open_loop(Served(0.020), 0.5, lambda: 0.024, 0.5)
        fast, _, _ = ls_service.open_loop(Served(0.010), 0.5, lambda: 0.024, 0.5)
        # Due at 24, 48, ... 480 ms: 20, all served, whatever their latency.
        self.assertEqual((due, dropped), (20, 0))
        self.assertEqual((len(slow), len(fast)), (20, 20))
        self.assertLess(sorted(fast)[len(fast) // 2], 15.0)

    def test_a_request_due_during_a_late_one_counts_its_wait(self):
        # The first, due at 25 ms, takes 60 ms: the second, due at 50 ms, starts at 85 ms and
        # ends at 90 ms, so 40 ms after it was due.
        lat, _, _ = ls_service.open_loop(Served(0.060, 0.005), 0.3, lambda: 0.025, 0.3)
        self.assertGreater(lat[0], 59.0)
        self.assertGreater(lat[1], 38.0)
        self.assertLess(lat[1], 80.0)
        # It catches up: once the backlog is served, requests take their own 5 ms again.
        self.assertLess(lat[-1], 25.0)

    def test_requests_not_served_by_the_end_of_the_overrun_are_dropped(self):
        # 50 ms each against an 11 ms period: 9 due in 0.1 s, about 4 served by 0.2 s.
        lat, due, dropped = ls_service.open_loop(Served(0.050), 0.1, lambda: 0.011, 0.1)
        self.assertEqual(due, 9)
        self.assertEqual(dropped, due - len(lat))
        self.assertTrue(1 <= len(lat) <= 5, len(lat))

    def test_starts_are_recorded_for_every_request_served(self):
        starts = []
        lat, _, _ = ls_service.open_loop(Served(0.002), 0.1, lambda: 0.010, 0.1, starts)
        self.assertEqual(len(starts), len(lat))
        self.assertEqual(starts, sorted(starts))

    def test_period_out_of_range_is_refused(self):
        with self.assertRaises(SystemExit):
            ls_service.parse_args(["--mode", "x", "--scenarios", "decode-graph", "--period-ms", "0.5"])
        a = ls_service.parse_args(["--mode", "x", "--scenarios", "decode-graph", "--period-ms", "52"])
        self.assertEqual(a.period_ms, 52.0)


if __name__ == "__main__":
    unittest.main()

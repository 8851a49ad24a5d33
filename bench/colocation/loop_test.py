#!/usr/bin/env python3
"""ls_service.py's load loops on a fake service (no GPU, no torch): a closed loop serves more
requests when they are faster; at a fixed rate (--period-ms) every mode serves the same
requests, and a request due while the one before still runs counts its wait."""
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
        slow = ls_service.closed_loop(Served(0.020), 0.5, 0.005, period_s=0.025)
        fast = ls_service.closed_loop(Served(0.010), 0.5, 0.005, period_s=0.025)
        # 20 due in 0.5 s; a stalled host may cut the last one or two off either.
        self.assertTrue(17 <= len(slow) <= 20 and 17 <= len(fast) <= 20, (len(slow), len(fast)))
        self.assertLessEqual(abs(len(slow) - len(fast)), 2)
        self.assertLess(sorted(fast)[len(fast) // 2], 15.0)

    def test_a_request_due_during_a_late_one_counts_its_wait(self):
        # The first takes 60 ms against a 25 ms period: the second, due at 25 ms, starts at
        # 60 ms and ends at 65 ms, so 40 ms after it was due.
        lat = ls_service.closed_loop(Served(0.060, 0.005), 0.3, 0.0, period_s=0.025)
        self.assertGreater(lat[0], 59.0)
        self.assertGreater(lat[1], 38.0)
        self.assertLess(lat[1], 80.0)
        # It catches up: once the backlog is served, requests take their own 5 ms again.
        self.assertLess(lat[-1], 25.0)

    def test_period_out_of_range_is_refused(self):
        with self.assertRaises(SystemExit):
            ls_service.parse_args(["--mode", "x", "--scenarios", "decode-graph", "--period-ms", "0.5"])
        a = ls_service.parse_args(["--mode", "x", "--scenarios", "decode-graph", "--period-ms", "52"])
        self.assertEqual(a.period_ms, 52.0)


if __name__ == "__main__":
    unittest.main()

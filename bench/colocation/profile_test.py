#!/usr/bin/env python3
"""be_job.py's timeline summary and bench/colocation/profile_diff.py on synthetic traces."""
import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import be_job  # noqa: E402  (imports torch only when run)
import profile_diff  # noqa: E402


def kernel(name, ts, dur, cat="kernel"):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur}


class TimelineSummaryTest(unittest.TestCase):
    def test_busy_is_the_union_and_idle_the_rest_of_the_span(self):
        events = [
            {"ph": "X", "cat": "cpu_op", "name": "aten::conv", "ts": 0, "dur": 500},  # not GPU
            kernel("copy", 100, 50, cat="gpu_memcpy"),
            kernel("conv", 150, 100),
            kernel("relu", 200, 100),   # overlaps conv: busy 150-300
            kernel("conv", 400, 100),   # 100 us idle before it
        ]
        summary, by_name = be_job.timeline_summary(events)
        self.assertEqual(summary["events"], 4)
        self.assertEqual(summary["span_us"], 400.0)
        self.assertEqual(summary["busy_us"], 300.0)
        self.assertEqual(summary["idle_us"], 100.0)
        self.assertEqual(summary["kernel_us"], 300.0)
        self.assertEqual(summary["copy_us"], 50.0)
        self.assertEqual(by_name["conv"], {"count": 2, "us": 200.0})
        self.assertNotIn("aten::conv", by_name)

    def test_no_gpu_events_give_no_summary(self):
        summary, by_name = be_job.timeline_summary([{"ph": "X", "cat": "cpu_op", "name": "x",
                                                     "ts": 0, "dur": 1}])
        self.assertIsNone(summary)
        self.assertEqual(by_name, {})


class ProfileDiffTest(unittest.TestCase):
    def write(self, events, iters):
        summary, by_name = be_job.timeline_summary(events)
        summary["iters"] = iters
        fd, path = tempfile.mkstemp(suffix=".json")
        with os.fdopen(fd, "w") as fh:
            json.dump({"summary": summary, "by_name": by_name}, fh)
        self.addCleanup(os.remove, path)
        return path

    def test_changes_are_per_iteration_largest_first(self):
        # Base: 2 iterations of conv 1 ms + relu 0.2 ms. Other: 1 iteration, conv 1.5 ms,
        # relu 0.2 ms, and 0.3 ms idle.
        base = self.write([kernel("conv", 0, 1000), kernel("relu", 1000, 200),
                           kernel("conv", 1200, 1000), kernel("relu", 2200, 200)], 2)
        other = self.write([kernel("conv", 0, 1500), kernel("relu", 1800, 200)], 1)
        rows = profile_diff.changes(profile_diff.load(base), profile_diff.load(other), 5)
        self.assertEqual(rows[0][0], "conv")
        self.assertAlmostEqual(rows[0][1], 1.0)
        self.assertAlmostEqual(rows[0][2], 1.5)
        self.assertAlmostEqual(rows[0][3], 0.5)
        self.assertAlmostEqual(rows[1][3], 0.0)
        pi = profile_diff.per_iteration(profile_diff.load(other))
        self.assertAlmostEqual(pi["idle_us"], 0.3)
        out = io.StringIO()
        with redirect_stdout(out):
            self.assertEqual(profile_diff.main([base, other, "--top", "2"]), 0)
        self.assertIn("conv", out.getvalue())
        self.assertIn("+0.30", out.getvalue())  # idle per iteration went up 0.3 ms


class BeJobArgsTest(unittest.TestCase):
    def test_profile_arguments_are_checked(self):
        self.assertEqual(be_job.parse_args(["--mode", "m", "--profile-at", "26"]).profile_at, 26.0)
        with redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
            be_job.parse_args(["--mode", "m", "--profile-at", "-1"])
        with redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
            be_job.parse_args(["--mode", "m", "--profile-iters", "0"])


if __name__ == "__main__":
    unittest.main()

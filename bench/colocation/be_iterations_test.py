#!/usr/bin/env python3
"""bench/colocation/be_iterations.py on synthetic per-iteration files."""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import be_iterations  # noqa: E402


class BeIterationsTest(unittest.TestCase):
    def write(self, lines):
        fd, path = tempfile.mkstemp(suffix=".txt")
        with os.fdopen(fd, "w") as fh:
            fh.write("".join(lines))
        self.addCleanup(os.remove, path)
        return path

    def test_slices_take_medians_of_iteration_copy_and_issue_times(self):
        # 0-4 s: 50 ms iterations issued at their end (held); from 4 s: 40 ms issued at 10 ms.
        lines = []
        for i in range(80):
            t = 1000.0 + i * 0.05
            lines.append(f"{t + 0.05:.6f} 128 {t:.6f} {t + 0.009:.6f} {t + 0.0499:.6f}\n")
        for i in range(100):
            t = 1004.0 + i * 0.04
            lines.append(f"{t + 0.04:.6f} 128 {t:.6f} {t + 0.0003:.6f} {t + 0.01:.6f}\n")
        rows = be_iterations.read(self.write(lines))
        s = be_iterations.slices(rows, 4.0)
        self.assertEqual(len(s), 2)
        self.assertAlmostEqual(s[0][2], 50.0, places=3)
        self.assertAlmostEqual(s[0][3], 9.0, places=3)
        self.assertAlmostEqual(s[0][4], 49.9, places=3)
        self.assertAlmostEqual(s[1][2], 40.0, places=3)
        self.assertAlmostEqual(s[1][4], 10.0, places=3)
        n, median, mean, gpu, copy = be_iterations.summary(rows, 4.0)
        self.assertEqual(n, 100)
        self.assertAlmostEqual(median, 40.0, places=3)
        self.assertAlmostEqual(mean, 40.0, places=3)
        self.assertIsNone(gpu)
        self.assertIsNone(copy)
        self.assertIsNone(s[1][5])

    def test_gpu_columns_give_the_copy_and_forward_medians(self):
        # 45 ms iterations whose forward pass took 30 ms on the GPU, then 33 ms (slowed there).
        lines = []
        for i in range(100):
            t = 2000.0 + i * 0.045
            fwd = 30.0 if i < 50 else 33.0
            lines.append(f"{t + 0.045:.6f} 128 {t:.6f} {t + 0.0004:.6f} {t + 0.02:.6f} 10.500 {fwd:.3f}\n")
        rows = be_iterations.read(self.write(lines))
        s = be_iterations.slices(rows, 2.25)
        self.assertAlmostEqual(s[0][5], 10.5, places=3)
        self.assertAlmostEqual(s[0][6], 30.0, places=3)
        self.assertAlmostEqual(s[1][6], 33.0, places=3)
        self.assertAlmostEqual(be_iterations.summary(rows, 2.25)[3], 33.0, places=3)
        self.assertAlmostEqual(be_iterations.summary(rows, 2.25)[4], 10.5, places=3)

    def test_old_files_without_host_times_give_iterations_only(self):
        rows = be_iterations.read(self.write(["1.05 128 1.0\n", "# note\n", "1.10 128 1.05\n"]))
        s = be_iterations.slices(rows, 4.0)
        self.assertEqual(len(s), 1)
        self.assertEqual(s[0][1], 2)
        self.assertIsNone(s[0][3])
        self.assertIsNone(be_iterations.summary(rows, 10.0))


if __name__ == "__main__":
    unittest.main()

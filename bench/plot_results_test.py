#!/usr/bin/env python3
"""Tests of bench/plot_results.py: run on the recorded results into a temporary directory, the
three charts exist and are real PNG images of a useful size; a missing run is an error that
writes nothing; the summary.md tables are read as report.py writes them."""
import os
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "plot_results.py")
sys.path.insert(0, HERE)
import plot_results  # noqa: E402

CHARTS = ("colocation_modes.png", "colocation_settings.png", "pcie_small_copy.png")


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


class PlotResultsTest(unittest.TestCase):
    def run_script(self, *args):
        return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                              timeout=300)

    def test_writes_every_chart_from_the_recorded_runs(self):
        with tempfile.TemporaryDirectory() as out:
            r = self.run_script("--out", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            for name in CHARTS:
                path = os.path.join(out, name)
                self.assertTrue(os.path.isfile(path), name)
                self.assertGreater(os.path.getsize(path), 10_000, name)  # not an empty canvas
                size = png_size(path)
                self.assertIsNotNone(size, f"{name} is not a PNG")
                self.assertGreaterEqual(size[0], 600, name)
                self.assertGreaterEqual(size[1], 400, name)
            self.assertEqual(r.stdout.count(out), len(CHARTS))

    def test_missing_run_is_an_error_and_writes_nothing(self):
        with tempfile.TemporaryDirectory() as out:
            r = self.run_script("--out", out, "--run", "no-such-run")
            self.assertEqual(r.returncode, 1)
            self.assertIn("no-such-run/summary.md: no such file", r.stderr)
            self.assertEqual(os.listdir(out), [])

    def test_reads_summary_tables(self):
        text = ("# title\n\n## BE alone\n\n| mode | BE img/s |\n|:--|--:|\n| alone | 3 |\n\n"
                "## (a) resnet50-graph: ResNet-50, graph\n\ntarget: ...\n\n"
                "| mode | p99 x alone | BE % solo |\n|:--|--:|--:|\n"
                "| alone | 1.00 | - |\n| missile | 1.13 | 72.6 |\n")
        with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as f:
            f.write(text)
        try:
            pairs = plot_results.parse_summary(f.name)
        finally:
            os.unlink(f.name)
        self.assertEqual(list(pairs), ["a"])
        self.assertEqual(pairs["a"]["scenario"], "resnet50-graph")
        self.assertEqual([r["mode"] for r in pairs["a"]["rows"]], ["alone", "missile"])
        self.assertEqual(pairs["a"]["rows"][1]["BE % solo"], "72.6")
        self.assertIsNone(plot_results.number("-"))


if __name__ == "__main__":
    unittest.main()

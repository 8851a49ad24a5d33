#!/usr/bin/env python3
"""Unit tests for bench/colocation/report.py on synthetic data (no torch, no GPU).
usage: python3 bench/colocation/report_test.py"""
import contextlib
import io
import json
import math
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402


class PercentileTest(unittest.TestCase):
    def test_empty_is_nan(self):
        self.assertTrue(math.isnan(report.percentile([], 50)))

    def test_single(self):
        self.assertEqual(report.percentile([4.0], 99), 4.0)

    def test_linear_interpolation_like_numpy(self):
        xs = list(range(1, 101))  # 1..100, unsorted order must not matter
        xs.reverse()
        self.assertAlmostEqual(report.percentile(xs, 50), 50.5)
        self.assertAlmostEqual(report.percentile(xs, 99), 99.01)
        self.assertAlmostEqual(report.percentile(xs, 0), 1)
        self.assertAlmostEqual(report.percentile(xs, 100), 100)
        self.assertAlmostEqual(report.percentile([1, 2, 3, 4], 25), 1.75)

    def test_summarize(self):
        s = report.summarize([1.0, 2.0, 3.0, 10.0])
        self.assertEqual(s["n"], 4)
        self.assertAlmostEqual(s["mean_ms"], 4.0)
        self.assertAlmostEqual(s["p50_ms"], 2.5)
        self.assertEqual(s["max_ms"], 10.0)
        self.assertTrue(s["p999_ms"] <= 10.0 and s["p999_ms"] > s["p99_ms"] - 1e-9)


class WindowThroughputTest(unittest.TestCase):
    def test_end_only_counts_iterations_ending_inside(self):
        iters = [(None, 0.5, 100), (None, 1.5, 100), (None, 2.5, 100), (None, 3.5, 100)]
        self.assertAlmostEqual(report.window_throughput(iters, 1.0, 3.0), 100.0)  # 200 in 2 s

    def test_overlap_prorates_boundary_iterations(self):
        # iterations of 1 s each, 128 images, back to back from t=0
        iters = [(float(i), float(i + 1), 128) for i in range(10)]
        self.assertAlmostEqual(report.window_throughput(iters, 2.5, 6.5), 128.0)
        self.assertAlmostEqual(report.window_throughput(iters, 0.0, 10.0), 128.0)
        # window past the job's end: the job contributed nothing there
        self.assertAlmostEqual(report.window_throughput(iters, 9.0, 11.0), 64.0)

    def test_empty_window(self):
        self.assertTrue(math.isnan(report.window_throughput([(0.0, 1.0, 1)], 2.0, 2.0)))


class ParseTest(unittest.TestCase):
    def test_lines(self):
        rec = report.Records()
        rec.add_line('RESULT {"mode": "none", "scenario": "resnet50-graph", "p99_ms": 2.0}\n')
        rec.add_line('[ls] RESULT {"mode": "none", "scenario": "resnet50-graph", "p99_ms": 3.0}\n')
        rec.add_line('BE {"mode": "alone", "name": "be", "img_per_s": 1000.0}\n')
        rec.add_line("SKIP swin_t capture failed\n")
        rec.add_line("SKIP swin_t capture failed\n")
        rec.add_line("RESULTS are in\n")
        rec.add_line('RESULT {broken json\n')
        self.assertEqual(rec.results[("none", "resnet50-graph")]["p99_ms"], 3.0)  # last wins
        self.assertEqual(rec.be[("alone", "be")]["img_per_s"], 1000.0)
        self.assertEqual(rec.skips, ["swin_t capture failed"])

    def test_mode_order(self):
        self.assertEqual(report.order_modes(["missile", "zz-extra", "alone", "none", "mps"]),
                         ["alone", "none", "mps", "missile", "zz-extra"])
        self.assertEqual(report.order_modes(["d-missile", "missile", "d-none", "none"]),
                         ["none", "missile", "d-none", "d-missile"])

    def test_raw_file_name(self):
        self.assertEqual(report.raw_file_name("none", "sweep:resnet50"), "none__sweep_resnet50.txt")
        self.assertEqual(report.be_raw_file_name("d-missile", "be1"), "d-missile__be-be1.txt")
        self.assertEqual(report.be_raw_file_name("none", "be", "main"), "none__be-be--main.txt")

    def test_be_raw_files_merge_runs_not_prefixes(self):
        d = tempfile.mkdtemp()
        for n in ("none__be-be--main.txt", "none__be-be--sweep.txt", "none__be-be1.txt",
                  "none__be-be1--d.txt", "mps__be-be--main.txt"):
            write(os.path.join(d, n), ["1.0 128 0.5"])
        got = [os.path.basename(f) for f in report.be_raw_files(d, "none", "be")]
        self.assertEqual(got, ["none__be-be--main.txt", "none__be-be--sweep.txt"])


class TableTest(unittest.TestCase):
    def test_markdown_table(self):
        t = report.markdown_table(["mode", "p99"], [["alone", "1.00"], ["missile", "12.50"]])
        lines = t.split("\n")
        self.assertEqual(len(lines), 4)
        self.assertTrue(all(l.startswith("|") and l.endswith("|") for l in lines))
        self.assertEqual(len({len(l) for l in lines}), 1)  # padded to one width
        self.assertIn(":", lines[1])
        self.assertIn("| missile |", lines[3])

    def test_fmt(self):
        self.assertEqual(report.fmt(float("nan")), "-")
        self.assertEqual(report.fmt(None), "-")
        self.assertEqual(report.fmt(1.23456, 3), "1.235")
        self.assertEqual(report.fmt(7), "7")


def write(path, lines):
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")


class EndToEndTest(unittest.TestCase):
    """A synthetic run directory: logs + raw files -> tables with the expected numbers."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.raw = os.path.join(self.dir, "raw")
        os.makedirs(self.raw)
        os.makedirs(os.path.join(self.dir, "logs"))
        lines = []
        t = 1000.0

        def result(mode, scen, p99, t0, t1, **kw):
            d = {"mode": mode, "scenario": scen, "n": 100, "p50_ms": p99 / 2, "p99_ms": p99,
                 "p999_ms": p99 * 1.2, "mean_ms": p99 / 2, "t_start": t0, "t_end": t1}
            d.update(kw)
            lines.append("RESULT " + json.dumps(d))
            write(os.path.join(self.raw, report.raw_file_name(mode, scen)),
                  [str(p99 / 2 + i * 0.01) for i in range(100)])

        def be_iters(mode, name, t0, t1, per_s, run=""):
            # 0.1 s iterations of per_s/10 images from t0 to t1
            rows, s = [], t0
            while s < t1 - 1e-9:
                rows.append(f"{s + 0.1:.6f} {per_s / 10} {s:.6f}")
                s += 0.1
            write(os.path.join(self.raw, report.be_raw_file_name(mode, name, run)), rows)

        lines.append('BE ' + json.dumps({"mode": "alone", "name": "be", "img_per_s": 1000.0}))
        lines.append('BE ' + json.dumps({"mode": "alone-missile", "name": "be", "img_per_s": 980.0}))
        result("alone", "resnet50-graph", 2.0, t, t + 8)
        result("none", "resnet50-graph", 6.0, t + 100, t + 108)
        be_iters("none", "be", t + 90, t + 120, 500.0)
        result("missile", "resnet50-graph", 2.1, t + 200, t + 208)
        be_iters("missile", "be", t + 190, t + 220, 900.0)
        for m, p99 in (("alone", 1.0), ("none", 3.0), ("missile", 1.05)):
            result(m, "sweep:resnet50", p99, t + 300, t + 304, load=0.3, rate_hz=200.0,
                   dropped=1 if m == "none" else 0)
        be_iters("missile", "be", t + 290, t + 320, 900.0, run="sweep")
        be_iters("none", "be", t + 290, t + 320, 500.0, run="sweep")
        result("d-none", "resnet50-graph", 6.6, t + 500, t + 508)
        be_iters("d-none", "be1", t + 490, t + 520, 250.0)
        be_iters("d-none", "be2", t + 490, t + 520, 250.0)
        result("d-missile", "resnet50-graph", 2.2, t + 400, t + 408)
        be_iters("d-missile", "be1", t + 390, t + 420, 230.0)
        be_iters("d-missile", "be2", t + 390, t + 420, 690.0)
        lines.append("SKIP gpt2 capture failed: whatever")
        write(os.path.join(self.dir, "logs", "run.out"), lines)

    def test_tables(self):
        rec = report.load_records([self.dir])
        rep = report.Report(rec, self.raw)
        rows = {r["mode"]: r for r in rep.pair_table("resnet50-graph", 1.10, 80.0)}
        self.assertEqual(set(rows), {"alone", "none", "missile"})  # d-missile kept apart
        self.assertAlmostEqual(rows["none"]["p99x"], 3.0)
        self.assertAlmostEqual(rows["none"]["be_pct"], 50.0, places=3)
        self.assertEqual(rows["none"]["verdict"], "FAIL")
        self.assertAlmostEqual(rows["missile"]["p99x"], 1.05)
        self.assertAlmostEqual(rows["missile"]["be_pct"], 90.0, places=3)
        self.assertEqual(rows["missile"]["verdict"], "PASS")
        self.assertEqual(rows["alone"]["verdict"], "-")
        # The LS alone: 100 requests of 1 ms mean in 8 s, so it leaves 98.75% of the time.
        self.assertAlmostEqual(rep.ls_leaves("resnet50-graph"), 0.9875)
        self.assertAlmostEqual(rows["missile"]["harvest"], 0.9 / 0.9875, places=3)
        p99x, be_pct, dropped = rep.sweep_cell("none", "resnet50")
        self.assertAlmostEqual(p99x, 3.0)
        self.assertAlmostEqual(be_pct, 50.0, places=3)
        self.assertEqual(dropped, 1)
        d = {r["mode"]: r for r in rep.pair_d_rows()}
        self.assertEqual(list(d), ["d-none", "d-missile"])
        self.assertAlmostEqual(d["d-missile"]["ratio"], 3.0, places=3)
        self.assertLess(d["d-missile"]["err"], 0.1)
        self.assertEqual(d["d-missile"]["verdict"], "PASS")
        self.assertAlmostEqual(d["d-missile"]["total_pct"], 92.0, places=3)
        self.assertAlmostEqual(d["d-none"]["ratio"], 1.0, places=3)
        self.assertEqual(d["d-none"]["verdict"], "n/a")  # no weights without Missile
        md = rep.markdown()
        for needle in ("(a) resnet50-graph", "Sweep", "(d) two BE tenants", "gpt2 capture failed",
                       "BE alone", "3.00*"):
            self.assertIn(needle, md)
        self.assertNotIn("(b) bert-graph", md)  # no results, no table

    def test_a_graph_be_makes_the_pair_e_judged_by_harvest(self):
        with open(os.path.join(self.dir, "logs", "run.out"), "a") as fh:
            fh.write('BE ' + json.dumps({"mode": "alone", "name": "be", "img_per_s": 1000.0,
                                         "graph": True, "batch": 64, "copy_mib": 0}) + "\n")
        rep = report.Report(report.load_records([self.dir]), self.raw)
        self.assertTrue(rep.be_graph())
        rows = {r["mode"]: r for r in rep.pair_table("resnet50-graph", 1.15, None, 0.95)}
        self.assertEqual(rows["missile"]["verdict"], "FAIL")  # harvest 0.91 < 0.95
        rows = {r["mode"]: r for r in rep.pair_table("resnet50-graph", 1.15, None, 0.85)}
        self.assertEqual(rows["missile"]["verdict"], "PASS")
        md = rep.markdown()
        self.assertIn("(e) resnet50-graph", md)
        self.assertIn("replayed as one CUDA graph, no copies", md)
        self.assertNotIn("(a) resnet50-graph", md)

    def test_further_windows_of_a_pair_get_tables_of_their_own(self):
        lines = []
        t = 5000.0
        for k, (alone, missile) in enumerate(((1.0, 1.2), (1.1, 1.5)), start=1):
            scen = "decode-graph" if k == 1 else f"decode-graph@{k}"
            for mode, p99, t0 in (("alone", alone, t + 10 * k), ("missile", missile, t + 100 + 10 * k)):
                lines.append("RESULT " + json.dumps({
                    "mode": mode, "scenario": scen, "n": 10, "p50_ms": p99, "p99_ms": p99,
                    "p999_ms": p99, "mean_ms": p99, "t_start": t0, "t_end": t0 + 8}))
                write(os.path.join(self.raw, report.raw_file_name(mode, scen)), [str(p99)] * 10)
        with open(os.path.join(self.dir, "logs", "run.out"), "a") as fh:
            fh.write("\n".join(lines) + "\n")
        rep = report.Report(report.load_records([self.dir]), self.raw)
        md = rep.markdown()
        self.assertIn("(f) decode-graph", md)
        self.assertIn("(f@2) decode-graph@2", md)
        rows = {r["mode"]: r for r in rep.pair_table("decode-graph@2", 1.10, 80.0)}
        self.assertAlmostEqual(rows["missile"]["p99x"], 1.5 / 1.1)  # against its own window

    def test_main_writes_summary(self):
        out = os.path.join(self.dir, "out")
        with contextlib.redirect_stdout(io.StringIO()):
            rc = report.main([self.dir, "--out-dir", out, "--no-plots"])
        self.assertEqual(rc, 0)
        with open(os.path.join(out, "summary.md")) as fh:
            self.assertIn("PASS", fh.read())

    def test_plots_optional(self):
        # With or without matplotlib this must not raise.
        rec = report.load_records([self.dir])
        with contextlib.redirect_stdout(io.StringIO()):
            files = report.make_plots(report.Report(rec, self.raw), self.dir)
        for f in files:
            self.assertTrue(os.path.getsize(f) > 0)


class FrontierTest(unittest.TestCase):
    """frontier.py: every window's table of a summary, medians per mode."""

    def test_every_table_is_a_window(self):
        import frontier
        text = "\n".join([
            "## (f) decode-graph: x", "",
            "| mode | n | p50 | p99 | p999 | p99x | BE | BE % | h | t |",
            "|---|---|---|---|---|---|---|---|---|---|",
            "| alone | 10 | 1.0 | 1.0 | 1.0 | 1.00 | - | - | - | - |",
            "| missile-b125 | 10 | 1.0 | 1.2 | 1.3 | 1.20 | 500.0 | 40.0 | 0.9 | FAIL |",
            "## (f@2) decode-graph@2: x", "",
            "| missile-b125 | 10 | 1.0 | 1.1 | 1.3 | 1.10 | 600.0 | 50.0 | 0.9 | FAIL |",
        ])
        tables = frontier.parse(text)
        self.assertEqual(len(tables), 2)
        self.assertEqual(tables[0]["missile-b125"], (1.20, 40.0))
        self.assertEqual(tables[0]["alone"], (1.00, None))
        self.assertEqual(tables[1]["missile-b125"], (1.10, 50.0))
        self.assertEqual(frontier.budget_of("missile-b125"), 125)
        self.assertEqual(frontier.budget_of("missile"), 100)
        self.assertIsNone(frontier.budget_of("mps-prio"))
        self.assertEqual(frontier.family_of("missile-mps"), ("missile-mps", 100))
        self.assertEqual(frontier.family_of("missile-mps-b150"), ("missile-mps", 150))
        self.assertEqual(frontier.family_of("missile-mps-r16-b200"), ("missile-mps-r16", 200))
        self.assertIsNone(frontier.family_of("missile-nopace"))
        self.assertIsNone(frontier.family_of("missile-mps-nopace"))
        self.assertEqual(frontier.family_of("missile-mps-b200rest"), ("missile-mps rest", 200))
        self.assertEqual(frontier.family_of("missile-mps-b200rest30"), ("missile-mps rest30", 200))
        self.assertEqual(frontier.family_of("missile-mps-b200rest30-nolend"),
                         ("missile-mps rest30-nolend", 200))

    def test_other_modes_are_judged_against_the_budget_modes(self):
        import frontier
        data = {"decode-graph": {
            "alone": [(1.0, None)] * 3,
            "none": [(2.5, 74.0), (2.4, 73.0), (2.6, 75.0)],
            "mps-prio": [(1.80, 89.0), (1.81, 89.4), (1.79, 88.8)],
            "missile-mps-nopace": [(1.70, 95.0)] * 3,
            "missile-mps-b125": [(1.24, 40.0)] * 3,
            "missile-mps-b200rest30": [(1.78, 88.6), (1.80, 89.1), (1.82, 88.9)],
            # The LS beside an idle BE tenant: no BE throughput, no point on the frontier.
            "missile-mps-marked": [(0.9, None)] * 3,
            "missile-mps-marked-every": [(1.0, None)] * 3,
        }}
        text = frontier.verdicts(data)
        lines = {line.split(":")[1].split("(")[0].strip(): line for line in text.splitlines()}
        self.assertNotIn("alone", lines)
        self.assertNotIn("missile-mps-marked", lines)
        self.assertNotIn("missile-mps-marked-every", lines)
        # none: a budget mode has a lower p99 and a higher BE %.
        self.assertIn("dominated by missile-mps-b200rest30", lines["none"])
        # mps-prio: more BE than the rests' median, but within their range on both axes.
        self.assertIn("level with missile-mps-b200rest30", lines["mps-prio"])
        # pacing off: more BE at a lower p99 than any budget mode.
        self.assertIn("not dominated", lines["missile-mps-nopace"])

    def test_archives_are_read_with_or_without_a_leading_dot(self):
        # bench/scrub_paths.sh rewrites an archive from its folder ("./decode-graph-1/...").
        import frontier
        import tarfile
        summary = "\n".join([
            "## (f) decode-graph: x", "",
            "| missile-mps-b200 | 10 | 1.0 | 1.8 | 1.9 | 1.80 | 900.0 | 80.0 | 0.9 | FAIL |", ""])
        with tempfile.TemporaryDirectory() as d:
            for name, prefix in (("decode-graph-1.tgz", ""), ("decode-graph-2.tgz", "./")):
                with tarfile.open(os.path.join(d, name), "w:gz") as tar:
                    data = summary.encode()
                    info = tarfile.TarInfo(f"{prefix}{name[:-4]}/summary.md")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
            data = frontier.collect(d)
        self.assertEqual(data["decode-graph"]["missile-mps-b200"], [(1.80, 80.0), (1.80, 80.0)])


class TailEventsTest(unittest.TestCase):
    """tail_events.py: slow requests placed in the BE iteration running when they started."""

    def _write(self, d, name, lines):
        path = os.path.join(d, name)
        with open(path, "w") as fh:
            fh.write("".join(line + "\n" for line in lines))
        return path

    def test_slow_requests_land_in_the_phase_they_started_in(self):
        import tail_events
        with tempfile.TemporaryDirectory() as d:
            # BE iterations of 100 ms from t=1000; requests every 10 ms, slow ones near each
            # iteration's start (phase 0.0-0.1), one slow request after the BE stopped.
            be = self._write(d, "be.txt", [f"{1000 + 0.1 * (i + 1):.6f} 128 {1000 + 0.1 * i:.6f}"
                                           for i in range(5)])
            ls = [f"{5.0 if k % 10 == 0 else 1.0:.4f} {1000.0005 + 0.01 * k:.6f}"
                  for k in range(50)]
            ls.append(f"9.0000 {1000.9:.6f}")
            ls_path = self._write(d, "ls.txt", ls)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                rc = tail_events.main([ls_path, be, "--slow-ms", "2", "--bins", "10"])
            self.assertEqual(rc, 0)
            text = out.getvalue()
            self.assertIn("6 of 51 requests slow; 1 outside any BE iteration", text)
            rows = {line.split()[0]: line.split()[1:] for line in text.splitlines()
                    if line[:1].isdigit() and "-" in line.split()[0]}
            self.assertEqual(rows["0.00-0.10"], ["5", "5"])
            self.assertEqual(rows["0.50-0.60"], ["0", "5"])

    def test_a_raw_file_without_start_times_is_refused(self):
        import tail_events
        with tempfile.TemporaryDirectory() as d:
            ls_path = self._write(d, "ls.txt", ["1.0", "2.0"])
            be = self._write(d, "be.txt", ["1001 128 1000"])
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                self.assertEqual(tail_events.main([ls_path, be]), 1)
            self.assertIn("no request start times", err.getvalue())


if __name__ == "__main__":
    unittest.main(verbosity=1)

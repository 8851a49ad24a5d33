#!/usr/bin/env python3
"""Report for bench/colocation: joins the LS service's RESULT lines with the BE jobs' throughput
over each LS measurement window and prints (and writes as summary.md) one table per pair:

  (a) ResNet-50 CUDA graph, (b) BERT-base CUDA graph, (c) ResNet-50 eager: rows = modes,
      LS p50/p99/p99.9, p99 relative to LS alone, BE img/s inside the LS window, BE % of solo;
  sweep: rows = models, p99 relative to alone and BE % of solo per mode;
  (d) two BE tenants with weights 1:3 beside the ResNet-50 graph LS: BE1, BE2, their ratio.

usage: report.py INPUT... [--raw-dir DIR] [--out-dir DIR] [--no-plots]
  INPUT: log files or directories (searched recursively for *.out, *.log, *.txt holding
  "RESULT {json}", "BE {json}" and "SKIP ..." lines; a later file's line wins over an earlier
  one for the same mode and scenario). --raw-dir (default INPUT/raw) holds the raw latencies
  (<mode>__<scenario>.txt, ms per line) and BE iteration timestamps
  (<mode>__be-<name>[--<run>].txt, 't_end images t_start' per line).

Only the standard library is needed; matplotlib, if importable, adds latency.png and
be_throughput.png. This module is also imported by ls_service.py and be_job.py for the shared
helpers (percentile, summarize, raw_file_name), so it must import nothing heavy at load time.
"""
import argparse
import json
import math
import os
import sys

# The main pairs: (label, LS scenario, title, p99 ratio target, BE % of solo target).
MAIN_PAIRS = [
    ("a", "resnet50-graph", "ResNet-50 fp16 bs1, CUDA graph, 5 ms think time", 1.10, 80.0),
    ("b", "bert-graph", "BERT-base fp16 bs1 seq128, CUDA graph, 5 ms think time", 1.10, 80.0),
    ("c", "resnet50-eager", "ResNet-50 fp16 bs1, eager, 5 ms think time", 1.25, 70.0),
    ("f", "decode-graph", "GPT-shaped decoder fp16, 32 tokens per request, a CUDA graph per token, "
     "5 ms think time", 1.10, 80.0),
]
# With a BE replayed as one CUDA graph (be_job.py --graph), the ResNet-50 graph LS is pair (e):
# (label, LS scenario, title, p99 ratio target, BE harvest target).
GRAPH_BE_PAIRS = [
    ("e", "resnet50-graph", "ResNet-50 fp16 bs1, CUDA graph, 5 ms think time, beside a CUDA-graph BE",
     1.15, 0.85),
]
# Pair (d): LS scenario, BE tenant names, expected BE2:BE1 throughput ratio, tolerance in %.
PAIR_D_SCENARIO = "resnet50-graph"
PAIR_D_BES = ("be1", "be2")
PAIR_D_TOLERANCE_PCT = 5.0
D_PREFIX = "d-"  # pair (d) runs are tagged d-<mode>
SWEEP_PREFIX = "sweep:"
UNWEIGHTED_MODES = ("alone", "alone-mps", "none", "mps", "mps-prio")  # no Missile: no BE weights
SOLO_MODE = "alone"  # LS alone and the BE's solo throughput
# The LS with no BE working beside it (the marked modes: an idle BE tenant, so the LS marks).
LS_ONLY_MODES = (SOLO_MODE, "alone-mps", "missile-mps-alone", "missile-mps-marked",
                 "missile-mps-marked-every")
BE_NAME = "be"  # the one BE job of the main pairs and the sweep
# Modes in the order the tables list them; modes not named here (EXTRA_MODES) follow.
MODE_ORDER = ["alone", "alone-missile", "alone-mps", "none", "mps", "mps-prio", "missile", "missile-mps",
              "missile-nopace"]


# ---------------------------------------------------------------- statistics

def percentile(values, q):
    """The q-th percentile (0..100) of values, linear interpolation between closest ranks
    (numpy's default). nan for no values."""
    if not values:
        return float("nan")
    xs = sorted(values)
    if len(xs) == 1:
        return float(xs[0])
    pos = (len(xs) - 1) * (q / 100.0)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize(latencies_ms):
    """n, p50, p99, p99.9, mean and max of a list of latencies in ms."""
    n = len(latencies_ms)
    return {
        "n": n,
        "p50_ms": percentile(latencies_ms, 50),
        "p99_ms": percentile(latencies_ms, 99),
        "p999_ms": percentile(latencies_ms, 99.9),
        "mean_ms": (sum(latencies_ms) / n) if n else float("nan"),
        "max_ms": max(latencies_ms) if n else float("nan"),
    }


def _safe(text):
    """text with every character but letters, digits, '-', '_' and '.' replaced by '_'."""
    return "".join(c if (c.isalnum() or c in "-_.") else "_" for c in text)


def raw_file_name(mode, scenario):
    """File name of a run's raw samples: <mode>__<scenario>.txt, ':' replaced by '_'."""
    return f"{_safe(mode)}__{_safe(scenario)}.txt"


def be_raw_file_name(mode, name, run=""):
    """File name of a BE job's iteration timestamps: <mode>__be-<name>[--<run>].txt. The run
    (the runner's phase) keeps the BE files of one mode apart across phases; the report merges
    all runs of a mode and name, which is right because LS windows are wall-clock times."""
    base = raw_file_name(mode, f"be-{name}")
    return base if not run else f"{base[:-4]}--{_safe(run)}.txt"


def be_raw_files(raw_dir, mode, name):
    """All BE iteration files of (mode, name) in raw_dir, whatever their run."""
    base = be_raw_file_name(mode, name)[:-4]
    try:
        names = os.listdir(raw_dir)
    except OSError:
        return []
    return sorted(os.path.join(raw_dir, n) for n in names
                  if n == base + ".txt" or (n.startswith(base + "--") and n.endswith(".txt")))


def window_throughput(iters, t0, t1):
    """Images per second a BE job processed inside the wall-clock window [t0, t1].

    iters: (t_start or None, t_end, images) per iteration. An iteration with a known start
    counts in proportion to its overlap with the window (a boundary iteration counts in part);
    without a start, an iteration counts whole if it ended inside the window."""
    if not (t1 > t0):
        return float("nan")
    total = 0.0
    for start, end, images in iters:
        if start is None or end <= start:
            if t0 <= end <= t1:
                total += images
            continue
        overlap = min(end, t1) - max(start, t0)
        if overlap > 0:
            total += images * overlap / (end - start)
    return total / (t1 - t0)


def ratio(a, b):
    """a / b, nan where either is missing or b is 0."""
    if a is None or b is None or not _finite(a) or not _finite(b) or b == 0:
        return float("nan")
    return a / b


def geomean(xs):
    xs = [x for x in xs if _finite(x) and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def mean(xs):
    xs = [x for x in xs if _finite(x)]
    return sum(xs) / len(xs) if xs else float("nan")


def _finite(x):
    return isinstance(x, (int, float)) and math.isfinite(x)


# ---------------------------------------------------------------- parsing

def parse_line(line):
    """('RESULT'|'BE', dict) or ('SKIP', text) for a record line, else None. The record may
    follow a prefix (a tee'd log line), so it is searched for, not only at the start."""
    for kind in ("RESULT", "BE"):
        tag = kind + " {"
        i = line.find(tag)
        if i >= 0 and (i == 0 or not line[i - 1].isalnum()):
            try:
                return kind, json.loads(line[i + len(kind) + 1:].strip())
            except ValueError:
                return None
    s = line.strip()
    if s.startswith("SKIP "):
        return "SKIP", s[5:]
    return None


class Records:
    """All RESULT, BE and SKIP records, deduplicated: results by (mode, scenario), BE jobs by
    (mode, name), the last one read winning."""

    def __init__(self):
        self.results = {}
        self.be = {}
        self.skips = []

    def add_line(self, line):
        parsed = parse_line(line)
        if parsed is None:
            return
        kind, payload = parsed
        if kind == "RESULT" and isinstance(payload, dict) and "scenario" in payload:
            self.results[(payload.get("mode", "?"), payload["scenario"])] = payload
        elif kind == "BE" and isinstance(payload, dict):
            self.be[(payload.get("mode", "?"), payload.get("name", BE_NAME))] = payload
        elif kind == "SKIP" and payload not in self.skips:
            self.skips.append(payload)

    def modes(self):
        return order_modes({m for m, _ in self.results} | {m for m, _ in self.be})


def log_files(inputs):
    """Files to read for records, oldest first (so a newer run's line wins)."""
    files = []
    for p in inputs:
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                if os.path.basename(root) == "raw":
                    continue  # raw samples, not logs
                for n in names:
                    if n.endswith((".out", ".log", ".txt")):
                        files.append(os.path.join(root, n))
        elif os.path.isfile(p):
            files.append(p)
    return sorted(set(files), key=lambda f: (os.path.getmtime(f), f))


def load_records(inputs):
    rec = Records()
    for f in log_files(inputs):
        with open(f, errors="replace") as fh:
            for line in fh:
                rec.add_line(line)
    return rec


def read_floats(path):
    """One float per line (blank lines and '#' comments skipped); [] if the file is missing."""
    out = []
    try:
        with open(path) as fh:
            for line in fh:
                line = line.strip()
                if line and not line.startswith("#"):
                    out.append(float(line.split()[0]))
    except OSError:
        return []
    return out


def read_be_iters(path):
    """BE iteration records 't_end images [t_start]' per line -> [(t_start|None, t_end, images)];
    None if the file is missing."""
    try:
        fh = open(path)
    except OSError:
        return None
    iters = []
    with fh:
        for line in fh:
            parts = line.split()
            if not parts or parts[0].startswith("#"):
                continue
            end, images = float(parts[0]), float(parts[1])
            start = float(parts[2]) if len(parts) > 2 else None
            iters.append((start, end, images))
    return iters


def order_modes(modes):
    """Modes in table order: MODE_ORDER first, then the others by name; pair (d)'s d-<mode>
    after all of them, in the same order of their <mode>."""
    def key(m):
        d = m.startswith(D_PREFIX)
        base = m[len(D_PREFIX):] if d else m
        return (d, MODE_ORDER.index(base) if base in MODE_ORDER else len(MODE_ORDER), base)
    return sorted(set(modes), key=key)


# ---------------------------------------------------------------- formatting

def fmt(x, digits=2, suffix=""):
    """A number for a table cell; '-' for missing or nan."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    if isinstance(x, int):
        return f"{x}{suffix}"
    return f"{x:.{digits}f}{suffix}"


def markdown_table(headers, rows):
    """A Markdown table, columns padded so it also reads well as plain text. The first column
    is left-aligned, the others right-aligned."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    ncol = len(headers)
    for r in cells:
        r.extend([""] * (ncol - len(r)))
    widths = [max(3, max(len(r[i]) for r in cells)) for i in range(ncol)]

    def line(r):
        out = []
        for i, c in enumerate(r):
            out.append(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]))
        return "| " + " | ".join(out) + " |"

    sep = "|" + "|".join((":" + "-" * (w + 1)) if i == 0 else ("-" * (w + 1) + ":")
                         for i, w in enumerate(widths)) + "|"
    return "\n".join([line(cells[0]), sep] + [line(r) for r in cells[1:]])


# ---------------------------------------------------------------- the report

class Report:
    """Computes the tables from Records and the raw directory."""

    def __init__(self, rec, raw_dir, d_ratio=3.0):
        self.rec = rec
        self.raw_dir = raw_dir
        self.d_ratio = d_ratio
        self._iters = {}

    def be_iters(self, mode, name):
        key = (mode, name)
        if key not in self._iters:
            iters = []
            for f in (be_raw_files(self.raw_dir, mode, name) if self.raw_dir else []):
                iters += read_be_iters(f) or []
            self._iters[key] = iters
        return self._iters[key]

    def be_in_window(self, mode, name, result):
        """BE `name`'s img/s during the LS result's measurement window (nan if unknown)."""
        iters = self.be_iters(mode, name)
        if not iters or result is None:
            return float("nan")
        return window_throughput(iters, result.get("t_start", 0), result.get("t_end", 0))

    def be_solo(self):
        be = self.rec.be.get((SOLO_MODE, BE_NAME))
        return be.get("img_per_s") if be else None

    def alone(self, scenario):
        return self.rec.results.get((SOLO_MODE, scenario))

    def be_graph(self):
        """Whether the BE job replayed its forward pass as one CUDA graph."""
        be = self.rec.be.get((SOLO_MODE, BE_NAME)) or {}
        return bool(be.get("graph"))

    def ls_leaves(self, scenario):
        """The fraction of time the LS alone leaves the GPU: 1 - (requests x mean latency) over
        its window, the time an LS request is in flight being what its lanes report busy."""
        a = self.alone(scenario)
        if not a:
            return float("nan")
        window = (a.get("t_end") or 0) - (a.get("t_start") or 0)
        n, mean_ms = a.get("n"), a.get("mean_ms")
        if window <= 0 or not _finite(n) or not _finite(mean_ms):
            return float("nan")
        return min(1.0, max(0.0, 1.0 - n * mean_ms / 1000.0 / window))

    def pair_table(self, scenario, p99_target, be_target, harvest_target=None):
        """Rows of one main pair: modes with a result for the scenario (pair (d) runs apart).
        Harvest: the BE's share of its solo throughput over the share of time the LS leaves."""
        alone = self.alone(scenario)
        solo = self.be_solo()
        leaves = self.ls_leaves(scenario)
        rows = []
        for mode in self.rec.modes():
            if mode.startswith(D_PREFIX):
                continue
            r = self.rec.results.get((mode, scenario))
            if r is None:
                continue
            p99x = ratio(r.get("p99_ms"), alone.get("p99_ms") if alone else None)
            if mode in LS_ONLY_MODES:
                be_tp = be_pct = harvest = float("nan")
                verdict = "-"
            else:
                be_tp = self.be_in_window(mode, BE_NAME, r)
                be_pct = 100.0 * ratio(be_tp, solo)
                harvest = ratio(be_pct / 100.0, leaves)
                if harvest_target is not None and _finite(p99x) and _finite(harvest):
                    verdict = "PASS" if p99x <= p99_target and harvest >= harvest_target else "FAIL"
                elif harvest_target is None and _finite(p99x) and _finite(be_pct):
                    ok = p99x <= p99_target and be_pct >= be_target
                    verdict = "PASS" if ok else "FAIL"
                else:
                    verdict = "?"
            rows.append({"mode": mode, "n": r.get("n"), "p50": r.get("p50_ms"),
                         "p99": r.get("p99_ms"), "p999": r.get("p999_ms"), "p99x": p99x,
                         "be_tp": be_tp, "be_pct": be_pct, "harvest": harvest,
                         "verdict": verdict})
        return rows

    def sweep_models(self):
        models = []
        for (_, scen) in self.rec.results:
            if scen.startswith(SWEEP_PREFIX) and scen[len(SWEEP_PREFIX):] not in models:
                models.append(scen[len(SWEEP_PREFIX):])
        return models

    def sweep_modes(self):
        return [m for m in self.rec.modes() if not m.startswith(D_PREFIX) and m != SOLO_MODE and
                any(s.startswith(SWEEP_PREFIX) for (mm, s) in self.rec.results if mm == m)]

    def sweep_cell(self, mode, model):
        """(p99 ratio to alone, BE % of solo, dropped requests) of one model in one mode."""
        scen = SWEEP_PREFIX + model
        r = self.rec.results.get((mode, scen))
        alone = self.alone(scen)
        if r is None:
            return float("nan"), float("nan"), 0
        p99x = ratio(r.get("p99_ms"), alone.get("p99_ms") if alone else None)
        be_pct = 100.0 * ratio(self.be_in_window(mode, BE_NAME, r), self.be_solo())
        return p99x, be_pct, int(r.get("dropped", 0) or 0)

    def pair_d_rows(self):
        alone = self.alone(PAIR_D_SCENARIO)
        solo = self.be_solo()
        rows = []
        for mode in self.rec.modes():
            if not mode.startswith(D_PREFIX):
                continue
            r = self.rec.results.get((mode, PAIR_D_SCENARIO))
            if r is None:
                continue
            b1 = self.be_in_window(mode, PAIR_D_BES[0], r)
            b2 = self.be_in_window(mode, PAIR_D_BES[1], r)
            rr = ratio(b2, b1)
            err = 100.0 * abs(rr / self.d_ratio - 1.0) if _finite(rr) else float("nan")
            total_pct = 100.0 * ratio(b1 + b2, solo) if _finite(b1) and _finite(b2) else float("nan")
            if mode[len(D_PREFIX):] in UNWEIGHTED_MODES:
                verdict = "n/a"  # nothing sets weights there: the reference, not a test
            elif not _finite(err):
                verdict = "?"
            else:
                verdict = "PASS" if err <= PAIR_D_TOLERANCE_PCT else "FAIL"
            rows.append({"mode": mode, "p99": r.get("p99_ms"),
                         "p99x": ratio(r.get("p99_ms"), alone.get("p99_ms") if alone else None),
                         "be1": b1, "be2": b2, "total_pct": total_pct, "ratio": rr, "err": err,
                         "verdict": verdict})
        return rows

    def markdown(self):
        """The whole summary as Markdown."""
        out = ["# GPU co-location benchmark (bench/colocation)", ""]
        solo = self.be_solo()
        be = self.rec.be.get((SOLO_MODE, BE_NAME)) or {}
        copy = be.get("copy_mib", 512)
        out.append(f"BE job: {be.get('model', 'resnet152')} fp16 batch {be.get('batch', 128)} "
                   f"{'replayed as one CUDA graph' if be.get('graph') else 'eager'}"
                   f"{f' + {copy} MiB pinned host-to-device copy per iteration' if copy else ', no copies'}. "
                   "BE img/s is measured inside each LS measurement window; % of solo is against "
                   "the BE alone without Missile (mode `alone`); harvest is that share over the "
                   "share of time the LS alone leaves the GPU (1 - requests x mean latency / window).")
        out.append("")
        # BE alone: Missile's own overhead on the BE.
        be_rows = []
        for mode in ("alone", "alone-missile"):
            be = self.rec.be.get((mode, BE_NAME))
            if be:
                be_rows.append([mode, fmt(be.get("img_per_s"), 1),
                                fmt(100.0 * ratio(be.get("img_per_s"), solo), 1)])
        if be_rows:
            out += ["## BE alone", "", markdown_table(["mode", "BE img/s", "% of plain solo"], be_rows), ""]
        pairs = ([(lb, sc, ti, p, None, h) for lb, sc, ti, p, h in GRAPH_BE_PAIRS] if self.be_graph()
                 else [(lb, sc, ti, p, b, None) for lb, sc, ti, p, b in MAIN_PAIRS])
        # Further windows of a pair in the same run (ls_service.py --windows): SCEN@k.
        windows = sorted({s for (_, s) in self.rec.results if "@" in s},
                         key=lambda s: (s.split("@")[0], int(s.split("@")[1])))
        for w in windows:
            base, k = w.split("@")
            for lb, sc, ti, p, b, h in list(pairs):
                if sc == base:
                    pairs.append((f"{lb}@{k}", w, f"{ti}, window {k}", p, b, h))
        for label, scen, title, p99_t, be_t, harvest_t in pairs:
            rows = self.pair_table(scen, p99_t, be_t, harvest_t)
            if not rows:
                continue
            goal = (f"harvest >= {harvest_t:.2f}" if harvest_t is not None
                    else f"BE >= {be_t:.0f}% of solo")
            out += [f"## ({label}) {scen}: {title}", "",
                    f"target: LS p99 <= {p99_t:.2f}x alone with {goal}; the LS alone leaves "
                    f"{fmt(100.0 * self.ls_leaves(scen), 1)}% of the time", ""]
            out.append(markdown_table(
                ["mode", "n", "LS p50 ms", "LS p99 ms", "LS p99.9 ms", "p99 x alone", "BE img/s",
                 "BE % solo", "harvest", "target"],
                [[r["mode"], fmt(r["n"]), fmt(r["p50"], 3), fmt(r["p99"], 3), fmt(r["p999"], 3),
                  fmt(r["p99x"], 2), fmt(r["be_tp"], 1), fmt(r["be_pct"], 1), fmt(r["harvest"], 2),
                  r["verdict"]]
                 for r in rows]))
            out.append("")
        models = self.sweep_models()
        if models:
            modes = self.sweep_modes()
            headers = ["model", "alone p50 ms", "alone p99 ms", "rate /s"]
            for m in modes:
                headers += [f"p99x {m}", f"BE% {m}"]
            rows, p99x_by_mode, be_by_mode, dropped_any = [], {m: [] for m in modes}, {m: [] for m in modes}, False
            for model in models:
                a = self.alone(SWEEP_PREFIX + model) or {}
                row = [model, fmt(a.get("p50_ms"), 3), fmt(a.get("p99_ms"), 3), fmt(a.get("rate_hz"), 0)]
                for m in modes:
                    p99x, be_pct, dropped = self.sweep_cell(m, model)
                    p99x_by_mode[m].append(p99x)
                    be_by_mode[m].append(be_pct)
                    mark = "*" if dropped else ""
                    dropped_any = dropped_any or bool(dropped)
                    row += [fmt(p99x, 2) + mark, fmt(be_pct, 1)]
                rows.append(row)
            summary = ["geomean / mean", "", "", ""]
            for m in modes:
                summary += [fmt(geomean(p99x_by_mode[m]), 2), fmt(mean(be_by_mode[m]), 1)]
            rows.append(summary)
            load = next((r.get("load") for (mm, s), r in self.rec.results.items()
                         if s.startswith(SWEEP_PREFIX) and r.get("load")), None)
            out += ["## Sweep: open-loop Poisson LS at "
                    f"{fmt(load, 2)} x solo capacity, batch 1 fp16 CUDA graphs", "",
                    "p99x: LS p99 relative to the same model alone (queueing included); "
                    "BE%: BE throughput in the window, % of solo.", "",
                    markdown_table(headers, rows), ""]
            if dropped_any:
                out += ["\\* some requests were still unserved when the window was cut off "
                        "(the LS fell behind its arrival rate); see `dropped` in the RESULT line.", ""]
        drows = self.pair_d_rows()
        if drows:
            out += [f"## (d) two BE tenants, weights 1:{self.d_ratio:g}, beside {PAIR_D_SCENARIO}", "",
                    f"target: BE2:BE1 within {PAIR_D_TOLERANCE_PCT:.0f}% of {self.d_ratio:g} "
                    "(only the Missile modes set weights)", "",
                    markdown_table(["mode", "LS p99 ms", "p99 x alone", "BE1 img/s", "BE2 img/s",
                                    "BE1+BE2 % solo", "BE2:BE1", f"error vs 1:{self.d_ratio:g} %",
                                    "target"],
                                   [[r["mode"], fmt(r["p99"], 3), fmt(r["p99x"], 2), fmt(r["be1"], 1),
                                     fmt(r["be2"], 1), fmt(r["total_pct"], 1), fmt(r["ratio"], 2),
                                     fmt(r["err"], 1), r["verdict"]] for r in drows]), ""]
        if self.rec.skips:
            out += ["## Skipped", ""] + [f"- {s}" for s in self.rec.skips] + [""]
        if len(out) <= 4:
            out += ["(no results found)", ""]
        return "\n".join(out)


# ---------------------------------------------------------------- plots

def make_plots(report, out_dir):
    """latency.png (LS latency CDF and tail per mode, main pairs) and be_throughput.png (BE % of
    solo per mode and pair). Returns the files written; [] when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # noqa: BLE001 - any import problem means no plots
        print(f"plots skipped: matplotlib not importable ({e})")
        return []
    written = []
    pairs = [p for p in MAIN_PAIRS if any(s == p[1] for (_, s) in report.rec.results)]
    if pairs and report.raw_dir:
        fig, axes = plt.subplots(2, len(pairs), figsize=(6 * len(pairs), 8), squeeze=False)
        for col, (label, scen, title, _, _) in enumerate(pairs):
            top, bottom = axes[0][col], axes[1][col]
            for mode in report.rec.modes():
                if mode.startswith(D_PREFIX) or (mode, scen) not in report.rec.results:
                    continue
                xs = sorted(read_floats(os.path.join(report.raw_dir, raw_file_name(mode, scen))))
                if not xs:
                    continue
                n = len(xs)
                cdf = [(i + 1) / n for i in range(n)]
                top.plot(xs, cdf, label=mode)
                # tail: 1 - CDF on a log scale (p99 at 1e-2, p99.9 at 1e-3)
                bottom.plot(xs[:-1], [1.0 - c for c in cdf[:-1]], label=mode)
            top.set_title(f"({label}) {scen}")
            top.set_xscale("log")
            top.set_xlabel("LS latency (ms)")
            top.set_ylabel("CDF")
            top.grid(True, which="both", alpha=0.3)
            top.legend(fontsize=8)
            bottom.set_xscale("log")
            bottom.set_yscale("log")
            bottom.set_xlabel("LS latency (ms)")
            bottom.set_ylabel("1 - CDF (tail)")
            bottom.grid(True, which="both", alpha=0.3)
        fig.tight_layout()
        path = os.path.join(out_dir, "latency.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    # BE % of solo: groups = pairs (and pair (d)'s BE1+BE2), bars = modes.
    groups, values = [], {}
    for label, scen, _, p99_t, be_t in MAIN_PAIRS:
        rows = [r for r in report.pair_table(scen, p99_t, be_t) if r["mode"] != SOLO_MODE]
        if rows:
            groups.append(f"({label}) {scen}")
            for r in rows:
                values.setdefault(r["mode"], {})[groups[-1]] = r["be_pct"]
    models = report.sweep_models()
    if models:
        groups.append("sweep (mean)")
        for m in report.sweep_modes():
            values.setdefault(m, {})[groups[-1]] = mean([report.sweep_cell(m, x)[1] for x in models])
    drows = report.pair_d_rows()
    if drows:
        groups.append("(d) BE1+BE2")
        for r in drows:
            values.setdefault(r["mode"][len(D_PREFIX):], {})[groups[-1]] = r["total_pct"]
    if groups:
        modes = order_modes(values)
        fig, ax = plt.subplots(figsize=(max(8, 2.2 * len(groups)), 5))
        width = 0.8 / max(1, len(modes))
        for i, mode in enumerate(modes):
            xs = [g + (i - (len(modes) - 1) / 2) * width for g in range(len(groups))]
            ys = [values[mode].get(g, float("nan")) for g in groups]
            ax.bar(xs, [y if _finite(y) else 0 for y in ys], width, label=mode)
        ax.axhline(80, color="gray", linestyle="--", linewidth=1)
        ax.axhline(70, color="gray", linestyle=":", linewidth=1)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels(groups, fontsize=8)
        ax.set_ylabel("BE throughput, % of solo")
        ax.set_title("BE throughput during the LS windows (targets: 80% graphs, 70% eager)")
        ax.legend(fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
        fig.tight_layout()
        path = os.path.join(out_dir, "be_throughput.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("inputs", nargs="+", help="log files or directories")
    p.add_argument("--raw-dir", help="raw samples (default: INPUT/raw of the first directory)")
    p.add_argument("--out-dir", help="where summary.md and the PNGs go (default: first directory)")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--d-ratio", type=float, default=3.0, help="expected BE2:BE1 ratio in pair (d)")
    a = p.parse_args(argv)
    first_dir = next((x for x in a.inputs if os.path.isdir(x)), None)
    raw_dir = a.raw_dir or (os.path.join(first_dir, "raw") if first_dir else None)
    out_dir = a.out_dir or first_dir or "."
    rec = load_records(a.inputs)
    report = Report(rec, raw_dir, a.d_ratio)
    text = report.markdown()
    print(text)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "summary.md"), "w") as fh:
        fh.write(text + "\n")
    if not a.no_plots:
        for f in make_plots(report, out_dir):
            print(f"wrote {f}")
    return 0 if rec.results or rec.be else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Charts of the recorded GPU runs (bench/results/*) for docs/results.md, as PNG files.

  colocation_modes.png     one co-location run (default 2026-12-01-colocation7-h200): LS p99 as a
                           multiple of LS alone, and BE throughput as % of its solo, per mode,
                           for the pairs (a), (b), (c) of its summary.md
  colocation_settings.png  LS p99 x alone against BE % of solo, one point per mode (setting) of
                           pair (a), for the runs that tried settings (default colocation2, a
                           window / idle sweep, and colocation4, the modes and pacing variants)
  pcie_small_copy.png      the LS tenant's 4 MiB host-to-device copy, p50 and p99 in us, per PCIe
                           run: alone, next to a BE bulk copy without Missile ("unmanaged") and
                           with Missile (its best configuration of the run), from pcie_summary.txt

The per-run charts of latency distributions and BE throughput over time come from
bench/colocation/report.py instead (they need a run's raw samples).

usage: plot_results.py [--results DIR] [--out DIR] [--run NAME] [--settings-runs NAME,...]
                       [--pcie-runs NAME,...]
  --results  the recorded runs (default: bench/results beside this script)
  --out      where the PNG files go (default: docs/img); created if missing
Needs matplotlib (Debian: python3-matplotlib). Exit status 0, or 1 with a message on stderr when
a run or its table is missing.
"""
import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_RESULTS = os.path.join(HERE, "results")
DEFAULT_OUT = os.path.join(os.path.dirname(HERE), "docs", "img")
DEFAULT_RUN = "2026-12-01-colocation7-h200"
DEFAULT_SETTINGS_RUNS = ["2026-12-01-colocation2-h200", "2026-12-01-colocation4-h200"]
DEFAULT_PCIE_RUNS = ["2026-11-29-pcie-h200", "2026-11-29-pcie2-h200", "2026-11-29-pcie4-h200",
                     "2026-11-29-pcie5-h200", "2026-11-29-pcie6-h200", "2026-11-29-final-h200"]
# The targets of docs/results.md: LS p99 within 1.10x of alone with the BE at 80 % of solo for
# the CUDA-graph pairs; the LS 4 MiB copy p99 within 1.5x of alone.
P99_TARGET = 1.10
BE_TARGET = 80.0
COPY_TARGET = 1.5


class PlotError(Exception):
    pass


def parse_summary(path):
    """summary.md -> {pair letter: {"title": str, "rows": [{column: text}]}}."""
    pairs = {}
    current = None
    header = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^## \((\w)\) (\S+): (.*)$", line)
            if m:
                current = {"scenario": m.group(2), "title": m.group(3).strip(), "rows": []}
                pairs[m.group(1)] = current
                header = None
                continue
            if line.startswith("## "):
                current = None
                continue
            if current is None or not line.startswith("|"):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                header = cells
            elif not all(set(c) <= set(":-") for c in cells):
                current["rows"].append(dict(zip(header, cells)))
    return pairs


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def load_pairs(results, run):
    path = os.path.join(results, run, "summary.md")
    if not os.path.isfile(path):
        raise PlotError(f"{path}: no such file")
    pairs = parse_summary(path)
    if not pairs:
        raise PlotError(f"{path}: no pair tables")
    return pairs


def plot_modes(plt, results, run, out):
    pairs = load_pairs(results, run)
    letters = [p for p in ("a", "b", "c") if p in pairs]
    modes = []
    for p in letters:
        for row in pairs[p]["rows"]:
            if row["mode"] != "alone" and row["mode"] not in modes:
                modes.append(row["mode"])
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / max(1, len(letters))
    for i, p in enumerate(letters):
        rows = {r["mode"]: r for r in pairs[p]["rows"]}
        xs = [m + (i - (len(letters) - 1) / 2) * width for m in range(len(modes))]
        p99 = [number(rows.get(mode, {}).get("p99 x alone")) or 0 for mode in modes]
        be = [number(rows.get(mode, {}).get("BE % solo")) or 0 for mode in modes]
        label = f"({p}) {pairs[p]['scenario']}"
        axes[0].bar(xs, p99, width, label=label)
        axes[1].bar(xs, be, width, label=label)
    axes[0].axhline(P99_TARGET, color="black", linestyle="--", linewidth=1,
                    label=f"target {P99_TARGET:.2f}x")
    axes[1].axhline(BE_TARGET, color="black", linestyle="--", linewidth=1,
                    label=f"target {BE_TARGET:.0f} %")
    axes[0].set_ylabel("LS p99 / LS alone p99")
    axes[1].set_ylabel("BE throughput, % of solo")
    for ax in axes:
        ax.set_xticks(range(len(modes)))
        ax.set_xticklabels(modes, rotation=20, ha="right")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Co-location on the H200 per mode ({run})")
    fig.tight_layout()
    path = os.path.join(out, "colocation_modes.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_settings(plt, results, runs, out):
    from matplotlib import ticker
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for run in runs:
        pairs = load_pairs(results, run)
        if "a" not in pairs:
            raise PlotError(f"{run}: no pair (a) table")
        xs, ys, names = [], [], []
        for row in pairs["a"]["rows"]:
            p99, be = number(row.get("p99 x alone")), number(row.get("BE % solo"))
            if p99 is None or be is None:
                continue
            xs.append(be)
            ys.append(p99)
            names.append(row["mode"])
        ax.scatter(xs, ys, label=run)
        for i, (x, y, name) in enumerate(zip(xs, ys, names)):
            # Alternate above and below: settings of one run often land close together.
            ax.annotate(name, (x, y), textcoords="offset points",
                        xytext=(4, 4 if i % 2 == 0 else -10), fontsize=7)
    ax.axhline(P99_TARGET, color="black", linestyle="--", linewidth=1)
    ax.axvline(BE_TARGET, color="black", linestyle="--", linewidth=1)
    ax.set_yscale("log")  # MPS without priorities is at 7x; the settings that matter near 1x
    ax.set_yticks([1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0, 7.0])
    ax.yaxis.set_major_formatter(ticker.FormatStrFormatter("%.2gx"))
    ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xlabel("BE throughput, % of solo")
    ax.set_ylabel("LS p99 / LS alone p99 (log scale)")
    ax.set_title("Pair (a), ResNet-50 graph LS next to a ResNet-152 BE: each setting's trade-off\n"
                 "(target: below the dashed line and right of the dashed column)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(out, "colocation_settings.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


LAT_LINE = re.compile(r"RESULT (\S+) lat h2d 4MiB n=\d+ p50_us=([\d.]+) p99_us=([\d.]+)")


def pcie_latencies(results, run):
    """{"alone"|"unmanaged"|"missile": (p50, p99)}; for Missile the configuration with the
    lowest p99 of the LS copy next to the BE."""
    path = os.path.join(results, run, "pcie_summary.txt")
    if not os.path.isfile(path):
        raise PlotError(f"{path}: no such file")
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = LAT_LINE.search(line)
            if not m:
                continue
            name, p50, p99 = m.group(1), float(m.group(2)), float(m.group(3))
            if name in ("alone", "unmanaged"):
                out[name] = (p50, p99)
            elif name.endswith("-ls-under-be") and ("missile" not in out or p99 < out["missile"][1]):
                out["missile"] = (p50, p99)
    if "alone" not in out:
        raise PlotError(f"{path}: no 'alone' latency line")
    return out


def plot_pcie(plt, results, runs, out):
    fig, ax = plt.subplots(figsize=(11, 4.8))
    kinds = [("alone", "LS alone"), ("unmanaged", "next to BE, no Missile"),
             ("missile", "next to BE, Missile")]
    width = 0.8 / len(kinds)
    data = [pcie_latencies(results, run) for run in runs]
    for k, (kind, label) in enumerate(kinds):
        xs = [r + (k - 1) * width for r in range(len(runs))]
        p99 = [d.get(kind, (0, 0))[1] for d in data]
        p50 = [d.get(kind, (0, 0))[0] for d in data]
        bars = ax.bar(xs, p99, width, label=f"{label}: p99 (bar), p50 (dot)")
        ax.scatter(xs, p50, color="black", s=10, zorder=3)
        for bar, value in zip(bars, p99):
            if value > 0:
                ax.annotate(f"{value:.0f}", (bar.get_x() + bar.get_width() / 2, value),
                            ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(runs)))
    ax.set_xticklabels([r.replace("2026-11-29-", "").replace("-h200", "") for r in runs])
    ax.set_ylabel("4 MiB host-to-device copy, us")
    ax.set_ylim(0, max(max(d.get(k, (0, 0))[1] for k, _ in kinds) for d in data) * 1.25)
    ax.set_title(f"LS 4 MiB copy latency per PCIe run (target: p99 within {COPY_TARGET}x of alone)",
                 fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", ncol=3)
    fig.tight_layout()
    path = os.path.join(out, "pcie_small_copy.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default=DEFAULT_RESULTS)
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--run", default=DEFAULT_RUN)
    ap.add_argument("--settings-runs", default=",".join(DEFAULT_SETTINGS_RUNS))
    ap.add_argument("--pcie-runs", default=",".join(DEFAULT_PCIE_RUNS))
    args = ap.parse_args(argv)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_results: matplotlib is missing (Debian: apt-get install python3-matplotlib)",
              file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    try:
        written = [
            plot_modes(plt, args.results, args.run, args.out),
            plot_settings(plt, args.results, [r for r in args.settings_runs.split(",") if r],
                          args.out),
            plot_pcie(plt, args.results, [r for r in args.pcie_runs.split(",") if r], args.out),
        ]
    except PlotError as e:
        print(f"plot_results: {e}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

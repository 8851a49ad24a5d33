#!/usr/bin/env python3
"""The LS latency budget's frontier from bench/run_budget_on_gpu.sh's output: per LS scenario
and mode, the median (and range) over the windows of the LS p99 ratio to alone and of the BE's
throughput in % of solo, as a table (frontier.md) and a plot (frontier.png: p99 ratio against
BE %, Missile's budgets joined by a line, the other modes as points).

usage: frontier.py OUT_DIR   (holding SCENARIO-R.tgz or SCENARIO-R/ from each window)
"""
import io
import os
import re
import statistics
import sys
import tarfile

from report import LS_ONLY_MODES  # the modes with no BE: no point on the frontier

ROW = re.compile(r"^\|\s*([\w.-]+)\s*\|\s*(\d+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|"
                 r"\s*([\d.]+)\s*\|\s*([\d.]+|-)\s*\|\s*([\d.]+|-)\s*\|")


def summaries(out_dir):
    """(scenario, window, summary.md text) for every window found."""
    for name in sorted(os.listdir(out_dir)):
        m = re.match(r"^(.+)-(\d+)(\.tgz)?$", name)
        if not m:
            continue
        path = os.path.join(out_dir, name)
        if m.group(3):
            with tarfile.open(path) as tar:
                for member in tar.getmembers():
                    name = member.name[2:] if member.name.startswith("./") else member.name
                    if name.endswith("/summary.md") and name.count("/") == 1:
                        yield m.group(1), int(m.group(2)), tar.extractfile(member).read().decode()
        elif os.path.isfile(os.path.join(path, "summary.md")):
            with open(os.path.join(path, "summary.md")) as fh:
                yield m.group(1), int(m.group(2)), fh.read()


def parse(text):
    """[mode -> (p99 ratio, BE % of solo or None)], one per pair table of a summary (a run with
    ls_service.py --windows N has N tables, "## (f) ...", "## (f@2) ...")."""
    tables, rows = [], None
    for line in text.splitlines():
        if line.startswith("## ("):
            rows = {}
            tables.append(rows)
            continue
        m = ROW.match(line)
        if m and rows is not None and m.group(1) not in rows:
            be = None if m.group(8) == "-" else float(m.group(8))
            rows[m.group(1)] = (float(m.group(6)), be)
    return [t for t in tables if t]


def collect(out_dir):
    data = {}  # scenario -> mode -> [(ratio, be)], one per window
    for scen, _, text in summaries(out_dir):
        for table in parse(text):
            for mode, v in table.items():
                data.setdefault(scen, {}).setdefault(mode, []).append(v)
    return data


FAMILY = re.compile(r"^(missile(?:-mps(?:-r\d+)?)?)(?:-b(\d+)(rest\d*(?:-[\w-]+)?)?)?$")


def family_of(mode):
    """(family, budget) of a Missile budget mode: missile-b125 -> ("missile", 125), missile-mps
    -> ("missile-mps", 100), missile-mps-r16-b200 -> ("missile-mps-r16", 200), a budget with
    rests and its variants after the budget: missile-mps-b200rest30 -> ("missile-mps rest30",
    200); None for the other modes (alone, none, mps-prio, missile-nopace, ...)."""
    m = FAMILY.match(mode)
    if not m:
        return None
    family = m.group(1) + (f" {m.group(3)}" if m.group(3) else "")
    return family, int(m.group(2) or 100)


def budget_of(mode):
    f = family_of(mode)
    return f[1] if f else None


def table(data):
    lines = ["| LS | mode | windows | p99 x alone, median (range) | BE % of solo, median (range) |",
             "|---|---|---|---|---|"]
    for scen, modes in data.items():
        for mode in sorted(modes, key=lambda x: (family_of(x) is None, family_of(x) or ("", 0), x)):
            vals = modes[mode]
            r = [v[0] for v in vals]
            b = [v[1] for v in vals if v[1] is not None]
            bs = (f"{statistics.median(b):.1f} ({min(b):.1f}-{max(b):.1f})" if b else "-")
            lines.append(f"| {scen} | {mode} | {len(vals)} | {statistics.median(r):.2f} "
                         f"({min(r):.2f}-{max(r):.2f}) | {bs} |")
    return "\n".join(lines) + "\n"


def summary_of(vals):
    """(median, min, max) of the p99 ratios and of the BE % over a mode's windows."""
    r = [v[0] for v in vals]
    b = [v[1] for v in vals if v[1] is not None] or [0.0]
    return (statistics.median(r), min(r), max(r)), (statistics.median(b), min(b), max(b))


def verdicts(data):
    """Per scenario, each mode that shares the GPU outside Missile's budgets (none, mps-prio,
    Missile with pacing off, ...) against the budget modes, by medians over the windows:
    "dominated by M" where a budget mode M has a p99 ratio no higher and a BE % no lower; else
    "level with M" where M's range and the mode's overlap on both axes (the run cannot tell
    them apart); else "not dominated"."""
    lines = []
    for scen, modes in data.items():
        frontier = {m: summary_of(v) for m, v in modes.items() if family_of(m) is not None}
        for mode in sorted(modes):
            if family_of(mode) is not None or mode in LS_ONLY_MODES:
                continue
            (r, rlo, rhi), (b, blo, bhi) = summary_of(modes[mode])
            dominating = [m for m, ((fr, _, _), (fb, _, _)) in frontier.items()
                          if fr <= r and fb >= b]
            level = [m for m, ((_, frlo, frhi), (_, fblo, fbhi)) in frontier.items()
                     if frlo <= rhi and rlo <= frhi and fblo <= bhi and blo <= fbhi]
            if dominating:
                verdict = "dominated by " + ", ".join(sorted(dominating))
            elif level:
                verdict = "level with " + ", ".join(sorted(level))
            else:
                verdict = "not dominated"
            lines.append(f"- {scen}: {mode} ({r:.2f}x, {b:.1f} %): {verdict}")
    return "\n".join(lines) + ("\n" if lines else "")


def plot(data, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, len(data), figsize=(5 * len(data), 4.2), squeeze=False)
    for ax, (scen, modes) in zip(axes[0], data.items()):
        med = {m: (statistics.median(v[0] for v in vals),
                   statistics.median([v[1] for v in vals if v[1] is not None] or [0]))
               for m, vals in modes.items() if m not in LS_ONLY_MODES}
        families = {}
        for m in med:
            if family_of(m) is not None:
                fam, b = family_of(m)
                families.setdefault(fam, []).append((b, m))
        for fam, budgets in sorted(families.items()):
            budgets.sort()
            xs = [med[m][1] for _, m in budgets]
            ys = [med[m][0] for _, m in budgets]
            ax.plot(xs, ys, "o-", label=f"{fam}, budget {budgets[0][0]}-{budgets[-1][0]} %")
            for (b, m), x, y in zip(budgets, xs, ys):
                ax.annotate(f"{b}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
        for m, (y, x) in med.items():
            if budget_of(m) is None:
                ax.plot([x], [y], "s", label=m)
        if "alone-mps" in modes:  # what MPS alone costs the LS: the floor of the MPS families
            y = statistics.median(v[0] for v in modes["alone-mps"])
            ax.axhline(y, color="gray", linestyle="--", linewidth=1, label=f"LS alone on MPS ({y:.2f})")
        ax.set_title(scen)
        ax.set_xlabel("BE throughput, % of solo")
        ax.set_ylabel("LS p99 / alone p99")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    data = collect(argv[1])
    if not data:
        print(f"no windows in {argv[1]}", file=sys.stderr)
        return 1
    text = table(data)
    judged = verdicts(data)
    if judged:
        text += "\nAgainst Missile's budget modes:\n\n" + judged
    with open(os.path.join(argv[1], "frontier.md"), "w") as fh:
        fh.write(text)
    print(text, end="")
    if plot(data, os.path.join(argv[1], "frontier.png")):
        print("plot: frontier.png")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

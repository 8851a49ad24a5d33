#!/usr/bin/env python3
"""Turns missile-calibrate --channel-map's CSVs into one PNG.

Left: the victim's bandwidth under a concurrent aggressor for each predicted colour pair
(victim colour x aggressor colour, from <uuid>.channels.pairs.csv), annotated with the slowdown;
the diagonal is where the recovered function predicts a conflict. Right: per source, the
distribution of the scanned masks' bandwidth ratios (<uuid>.channels.scan.csv), masks inside the
fitted row space in a separate colour.

usage: plot_channel_map.py --pairs PAIRS.csv --scan SCAN.csv --out channel_map.png
"""
import argparse
import csv
import sys


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", required=True)
    parser.add_argument("--scan", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_channel_map.py: matplotlib is not installed", file=sys.stderr)
        return 1

    pairs = read_csv(args.pairs)
    scan = read_csv(args.scan)
    sources = sorted({r["source"] for r in scan})
    fig, axes = plt.subplots(1, 1 + len(sources), figsize=(5.5 * (1 + len(sources)), 4.8))

    ax = axes[0]
    if pairs:
        n = 1 + max(max(int(p["victim_colour"]), int(p["aggressor_colour"])) for p in pairs)
        grid = [[float("nan")] * n for _ in range(n)]
        for p in pairs:
            grid[int(p["victim_colour"])][int(p["aggressor_colour"])] = float(p["under_gbps"])
        image = ax.imshow(grid, cmap="viridis", origin="upper")
        values = [float(p["under_gbps"]) for p in pairs]
        middle = (min(values) + max(values)) / 2
        fig.colorbar(image, ax=ax, label="victim GB/s under the aggressor")
        for p in pairs:
            v, a = int(p["victim_colour"]), int(p["aggressor_colour"])
            mark = "*" if int(p["measured_conflict"]) != int(p["predicted_conflict"]) else ""
            colour = "black" if float(p["under_gbps"]) > middle else "white"
            ax.text(a, v, f"{float(p['slowdown']):.2f}{mark}", ha="center", va="center",
                    color=colour, fontsize=8)
        ax.set_xticks(range(n))
        ax.set_yticks(range(n))
        ax.set_xlabel("aggressor colour (predicted)")
        ax.set_ylabel("victim colour (predicted)")
        ax.set_title("victim bandwidth under contention per colour pair\n"
                     "numbers: slowdown; diagonal: predicted conflict; *: mispredicted",
                     fontsize=9)
    else:
        ax.text(0.5, 0.5, "one channel group: no colour pairs", ha="center", va="center")
        ax.set_axis_off()

    for ax, source in zip(axes[1:], sources):
        rows = [r for r in scan if r["source"] == source]
        inside = [float(r["ratio"]) for r in rows if r["in_fit_span"] == "1"]
        outside = [float(r["ratio"]) for r in rows if r["in_fit_span"] != "1"]
        bins = [i / 100 for i in range(0, 151, 2)]
        ax.hist(outside, bins=bins, color="tab:blue", label=f"outside the row space ({len(outside)})")
        ax.hist(inside, bins=bins, color="tab:red", label=f"inside the row space ({len(inside)})")
        ax.set_yscale("log")
        ax.set_xlabel("bandwidth of the mask's half / typical half")
        ax.set_ylabel("masks")
        ax.set_title(f"parity-subset scan, source {source}", fontsize=9)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

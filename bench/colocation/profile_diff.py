#!/usr/bin/env python3
"""Where a BE's GPU time went in one mode against another, from two of be_job.py's
--profile-at files (<mode>__be-<name>--profile.json): the timelines' totals per iteration side
by side (span, busy, idle, kernel and copy time), then the kernel names whose time per iteration
changed most. A BE slowed by its neighbour on the SMs shows longer kernels; one starved of
work (its host late, or its work held) shows more idle time with the same kernels.

usage: profile_diff.py BASE.json OTHER.json [--top N]
"""
import argparse
import json

FIELDS = ("span_us", "busy_us", "idle_us", "kernel_us", "copy_us")


def load(path):
    with open(path) as fh:
        return json.load(fh)


def iterations(profile):
    """How many iterations the profile covers (at least 1)."""
    return max(int(profile["summary"].get("iters", 1)), 1)


def per_iteration(profile):
    """The summary's totals divided by its profiled iterations (ms)."""
    n = iterations(profile)
    return {f: profile["summary"][f] / n / 1000.0 for f in FIELDS}


def changes(base, other, top):
    """(name, base ms/iter, other ms/iter, difference) for the `top` names with the largest
    absolute difference in time per iteration, largest first."""
    nb, no = iterations(base), iterations(other)
    names = set(base["by_name"]) | set(other["by_name"])
    rows = []
    for name in names:
        b = base["by_name"].get(name, {"us": 0.0})["us"] / nb / 1000.0
        o = other["by_name"].get(name, {"us": 0.0})["us"] / no / 1000.0
        rows.append((name, b, o, o - b))
    rows.sort(key=lambda r: (-abs(r[3]), r[0]))
    return rows[:top]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base")
    ap.add_argument("other")
    ap.add_argument("--top", type=int, default=12)
    a = ap.parse_args(argv)
    base, other = load(a.base), load(a.other)
    pb, po = per_iteration(base), per_iteration(other)
    print(f"{'per iteration (ms)':20} {'base':>9} {'other':>9} {'change':>9}")
    for f in FIELDS:
        print(f"{f[:-3]:20} {pb[f]:9.2f} {po[f]:9.2f} {po[f] - pb[f]:+9.2f}")
    print(f"\n{'kernel or copy':60} {'base':>8} {'other':>8} {'change':>8}  (ms per iteration)")
    for name, b, o, d in changes(base, other, a.top):
        print(f"{name[:60]:60} {b:8.3f} {o:8.3f} {d:+8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

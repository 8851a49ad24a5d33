#!/usr/bin/env python3
"""Sets an LS service's slow requests beside what the BE was doing when they started.

Reads a closed-loop LS raw file (lines "latency_ms start_unix_s", from ls_service.py) and the BE
raw files of the same run (lines "end_unix_s images start_unix_s", one per iteration, from
be_job.py). A request is slow when it took more than --slow-ms (default: 1.5 x the p99 of the
--alone raw file, or of the LS file itself). For each slow request it prints when it started, how
long it took, and where it fell in the BE iteration running then: the time since that iteration
started and the phase (0 = start, 1 = end). Then the phase histogram of slow requests beside the
one of all requests: slow requests that crowd into one part of the BE's iteration (its copies at
the start, say) point at what delays them; a flat histogram points at something else (the host,
a rare event). Standard library only.

usage: tail_events.py LS_RAW BE_RAW [BE_RAW...] [--alone ALONE_RAW] [--slow-ms MS] [--bins N]
"""
import argparse
import bisect
import sys

from report import percentile


def read_ls(path):
    """[(start_s, latency_ms)] of the requests that carry a start time."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) >= 2:
                out.append((float(parts[1]), float(parts[0])))
    return out


def read_latencies(path):
    with open(path, encoding="utf-8") as fh:
        return [float(line.split()[0]) for line in fh if line.strip()]


def read_be(paths):
    """Sorted [(start_s, end_s)] of every BE iteration that says when it started."""
    out = []
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 3:
                    out.append((float(parts[2]), float(parts[0])))
    return sorted(out)


def locate(iterations, t):
    """(ms since the iteration's start, phase) of the BE iteration running at t, or None."""
    starts = [s for s, _ in iterations]
    i = bisect.bisect_right(starts, t) - 1
    if i < 0:
        return None
    start, end = iterations[i]
    if t > end or end <= start:
        return None
    return (t - start) * 1e3, (t - start) / (end - start)


def histogram(phases, bins):
    counts = [0] * bins
    for p in phases:
        counts[min(bins - 1, int(p * bins))] += 1
    return counts


def analyse(requests, iterations, slow_ms, bins):
    """The report's lines."""
    lines = [f"slow: over {slow_ms:.3f} ms"]
    slow_phases, all_phases, outside = [], [], 0
    t0 = requests[0][0] if requests else 0.0
    for start, latency in requests:
        where = locate(iterations, start)
        if where is not None:
            all_phases.append(where[1])
        if latency <= slow_ms:
            continue
        if where is None:
            outside += 1
            lines.append(f"  t={start - t0:8.3f} s  {latency:7.3f} ms  (no BE iteration running)")
            continue
        slow_phases.append(where[1])
        lines.append(f"  t={start - t0:8.3f} s  {latency:7.3f} ms  BE iteration +{where[0]:7.2f} ms"
                     f"  phase {where[1]:.2f}")
    n_slow = len(slow_phases) + outside
    lines.append(f"{n_slow} of {len(requests)} requests slow; {outside} outside any BE iteration")
    lines.append("phase bin   slow   all")
    for k, (s, a) in enumerate(zip(histogram(slow_phases, bins), histogram(all_phases, bins))):
        lines.append(f"{k / bins:4.2f}-{(k + 1) / bins:4.2f}  {s:5d} {a:5d}")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ls_raw")
    ap.add_argument("be_raw", nargs="+")
    ap.add_argument("--alone", help="the LS alone raw file of the same run (sets --slow-ms)")
    ap.add_argument("--slow-ms", type=float)
    ap.add_argument("--bins", type=int, default=10)
    a = ap.parse_args(argv)
    requests = read_ls(a.ls_raw)
    if not requests:
        print(f"tail_events: {a.ls_raw} has no request start times (an older run?)",
              file=sys.stderr)
        return 1
    if a.bins < 1:
        print("tail_events: --bins must be at least 1", file=sys.stderr)
        return 2
    slow_ms = a.slow_ms
    if slow_ms is None:
        base = read_latencies(a.alone) if a.alone else [lat for _, lat in requests]
        slow_ms = 1.5 * percentile(base, 99)
    print("\n".join(analyse(requests, read_be(a.be_raw), slow_ms, a.bins)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

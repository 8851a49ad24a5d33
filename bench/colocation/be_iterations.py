#!/usr/bin/env python3
"""Where a BE job's iterations go over time, from its per-iteration file (be_job.py's raw
output: 't_end images t_start [t_copied t_issued]' per line, time.time() seconds).

For each STEP-second slice from the BE's first iteration: the median iteration time, and where
the file has them, the median time from the iteration's start until the host got back from the
copy's call and from the forward pass's launches. A host that issues its work well before the
iteration ends is not what sets the BE's pace; one that finishes issuing at the end is (held by
pacing, or too slow). Then, from --from seconds on, the median and mean over the rest.

usage: be_iterations.py [--step S] [--from S] FILE...
"""
import argparse
import statistics


def read(path):
    rows = []
    with open(path) as fh:
        for line in fh:
            parts = line.split()
            if len(parts) < 3 or parts[0].startswith("#"):
                continue
            rows.append(tuple(float(p) for p in parts))
    return rows


def slices(rows, step):
    """(second, n, iteration ms, copy-call ms or None, issued ms or None) per slice."""
    if not rows:
        return []
    t0 = rows[0][2]
    out = []
    k = 0
    while t0 + k <= rows[-1][2]:
        sel = [r for r in rows if t0 + k <= r[2] < t0 + k + step]
        if sel:
            it = statistics.median((r[0] - r[2]) * 1000 for r in sel)
            full = [r for r in sel if len(r) >= 5]
            cop = statistics.median((r[3] - r[2]) * 1000 for r in full) if full else None
            iss = statistics.median((r[4] - r[2]) * 1000 for r in full) if full else None
            out.append((k, len(sel), it, cop, iss))
        k += step
    return out


def summary(rows, start):
    if not rows:
        return None
    t0 = rows[0][2]
    d = [(r[0] - r[2]) * 1000 for r in rows if r[2] >= t0 + start]
    if not d:
        return None
    return len(d), statistics.median(d), statistics.mean(d)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--step", type=float, default=4.0)
    ap.add_argument("--from", dest="start", type=float, default=0.0)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args(argv)
    for path in a.files:
        rows = read(path)
        print(path)
        for k, n, it, cop, iss in slices(rows, a.step):
            extra = "" if cop is None else f"  copy call {cop:6.1f} ms  issued {iss:6.1f} ms"
            print(f"  {k:5.0f} s  n {n:3d}  iteration {it:6.1f} ms{extra}")
        s = summary(rows, a.start)
        if s:
            print(f"  from {a.start:.0f} s: n {s[0]}, median {s[1]:.2f} ms, mean {s[2]:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

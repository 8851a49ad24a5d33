#!/usr/bin/env python3
"""Where a BE job's iterations go over time, from its per-iteration file (be_job.py's raw
output: 't_end images t_start [t_copied t_issued [gpu_copy_ms gpu_forward_ms]]' per line,
time.time() seconds).

For each STEP-second slice from the BE's first iteration: the median iteration time, and where
the file has them, the median time from the iteration's start until the host got back from the
copy's call and from the forward pass's launches, and the GPU's own time for the copy and for
the forward pass. A host that issues its work well before the iteration ends is not what sets
the BE's pace; one that finishes issuing at the end is (held by pacing, or too slow). A forward
pass that takes longer on the GPU while the host is ahead was slowed on the GPU. Then, from
--from seconds on, the median and mean over the rest.

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
    """(second, n, iteration ms, copy-call ms or None, issued ms or None, GPU copy ms or None,
    GPU forward ms or None) per slice."""
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
            gpu = [r for r in sel if len(r) >= 7]
            gcop = statistics.median(r[5] for r in gpu) if gpu else None
            gfwd = statistics.median(r[6] for r in gpu) if gpu else None
            out.append((k, len(sel), it, cop, iss, gcop, gfwd))
        k += step
    return out


def summary(rows, start):
    """(n, median ms, mean ms, GPU forward median ms or None, GPU copy median ms or None) of the
    iterations from `start`."""
    if not rows:
        return None
    t0 = rows[0][2]
    sel = [r for r in rows if r[2] >= t0 + start]
    if not sel:
        return None
    d = [(r[0] - r[2]) * 1000 for r in sel]
    gpu = [r[6] for r in sel if len(r) >= 7]
    copy = [r[5] for r in sel if len(r) >= 7]
    return (len(d), statistics.median(d), statistics.mean(d), (statistics.median(gpu) if gpu else None),
            (statistics.median(copy) if copy else None))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--step", type=float, default=4.0)
    ap.add_argument("--from", dest="start", type=float, default=0.0)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args(argv)
    for path in a.files:
        rows = read(path)
        print(path)
        for k, n, it, cop, iss, gcop, gfwd in slices(rows, a.step):
            extra = "" if cop is None else f"  copy call {cop:6.1f} ms  issued {iss:6.1f} ms"
            if gfwd is not None:
                extra += f"  GPU copy {gcop:6.1f} ms  GPU forward {gfwd:6.1f} ms"
            print(f"  {k:5.0f} s  n {n:3d}  iteration {it:6.1f} ms{extra}")
        s = summary(rows, a.start)
        if s:
            gpu = "" if s[3] is None else f", GPU forward median {s[3]:.2f} ms, GPU copy median {s[4]:.2f} ms"
            print(f"  from {a.start:.0f} s: n {s[0]}, median {s[1]:.2f} ms, mean {s[2]:.2f} ms{gpu}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A PyTorch tenant that moves data over PCIe, for bench/pcie (copies go through the CUDA runtime,
as in real programs).

  lat  --mib 4 --seconds S --gap-ms 5 [--dir h2d|d2h]  one copy every gap; prints p50/p99 in us
  bulk --mib 1024 --seconds S [--dir h2d|d2h]          copies back to back; prints GB/s
Both use pinned host memory and non_blocking copies followed by a stream synchronize.
"""
import argparse
import time

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["lat", "bulk"])
    p.add_argument("--mib", type=int, default=4)
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--gap-ms", type=float, default=5)
    p.add_argument("--dir", choices=["h2d", "d2h"], default="h2d")
    p.add_argument("--tag", default="")
    p.add_argument("--start-at", type=float, default=0,
                   help="wall-clock time (seconds since the epoch) to start measuring at, so "
                        "that several tenants measure the same window")
    a = p.parse_args()
    n = a.mib << 20
    host = torch.empty(n, dtype=torch.uint8).pin_memory()
    dev = torch.empty(n, dtype=torch.uint8, device="cuda")
    stream = torch.cuda.Stream()

    def copy():
        with torch.cuda.stream(stream):
            if a.dir == "h2d":
                dev.copy_(host, non_blocking=True)
            else:
                host.copy_(dev, non_blocking=True)
        stream.synchronize()

    for _ in range(3):
        copy()
    warm = []
    if a.mode == "lat":
        # A quarter of a second at the measuring cadence first: the daemon shrinks BE tenants'
        # chunks once an LS tenant copies, and the BE copy already under way keeps its large
        # chunks until it ends; its effect is reported apart (warm_max_us), the rest is steady.
        warm_end = time.perf_counter() + 0.25
        while time.perf_counter() < warm_end:
            t0 = time.perf_counter()
            copy()
            warm.append((time.perf_counter() - t0) * 1e6)
            time.sleep(a.gap_ms / 1000)
    print("ready", flush=True)
    if a.start_at:
        if a.mode == "bulk":
            while time.time() < a.start_at:  # keep the link busy until the window opens
                copy()
        else:
            time.sleep(max(0.0, a.start_at - time.time()))
    end = time.perf_counter() + a.seconds
    if a.mode == "lat":
        samples = []
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            copy()
            samples.append((time.perf_counter() - t0) * 1e6)
            time.sleep(a.gap_ms / 1000)
        samples.sort()
        p50 = samples[len(samples) // 2]
        p99 = samples[min(len(samples) - 1, int(0.99 * (len(samples) - 1) + 0.5))]
        print(f"RESULT {a.tag} lat {a.dir} {a.mib}MiB n={len(samples)} p50_us={p50:.1f} "
              f"p99_us={p99:.1f} max_us={samples[-1]:.1f} warm_n={len(warm)} "
              f"warm_max_us={max(warm):.1f}", flush=True)
    else:
        copies = 0
        t0 = time.perf_counter()
        while time.perf_counter() < end:
            copy()
            copies += 1
        s = time.perf_counter() - t0
        print(f"RESULT {a.tag} bulk {a.dir} {a.mib}MiB copies={copies} "
              f"GBps={copies * n / s / 1e9:.2f}", flush=True)


if __name__ == "__main__":
    main()

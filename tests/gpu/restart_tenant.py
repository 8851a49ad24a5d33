"""A PyTorch tenant for the daemon-restart GPU check (run_restart_gpu.sh): its memory, copies and
results through missiled being killed and started again under it.

It builds a ResNet-50 (random weights, fp16), keeps its eager output and its CUDA graph's
first output as the references and a 256 MiB tensor of a known pattern, prints "ready", then
runs passes until --until FILE exists and --seconds more have passed. Each pass: an eager
forward and a graph replay, each bitwise equal to its reference; a new allocation (after
empty_cache, so the driver is asked: 1-64 MiB) filled and read back; a 64 MiB pinned host
buffer copied to the GPU and back, equal; the pattern tensor unchanged. A pass counts in the
phase it started in: "before" (until --killed FILE exists), "between" (until --restarted FILE
exists), "after".
Exit 0: every pass matched and every phase had at least one pass; else 1, with what differed.
usage: restart_tenant.py --until FILE --killed FILE --restarted FILE [--seconds S]
"""
import argparse
import os
import sys
import time

import torch

from torch_infer import build, capture_graph


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--until", required=True)
    p.add_argument("--killed", required=True)
    p.add_argument("--restarted", required=True)
    p.add_argument("--seconds", type=float, default=5.0)
    a = p.parse_args()
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    model, host_in = build("resnet50", 8)
    static_in = torch.empty_like(host_in, device="cuda")
    pattern = torch.arange(64 << 20, dtype=torch.int32, device="cuda")  # 256 MiB
    pattern_sum = int(pattern.sum(dtype=torch.int64))
    bulk = torch.randint(-2**31, 2**31 - 1, (16 << 20,), dtype=torch.int32).pin_memory()
    bulk_back = torch.empty_like(bulk).pin_memory()
    with torch.no_grad():
        static_in.copy_(host_in)
        ref = model(static_in).float().cpu()
        graph, static_out = capture_graph(model, static_in)
        graph.replay()
        ref_graph = static_out.float().cpu()
    print("ready", flush=True)
    counts = {"before": 0, "between": 0, "after": 0}
    bad = []
    sizes_mib = [1, 3, 17, 64, 5, 33]
    deadline = None
    n = 0
    while True:
        if deadline is None and os.path.exists(a.until):
            deadline = time.monotonic() + a.seconds
        if deadline is not None and time.monotonic() > deadline:
            break
        phase = ("after" if os.path.exists(a.restarted)
                 else "between" if os.path.exists(a.killed) else "before")
        try:
            with torch.no_grad():
                static_in.copy_(host_in, non_blocking=True)
                eager = model(static_in).float().cpu()
                graph.replay()
                graphed = static_out.float().cpu()
            mib = sizes_mib[n % len(sizes_mib)]
            fresh = torch.full((mib << 18,), n, dtype=torch.int32, device="cuda")
            fresh_ok = int(fresh.sum(dtype=torch.int64)) == n * (mib << 18)
            dev = bulk.to("cuda", non_blocking=True)
            bulk_back.copy_(dev, non_blocking=True)
            torch.cuda.synchronize()
            ok = {
                "eager": torch.equal(eager, ref),
                "graph": torch.equal(graphed, ref_graph),
                "fresh allocation": fresh_ok,
                "copy round trip": torch.equal(bulk_back, bulk),
                "pattern": int(pattern.sum(dtype=torch.int64)) == pattern_sum,
            }
            del fresh, dev
            torch.cuda.empty_cache()
        except Exception as e:  # noqa: BLE001: any CUDA error is the check's failure
            ok = {f"{type(e).__name__}: {e}": False}
        failed = [k for k, v in ok.items() if not v]
        if failed:
            bad.append((n, phase, failed))
            print(f"pass {n} ({phase}): differs: {', '.join(failed)}", flush=True)
            if len(bad) > 5:
                break
        counts[phase] += 1
        n += 1
    print("passes " + " ".join(f"{k}={v}" for k, v in counts.items()) + f" bad={len(bad)}",
          flush=True)
    if bad or min(counts.values()) == 0:
        sys.exit(1)


if __name__ == "__main__":
    main()

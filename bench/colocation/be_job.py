#!/usr/bin/env python3
"""BE (best-effort) job for bench/colocation: ResNet-152 fp16 inference at batch 128 (random
weights, NCHW, cudnn.benchmark, eval, no_grad, eager, default stream), each iteration preceded
by a --copy-mib (512) pinned host-to-device copy on the same stream, so the job loads both the
GPU's compute and the PCIe link.

Prints "ready" after --warmup-iters iterations (cuDNN picks its algorithms in the first), then
runs until --seconds have passed, --stop-file exists, or SIGTERM/SIGINT; each iteration ends with
a synchronize, so its timestamps are true. At exit it prints "BE {json}" (mode, name, images,
seconds, img_per_s, iters, ...) and writes one line per iteration, 't_end images t_start'
(time.time() seconds) followed by when the host got back from the copy's call and from the
forward pass's launches, and the GPU's own time for the copy and for the forward pass (ms,
from CUDA events on the job's stream), to --raw-dir/<mode>__be-<name>[--<run>].txt; the report
takes the BE throughput inside each LS window from these. With --profile-at S, the iterations
from S seconds into the measured run go through torch.profiler for --profile-iters iterations
(those iterations are not in the raw file): their GPU timeline is summed up in a line
"PROFILE {json}" (span, busy, idle, kernel and copy time) and per kernel name in
--raw-dir/<mode>__be-<name>[--<run>]--profile.json (bench/colocation/profile_diff.py compares
two). Exit status 0, or 1 on error.
"""
import argparse
import json
import os
import signal
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import be_raw_file_name  # noqa: E402  (stdlib-only helper)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="BE job for bench/colocation")
    p.add_argument("--mode", required=True, help="tag of the run (alone, none, mps, missile, ...)")
    p.add_argument("--name", default="be", help="the job's name (be, be1, be2)")
    p.add_argument("--run", default="", help="the runner's phase, keeps raw files of phases apart")
    p.add_argument("--seconds", type=float, default=600, help="longest measured run")
    p.add_argument("--stop-file", help="stop once this file exists (checked every iteration)")
    p.add_argument("--copy-mib", type=int, default=512, help="host-to-device copy per iteration, 0 = none")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--model", default="resnet152",
                   help="torchvision model, or 'gemm': a transformer-sized MLP stack of long GEMMs "
                        "(8 layers of 8192x8192 fp16 over --batch tokens; about 0.3 ms each at 2048)")
    p.add_argument("--graph", action="store_true",
                   help="replay the forward pass as one torch.cuda.CUDAGraph (the copy stays outside)")
    p.add_argument("--idle", action="store_true",
                   help="a placeholder BE tenant: make a CUDA context, print ready, run nothing "
                        "until stopped (so that an LS under Missile marks its work beside a BE "
                        "that runs without Missile)")
    p.add_argument("--warmup-iters", type=int, default=3)
    p.add_argument("--profile-at", type=float, default=None,
                   help="seconds after 'ready' at which to profile the GPU timeline (put it in "
                        "the LS's warm-up: the profiled iterations are left out of the raw file)")
    p.add_argument("--profile-iters", type=int, default=10)
    p.add_argument("--raw-dir", default=".")
    a = p.parse_args(argv)
    if a.batch < 1 or a.copy_mib < 0 or a.seconds <= 0 or a.warmup_iters < 1 or a.profile_iters < 1:
        p.error("--batch, --seconds, --warmup-iters and --profile-iters must be positive, "
                "--copy-mib >= 0")
    if a.profile_at is not None and a.profile_at < 0:
        p.error("--profile-at must be >= 0")
    return a


def idle(a, torch, stopping):
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    print("ready", flush=True)
    deadline = time.monotonic() + a.seconds
    while not stopping[0] and time.monotonic() < deadline:
        if a.stop_file and os.path.exists(a.stop_file):
            break
        time.sleep(0.1)
    return 0


def run(a, torch, stopping):
    import torchvision
    if not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available")
    if a.idle:
        return idle(a, torch, stopping)
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    if a.model == "gemm":
        layers = []
        for _ in range(8):
            layers += [torch.nn.Linear(8192, 8192, bias=False), torch.nn.GELU()]
        model = torch.nn.Sequential(*layers).half().eval().cuda()
        x = torch.randn(a.batch, 8192, device="cuda", dtype=torch.float16)
    else:
        build = getattr(torchvision.models, a.model)
        try:
            with torch.device("cuda"):
                model = build(weights=None)
        except Exception:  # noqa: BLE001 - fall back to building on the CPU
            model = build(weights=None)
        model = model.half().eval().cuda()
        x = torch.randn(a.batch, 3, 224, 224, device="cuda", dtype=torch.float16)
    if a.copy_mib:
        pinned = torch.empty(a.copy_mib << 20, dtype=torch.uint8).pin_memory()
        pinned.fill_(1)
        dev = torch.empty_like(pinned, device="cuda")

    forward = lambda: model(x)  # noqa: E731
    if a.graph:
        # Warm up on a side stream (cuDNN picks its algorithms), then capture one forward pass.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                model(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            model(x)
        forward = graph.replay

    marks = [torch.cuda.Event(enable_timing=True) for _ in range(3)]

    def step():
        # When the host got back from the copy's call and from the forward pass's launches:
        # whether the job's CPU or the GPU sets its pace (a host that issues the launches more
        # slowly than the GPU runs them ends near the synchronize's return). The events give the
        # GPU's time for the copy and for the forward pass: a BE slowed on the GPU takes longer
        # between them, one starved by its host or held before its copy does not.
        marks[0].record()
        if a.copy_mib:
            dev.copy_(pinned, non_blocking=True)
        copied = time.time()
        marks[1].record()
        forward()
        issued = time.time()
        marks[2].record()
        torch.cuda.synchronize()
        return copied, issued, marks[0].elapsed_time(marks[1]), marks[1].elapsed_time(marks[2])

    t0 = time.perf_counter()
    for _ in range(a.warmup_iters):
        step()
    print(f"INFO {a.name}: {a.model} batch {a.batch}{' graph' if a.graph else ''}, copy {a.copy_mib} MiB, warm-up "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    print("ready", flush=True)

    iters = []  # (t_end, images, t_start, t_copied, t_issued, gpu copy ms, gpu forward ms)
    started = time.monotonic()
    deadline = started + a.seconds
    t_prev = time.time()
    profile_pending = a.profile_at is not None
    while not stopping[0] and time.monotonic() < deadline:
        if a.stop_file and os.path.exists(a.stop_file):
            break
        if profile_pending and time.monotonic() - started >= a.profile_at:
            profile_pending = False
            profile(a, torch, step)
            t_prev = time.time()
            continue
        copied, issued, gpu_copy, gpu_forward = step()
        t = time.time()
        iters.append((t, a.batch, t_prev, copied, issued, gpu_copy, gpu_forward))
        t_prev = t

    os.makedirs(a.raw_dir, exist_ok=True)
    path = os.path.join(a.raw_dir, be_raw_file_name(a.mode, a.name, a.run))
    with open(path, "w") as fh:
        fh.write("".join(f"{e:.6f} {n} {s:.6f} {c:.6f} {i:.6f} {gc:.3f} {gf:.3f}\n"
                         for e, n, s, c, i, gc, gf in iters))
    images = sum(it[1] for it in iters)
    seconds = (iters[-1][0] - iters[0][2]) if iters else 0.0
    print("BE " + json.dumps({
        "mode": a.mode, "name": a.name, "run": a.run, "model": a.model, "batch": a.batch,
        "copy_mib": a.copy_mib, "graph": a.graph, "iters": len(iters), "images": images,
        "seconds": round(seconds, 3), "img_per_s": round(images / seconds, 2) if seconds > 0 else None,
        "t_start": iters[0][2] if iters else None, "t_end": iters[-1][0] if iters else None,
        "stopped_by": "signal" if stopping[0] else ("stop-file" if a.stop_file and os.path.exists(a.stop_file)
                                                    else "seconds")}), flush=True)
    return 0


GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def timeline_summary(trace_events):
    """The GPU side of a chrome trace's events (torch.profiler's export): over the span from
    the first GPU event's start to the last one's end, the time some GPU event ran (busy, the
    union of their intervals), the rest (idle), the kernels' and the copies' summed durations,
    and per name the count and summed duration (us)."""
    gpu = sorted((e for e in trace_events if e.get("cat") in GPU_CATEGORIES and "dur" in e),
                 key=lambda e: e["ts"])
    if not gpu:
        return None, {}
    busy, cur_s, cur_e = 0.0, gpu[0]["ts"], gpu[0]["ts"] + gpu[0]["dur"]
    kernel_us = copy_us = 0.0
    by_name = {}
    for e in gpu:
        s, d = e["ts"], e["dur"]
        if s > cur_e:
            busy += cur_e - cur_s
            cur_s, cur_e = s, s + d
        else:
            cur_e = max(cur_e, s + d)
        if e["cat"] == "kernel":
            kernel_us += d
        else:
            copy_us += d
        n = by_name.setdefault(e["name"][:160], [0, 0.0])
        n[0] += 1
        n[1] += d
    busy += cur_e - cur_s
    span = max(e["ts"] + e["dur"] for e in gpu) - gpu[0]["ts"]
    summary = {"events": len(gpu), "span_us": round(span, 1), "busy_us": round(busy, 1),
               "idle_us": round(span - busy, 1), "kernel_us": round(kernel_us, 1),
               "copy_us": round(copy_us, 1)}
    return summary, {k: {"count": v[0], "us": round(v[1], 1)} for k, v in by_name.items()}


def profile(a, torch, step):
    """--profile-iters iterations under torch.profiler (CUDA activity); prints PROFILE {json}
    and writes the per-name totals next to the raw file. A profiler that fails is reported and
    the run goes on."""
    import tempfile
    try:
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as torch_profile
        t0 = time.time()
        with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(a.profile_iters):
                step()
        wall = time.time() - t0
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "trace.json")
            prof.export_chrome_trace(path)
            with open(path) as fh:
                trace = json.load(fh)
        events = trace.get("traceEvents", trace) if isinstance(trace, dict) else trace
        summary, by_name = timeline_summary(events)
        if summary is None:
            print(f"PROFILE {json.dumps({'mode': a.mode, 'error': 'no GPU events in the trace'})}",
                  flush=True)
            return
        summary.update({"mode": a.mode, "name": a.name, "iters": a.profile_iters,
                        "wall_ms": round(wall * 1000, 1)})
        print("PROFILE " + json.dumps(summary), flush=True)
        os.makedirs(a.raw_dir, exist_ok=True)
        out = os.path.join(a.raw_dir, be_raw_file_name(a.mode, a.name, a.run)[:-4] + "--profile.json")
        with open(out, "w") as fh:
            json.dump({"summary": summary, "by_name": by_name}, fh, indent=1, sort_keys=True)
    except Exception as e:  # noqa: BLE001 - a profiler that cannot run must not end the job
        print(f"PROFILE {json.dumps({'mode': a.mode, 'error': f'{type(e).__name__}: {e}'})}",
              flush=True)


def main(argv=None):
    a = parse_args(argv)
    stopping = [False]

    def on_signal(signum, _frame):  # finish the iteration, then write what was measured
        stopping[0] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        import torch
    except ImportError as e:
        print(f"ERROR be_job: cannot import torch: {e}", file=sys.stderr, flush=True)
        return 1
    try:
        with torch.no_grad():
            return run(a, torch, stopping)
    except Exception as e:  # noqa: BLE001 - report any failure clearly, exit non-zero
        print(f"ERROR be_job ({a.mode}/{a.name}): {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""What a paced BE's completion writes cost its own GPU time, outside Missile.

The shim reports a BE's work items done with cuStreamWriteValue64 on the item's stream (every
4th item at the default window, every quarter of a widened window's items, up to every 256th
once released, and before and after each item it counts as long; libintercept/pacer.cc;
"none" is the released BE's bound). This runs
the colocation BE's model (ResNet-152 fp16, batch 128, eval, no_grad, eager, cudnn.benchmark;
no copy) alone and times its iterations with a forward hook on every leaf module that does,
after the module's kernels are enqueued:
  none      nothing (no hook)
  hook      a Python no-op (the hooks' own host cost)
  every4    a stream write after every 4th module
  every1    a stream write after every module
  twice     two stream writes after every module (a long item's write before and after)
A leaf module is about one kernel, so every4 is about the shim's cadence for short items and
every1/twice its cadence when most items count as long. Prints one line per variant: the median
and range of --rounds rounds of --iters iterations, in images/s and as % of "none", and the
writes per iteration. Run it once plain and once as an MPS client to see both.
usage: write_cost.py [--iters 40] [--rounds 3] [--batch 128]
"""
import argparse
import ctypes
import statistics
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=40)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batch", type=int, default=128)
    a = p.parse_args()
    import torch
    import torchvision

    cuda = ctypes.CDLL("libcuda.so.1")
    write = None
    for name in ("cuStreamWriteValue64_v2", "cuStreamWriteValue64"):
        if hasattr(cuda, name):
            write = getattr(cuda, name)
            break
    if write is None:
        raise SystemExit("no cuStreamWriteValue64 in libcuda")
    write.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint]
    write.restype = ctypes.c_int

    torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet152().half().eval().cuda()
    x = torch.randn(a.batch, 3, 224, 224, device="cuda", dtype=torch.float16)
    target = torch.zeros(1, dtype=torch.int64, device="cuda")
    leaves = [m for m in model.modules() if not list(m.children())]
    stream = torch.cuda.current_stream().cuda_stream
    state = {"n": 0, "seq": 0, "writes": 0}

    def do_write():
        state["seq"] += 1
        state["writes"] += 1
        r = write(stream, target.data_ptr(), state["seq"], 0)
        if r != 0:
            raise RuntimeError(f"cuStreamWriteValue64: {r}")

    def hook_for(variant):
        def hook(_m, _i, _o):
            state["n"] += 1
            if variant == "every1" or (variant == "every4" and state["n"] % 4 == 0):
                do_write()
            elif variant == "twice":
                do_write()
                do_write()
        return hook

    def rate(variant, iters):
        handles = []
        if variant != "none":
            if variant == "hook":
                handles = [m.register_forward_hook(lambda *_: None) for m in leaves]
            else:
                handles = [m.register_forward_hook(hook_for(variant)) for m in leaves]
        state["writes"] = 0
        try:
            with torch.no_grad():
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(iters):
                    model(x)
                    torch.cuda.synchronize()
                dt = time.perf_counter() - t0
        finally:
            for h in handles:
                h.remove()
        return a.batch * iters / dt, state["writes"] / iters

    variants = ["none", "hook", "every4", "every1", "twice"]
    rate("none", 5)  # cuDNN picks its algorithms
    results = {v: [] for v in variants}
    per_iter = {}
    for _ in range(a.rounds):
        for v in variants:  # interleaved, so drift hits every variant alike
            r, w = rate(v, a.iters)
            results[v].append(r)
            per_iter[v] = w
    base = statistics.median(results["none"])
    print(f"leaf modules {len(leaves)}, batch {a.batch}, {a.rounds} rounds of {a.iters} iterations")
    print("variant  writes/iter  img/s median (range)        % of none")
    for v in variants:
        m = statistics.median(results[v])
        print(f"{v:8s} {per_iter[v]:11.0f}  {m:8.1f} ({min(results[v]):.1f}-{max(results[v]):.1f})"
              f"  {100 * m / base:6.1f}")


if __name__ == "__main__":
    main()

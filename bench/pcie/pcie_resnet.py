"""LS service for bench/pcie: ResNet-50 fp16 batch 1 with random weights, one request every
5 ms: pinned input copied host-to-device, CUDA-graph forward, output copied device-to-host.
Prints the end-to-end latency p50/p99 over --seconds. --copies picks which copies a request
makes (both, in, out, none), to tell interference on the copies from interference on the kernels.
"""
import argparse
import time

import torch
import torchvision


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--tag", default="")
    p.add_argument("--copies", choices=["both", "in", "out", "none"], default="both")
    a = p.parse_args()
    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).half().eval().cuda()
    host_in = torch.randn(1, 3, 224, 224, dtype=torch.float16).pin_memory()
    host_out = torch.empty(1, 1000, dtype=torch.float16).pin_memory()
    static_in = torch.empty_like(host_in, device="cuda")
    s = torch.cuda.Stream()
    with torch.no_grad():
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                model(static_in)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_out = model(static_in)
    print("ready", flush=True)
    samples = []
    end = time.perf_counter() + a.seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        if a.copies in ("both", "in"):
            static_in.copy_(host_in, non_blocking=True)
        g.replay()
        if a.copies in ("both", "out"):
            host_out.copy_(static_out, non_blocking=True)
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - t0) * 1e3)
        time.sleep(0.005)
    samples.sort()
    print(f"RESULT {a.tag} resnet50 e2e n={len(samples)} p50_ms={samples[len(samples) // 2]:.3f} "
          f"p99_ms={samples[int(0.99 * (len(samples) - 1) + 0.5)]:.3f}", flush=True)


if __name__ == "__main__":
    main()

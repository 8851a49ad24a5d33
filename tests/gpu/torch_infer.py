"""One inference pass of a torchvision model with random weights, for interception checks.

Seeds everything, runs fp16 inference on the GPU (eager, then a CUDA-graph replay) and saves the
outputs, so that a run under libmissile.so can be compared bit for bit with a plain run.
usage: torch_infer.py OUT.pt [--model resnet50] [--batch 8]
"""
import argparse
import os

import torch
import torchvision


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch", type=int, default=8)
    a = p.parse_args()

    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    model = getattr(torchvision.models, a.model)(weights=None).half().eval().cuda()
    host = torch.randn(a.batch, 3, 224, 224, dtype=torch.float16).pin_memory()
    static_in = torch.empty_like(host, device="cuda")
    with torch.no_grad():
        static_in.copy_(host, non_blocking=True)
        eager = model(static_in).float().cpu()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                model(static_in)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = model(static_in)
        static_in.copy_(host, non_blocking=True)
        graph.replay()
        graphed = static_out.float().cpu()
    torch.cuda.synchronize()
    torch.save({"eager": eager, "graph": graphed}, a.out)
    alloc = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "default")
    print(f"{a.model} batch {a.batch} alloc={alloc}: eager sum {eager.sum().item():.6f} "
          f"graph sum {graphed.sum().item():.6f} "
          f"max memory {torch.cuda.max_memory_allocated() >> 20} MiB")


if __name__ == "__main__":
    main()

"""Inference with random weights, for checking Missile under real PyTorch.

Seeds everything, runs fp16 inference on the GPU (eager, then a CUDA-graph replay) and saves the
outputs, so that a run under Missile can be compared bit for bit with a plain run.
usage: torch_infer.py OUT.pt [--model resnet50|bert] [--batch 8] [--hold-seconds S]
                             [--loop-seconds S] [--expect-oom]
  --hold-seconds S  after inference, print "holding" and keep the memory for S seconds
  --loop-seconds S  keep running inference for S seconds and report how many passes succeeded
  --expect-oom      the run is expected to hit torch.cuda.OutOfMemoryError: print it, exit 0
"""
import argparse
import os
import sys
import time

import torch
import torchvision


class Bert(torch.nn.Module):
    """A BERT-base-shaped encoder: 12 layers, 768 wide, 12 heads, 30522-token vocabulary."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(30522, 768)
        self.pos = torch.nn.Embedding(512, 768)
        layer = torch.nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, batch_first=True,
                                                 activation="gelu")
        self.encoder = torch.nn.TransformerEncoder(layer, 12, enable_nested_tensor=False)
        self.head = torch.nn.Linear(768, 2)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.embed(tokens) + self.pos(positions)[None]
        return self.head(self.encoder(x)[:, 0])


def build(model_name, batch):
    torch.manual_seed(0)
    if model_name == "bert":
        model = Bert()
        host = torch.randint(0, 30522, (batch, 128)).pin_memory()
    else:
        model = getattr(torchvision.models, model_name)(weights=None)
        host = torch.randn(batch, 3, 224, 224, dtype=torch.float16).pin_memory()
    return model.half().eval().cuda(), host


def capture_graph(model, static_in):
    """Warms the model up on a side stream and captures one forward pass of static_in as a CUDA
    graph (no_grad is the caller's): returns the graph and its output tensor."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            model(static_in)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = model(static_in)
    return graph, static_out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--hold-seconds", type=float, default=0)
    p.add_argument("--loop-seconds", type=float, default=0)
    p.add_argument("--expect-oom", action="store_true")
    a = p.parse_args()
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    alloc = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "default")
    free_b, total_b = torch.cuda.mem_get_info()
    print(f"{a.model}: cuda sees total {total_b >> 20} MiB, free {free_b >> 20} MiB", flush=True)
    try:
        model, host = build(a.model, a.batch)
        static_in = torch.empty_like(host, device="cuda")
        with torch.no_grad():
            static_in.copy_(host, non_blocking=True)
            eager = model(static_in).float().cpu()
            graph, static_out = capture_graph(model, static_in)
            static_in.copy_(host, non_blocking=True)
            graph.replay()
            graphed = static_out.float().cpu()
            passes = 0
            deadline = time.time() + a.loop_seconds
            while time.time() < deadline:
                static_in.copy_(host, non_blocking=True)
                graph.replay()
                torch.cuda.synchronize()
                passes += 1
            if a.loop_seconds:
                same = torch.equal(static_out.float().cpu(), graphed)
                print(f"{a.model}: {passes} passes in {a.loop_seconds:.0f} s, last output "
                      f"{'unchanged' if same else 'CHANGED'}", flush=True)
    except torch.cuda.OutOfMemoryError as e:
        first = str(e).splitlines()[0]
        print(f"{a.model}: torch.cuda.OutOfMemoryError: {first}", flush=True)
        sys.exit(0 if a.expect_oom else 3)
    if a.expect_oom:
        print(f"{a.model}: expected an out-of-memory error and got none", flush=True)
        sys.exit(4)
    torch.cuda.synchronize()
    torch.save({"eager": eager, "graph": graphed}, a.out)
    print(f"{a.model} batch {a.batch} alloc={alloc}: eager sum {eager.sum().item():.6f} "
          f"graph sum {graphed.sum().item():.6f} "
          f"max memory {torch.cuda.max_memory_allocated() >> 20} MiB", flush=True)
    if a.hold_seconds:
        print("holding", flush=True)
        time.sleep(a.hold_seconds)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""What MPS by itself costs an LS: the LS scenarios of ls_service.py alone, each request timed
on the host (wall, as ls_service.py measures it) and on the GPU (CUDA events around the
request's work, before the host waits), so a difference between running as an MPS client and
not shows as longer GPU work (the kernels run slower) or as a longer host round trip (launch and
completion). Also the round trip of one tiny kernel and a stream synchronize.

usage: mps_cost.py --tag TAG [--seconds S] [--scenarios resnet50-graph,resnet50-eager,decode-graph]
Prints one line "MPSCOST {json}" per scenario: tag, scenario, n, wall and GPU p50/p99 in ms.
Run it once with and once without an MPS control daemon (bench/run_mps_cost_on_gpu.sh).
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ls_service import (DECODE_TOKENS, MAIN_SCENARIOS, DecodeServed, load_served)  # noqa: E402
from report import summarize  # noqa: E402


def _gpu_events(torch, n):
    return [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(n)]


def timed_request(torch, srv, events):
    """One request as ls_service.py serves it; returns (wall ms, GPU ms). The GPU time is the
    span of the request's work on its stream; for the decoder, the sum of its token replays'
    spans (the host waits after each token, which is not GPU work)."""
    stream = torch.cuda.current_stream()
    t0 = time.perf_counter()
    if isinstance(srv, DecodeServed):
        srv.tok.copy_(srv.host_tok, non_blocking=True)
        srv.pos.zero_()
        for i in range(DECODE_TOKENS):
            events[i][0].record(stream)
            srv.graph.replay()
            events[i][1].record(stream)
            srv.host_out.copy_(srv.tok, non_blocking=True)
            stream.synchronize()
        wall = (time.perf_counter() - t0) * 1e3
        return wall, sum(a.elapsed_time(b) for a, b in events[:DECODE_TOKENS])
    events[0][0].record(stream)
    srv.static_in.copy_(srv.host_in, non_blocking=True)
    out = srv.static_out if srv.graph is not None else srv.forward(srv.model, srv.static_in)
    if srv.graph is not None:
        srv.graph.replay()
    srv.host_out.copy_(out, non_blocking=True)
    events[0][1].record(stream)
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) * 1e3
    return wall, events[0][0].elapsed_time(events[0][1])


def round_trip(torch, seconds):
    """Wall ms of one one-element add and a synchronize, back to back."""
    x = torch.zeros(1, device="cuda")
    lat = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        x.add_(1)
        torch.cuda.synchronize()
        lat.append((time.perf_counter() - t0) * 1e3)
    return lat


def synthetic(torch, seconds):
    """GPU ms of four kinds of work, each a sequence of kernels timed by events on one stream:
    long kernels (fp16 GEMMs of 4096^3) and tiny ones (a one-element add), each launched
    eagerly and as one CUDA graph. A cost per kernel shows in the tiny ones, slower kernels in
    the long ones; launched eagerly the tiny ones are bound by the host."""
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    c = torch.empty_like(a)
    x = torch.zeros(1, device="cuda")

    def gemms():
        for _ in range(20):
            torch.mm(a, b, out=c)

    def tinies():
        for _ in range(2000):
            x.add_(1)

    out = []
    for name, body in (("gemm20", gemms), ("tiny2000", tinies)):
        body()
        torch.cuda.synchronize()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            body()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            body()
        for launch, run in (("eager", body), ("graph", g.replay)):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            spans = []
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                e0.record()
                run()
                e1.record()
                torch.cuda.synchronize()
                spans.append(e0.elapsed_time(e1))
            s = summarize(spans)
            out.append({"scenario": f"{name}-{launch}", "n": s["n"],
                        "gpu_p50": round(s["p50_ms"], 4), "gpu_p99": round(s["p99_ms"], 4)})
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tag", required=True)
    p.add_argument("--seconds", type=float, default=4)
    p.add_argument("--think-ms", type=float, default=5.0)
    p.add_argument("--scenarios", default="resnet50-graph,resnet50-eager,decode-graph")
    a = p.parse_args(argv)
    import torch
    with torch.no_grad():
        modules = {}
        events = _gpu_events(torch, DECODE_TOKENS)
        for scen in filter(None, a.scenarios.split(",")):
            model, graph = MAIN_SCENARIOS[scen]
            srv = load_served(torch, model, graph, modules)
            end = time.perf_counter() + 1.0
            while time.perf_counter() < end:
                timed_request(torch, srv, events)
            walls, gpus = [], []
            end = time.perf_counter() + a.seconds
            while time.perf_counter() < end:
                w, g = timed_request(torch, srv, events)
                walls.append(w)
                gpus.append(g)
                time.sleep(a.think_ms / 1e3)
            sw, sg = summarize(walls), summarize(gpus)
            print("MPSCOST " + json.dumps({
                "tag": a.tag, "scenario": scen, "n": sw["n"],
                "wall_p50": round(sw["p50_ms"], 4), "wall_p99": round(sw["p99_ms"], 4),
                "gpu_p50": round(sg["p50_ms"], 4), "gpu_p99": round(sg["p99_ms"], 4)}), flush=True)
        for r in synthetic(torch, 1.0):
            print("MPSCOST " + json.dumps({"tag": a.tag, **r, "wall_p50": None, "wall_p99": None}),
                  flush=True)
        rt = summarize(round_trip(torch, 2.0))
        print("MPSCOST " + json.dumps({
            "tag": a.tag, "scenario": "round-trip", "n": rt["n"],
            "wall_p50": round(rt["p50_ms"], 4), "wall_p99": round(rt["p99_ms"], 4)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""LS (latency-sensitive) service for bench/colocation: batch-1 fp16 inference with random
weights, several scenarios one after another in one process.

Scenarios (--scenarios, comma separated):
  resnet50-graph   ResNet-50 1x3x224x224, CUDA graph; closed loop, --think-ms (5) between requests
                   (every main scenario: or at a fixed rate, one request due every --period-ms,
                   latency from when it was due, as in the sweep's open loop)
  bert-graph       BERT-base, sequence 128, CUDA graph; closed loop
  resnet50-eager   ResNet-50 without a graph (eager); closed loop
  decode-graph     a GPT-shaped decoder (12 layers, width 1024, KV cache of 512) generating 32
                   tokens per request, one CUDA graph replay per token, each token copied to the
                   host as it comes (streamed); closed loop
  sweep:<model>    <model> as a CUDA graph, open loop: Poisson arrivals at --load x the model's
                   solo capacity (1 / solo mean latency); latency = completion - scheduled arrival,
                   so queueing counts. Models: see SWEEP_MODELS below.
A request: pinned host input copied host-to-device (non_blocking), forward (graph replay or
eager), output copied device-to-host into pinned memory, torch.cuda.synchronize().

Protocol (stdout): every model is built and captured first, then (sweep scenarios without
--rates) solo capacities are measured and written to --write-rates; then the line "ready"; then,
with --wait-file, the service waits for that file to exist (the runner creates it once the BE
jobs run); then per scenario 1 s of warm-up (--warmup-seconds), the measured window, and a line
"RESULT {json}" (mode, scenario, n, p50_ms, p99_ms, p999_ms, mean_ms, max_ms, t_start, t_end, ...)
with all latencies written to --raw-dir/<mode>__<scenario>.txt (':' -> '_'), ms per line (closed-loop
scenarios add each request's start, Unix seconds, as a second column). A model
that cannot be built or captured gives "SKIP <model> <reason>" and is left out.
Exit status: 0 all scenarios measured, 2 some skipped, 1 error, 3 wait file never appeared.
"""
import argparse
import json
import os
import random
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import raw_file_name, summarize  # noqa: E402  (stdlib-only helpers)

MAIN_SCENARIOS = {
    # scenario: (model, as a CUDA graph)
    "resnet50-graph": ("resnet50", True),
    "bert-graph": ("bert", True),
    "resnet50-eager": ("resnet50", False),
    "decode-graph": ("gptdecode", True),
}
DECODE_TOKENS = 32
SWEEP_PREFIX = "sweep:"


# ---------------------------------------------------------------- models

def _torchvision(name, **kwargs):
    def build():
        import torchvision
        return getattr(torchvision.models, name)(weights=None, **kwargs)
    return build


def _hf_config(cls, attn, **kwargs):
    """A transformers config with the attention implementation `attn`, whichever way this
    transformers version takes it."""
    try:
        cfg = cls(attn_implementation=attn, **kwargs)
    except TypeError:
        cfg = cls(**kwargs)
    try:
        cfg._attn_implementation = attn
    except Exception:  # noqa: BLE001 - older versions: the attribute is plain or absent
        pass
    return cfg


def _quiet_transformers():
    import transformers
    try:
        transformers.logging.set_verbosity_error()
    except Exception:  # noqa: BLE001
        pass


def _bert(attn):
    def build():
        _quiet_transformers()
        from transformers import BertConfig, BertModel
        # pad_token_id=None: no "padding without attention mask" check, which reads the input
        # on the host (a synchronization, illegal inside a graph capture).
        return BertModel(_hf_config(BertConfig, attn, pad_token_id=None))
    return build


def _gpt2(attn):
    def build():
        _quiet_transformers()
        from transformers import GPT2Config, GPT2Model
        return GPT2Model(_hf_config(GPT2Config, attn))
    return build


def _fwd_vision(model, x):
    return model(x)


def _fwd_bert(model, x):
    out = model(input_ids=x)
    pooled = getattr(out, "pooler_output", None)
    return pooled if pooled is not None else out[0][:, 0]


def _fwd_gpt2(model, x):
    return model(input_ids=x, use_cache=False)[0][:, -1]


def _image(size):
    return ("image", size)


def _tokens(seq, vocab):
    return ("tokens", seq, vocab)


# model: (candidate builds tried in order as (label, build), input spec, forward).
# Transformers models try SDPA attention first and fall back to eager attention when SDPA's mask
# handling synchronizes (some versions test the mask on the host), which a graph cannot hold.
MODELS = {
    "resnet50": ([("", _torchvision("resnet50"))], _image(224), _fwd_vision),
    "resnet152": ([("", _torchvision("resnet152"))], _image(224), _fwd_vision),
    "mobilenet_v3_large": ([("", _torchvision("mobilenet_v3_large"))], _image(224), _fwd_vision),
    "efficientnet_b0": ([("", _torchvision("efficientnet_b0"))], _image(224), _fwd_vision),
    "densenet121": ([("", _torchvision("densenet121"))], _image(224), _fwd_vision),
    "inception_v3": ([("", _torchvision("inception_v3", aux_logits=False, init_weights=False))],
                     _image(299), _fwd_vision),
    "vit_b_16": ([("", _torchvision("vit_b_16"))], _image(224), _fwd_vision),
    "convnext_tiny": ([("", _torchvision("convnext_tiny"))], _image(224), _fwd_vision),
    "swin_t": ([("", _torchvision("swin_t"))], _image(224), _fwd_vision),
    "regnet_y_8gf": ([("", _torchvision("regnet_y_8gf"))], _image(224), _fwd_vision),
    "vgg16": ([("", _torchvision("vgg16"))], _image(224), _fwd_vision),
    "bert": ([("sdpa", _bert("sdpa")), ("eager", _bert("eager"))], _tokens(128, 30522), _fwd_bert),
    "gpt2": ([("sdpa", _gpt2("sdpa")), ("eager", _gpt2("eager"))], _tokens(128, 50257), _fwd_gpt2),
}


def build_decoder(torch, layers=12, width=1024, heads=16, ctx=512, vocab=50257):
    """A GPT-shaped decoder for one token at a time with a static KV cache: forward(tok, pos)
    appends the token's keys and values at position pos, attends over positions <= pos, and
    returns the next token (greedy). Everything stays on the GPU, so one step is one graph."""
    nn, F = torch.nn, torch.nn.functional
    dh = width // heads

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
            self.register_buffer("k", torch.zeros(1, heads, ctx, dh))
            self.register_buffer("v", torch.zeros(1, heads, ctx, dh))

        def forward(self, x, pos, mask):
            q, k, v = self.qkv(self.ln1(x)).view(1, 1, 3, heads, dh).unbind(2)
            self.k.index_copy_(2, pos, k.transpose(1, 2))
            self.v.index_copy_(2, pos, v.transpose(1, 2))
            a = F.scaled_dot_product_attention(q.transpose(1, 2), self.k, self.v, attn_mask=mask)
            x = x + self.proj(a.transpose(1, 2).reshape(1, 1, width))
            return x + self.down(F.gelu(self.up(self.ln2(x))))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.pos_emb = nn.Embedding(vocab, width), nn.Embedding(ctx, width)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln, self.head = nn.LayerNorm(width), nn.Linear(width, vocab, bias=False)
            self.register_buffer("slots", torch.arange(ctx))

        def forward(self, tok, pos):
            x = self.emb(tok) + self.pos_emb(pos).view(1, 1, width)
            mask = (self.slots <= pos).view(1, 1, 1, ctx)
            for b in self.blocks:
                x = b(x, pos, mask)
            return self.head(self.ln(x)).argmax(-1)

    return Decoder


class DecodeServed:
    """The decode-graph scenario's model: a request sets a prompt token and position 0, then
    replays the one-token graph DECODE_TOKENS times; after each replay the new token is copied
    to pinned host memory and the host waits for it, as a server streaming tokens does."""

    def __init__(self, torch, model):
        self.torch, self.name = torch, "gptdecode"
        self.model = model
        self.host_tok = torch.tensor([[17]], dtype=torch.int64).pin_memory()
        self.host_out = torch.empty((1, 1), dtype=torch.int64).pin_memory()
        self.tok = torch.zeros((1, 1), dtype=torch.int64, device="cuda")
        self.pos = torch.zeros((1,), dtype=torch.int64, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), forbid_syncs(torch):
            for _ in range(3):
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._step()
        self.request()

    def _step(self):
        nxt = self.model(self.tok, self.pos)
        self.tok.copy_(nxt)
        self.pos.add_(1)

    def request(self):
        torch = self.torch
        self.tok.copy_(self.host_tok, non_blocking=True)
        self.pos.zero_()
        stream = torch.cuda.current_stream()
        for _ in range(DECODE_TOKENS):
            self.graph.replay()
            self.host_out.copy_(self.tok, non_blocking=True)
            stream.synchronize()


class SkipModel(Exception):
    """A model that cannot be served here (build or capture failed)."""


def build_module(torch, build):
    """The model in fp16 eval mode on the GPU, built there directly where possible (random
    initialization of large models is slow on the CPU)."""
    torch.manual_seed(0)
    try:
        with torch.device("cuda"):
            model = build()
    except Exception:  # noqa: BLE001 - fall back to building on the CPU
        torch.manual_seed(0)
        model = build()
    return model.half().eval().cuda()


def make_host_input(torch, spec):
    gen = torch.Generator().manual_seed(0)
    if spec[0] == "image":
        x = torch.randn(1, 3, spec[1], spec[1], generator=gen).half()
    else:
        x = torch.randint(0, spec[2], (1, spec[1]), generator=gen, dtype=torch.int64)
    return x.pin_memory()


def forbid_syncs(torch):
    """Context: any synchronizing CUDA call raises (torch's sync debug mode), so a model whose
    forward reads the GPU on the host is found before a capture, which such a read would break."""
    class _Ctx:
        def __enter__(self):
            self.set = getattr(torch.cuda, "set_sync_debug_mode", None)
            if self.set:
                self.set("error")

        def __exit__(self, *exc):
            if self.set:
                self.set("default")
            return False
    return _Ctx()


class Served:
    """One model ready for batch-1 requests: pinned host input and output, a static device input
    and either a captured CUDA graph or the eager forward."""

    def __init__(self, torch, name, model, forward, host_in, graph):
        self.torch, self.name, self.model, self.forward = torch, name, model, forward
        self.host_in = host_in
        self.static_in = torch.empty_like(host_in, device="cuda")
        self.static_in.copy_(host_in)
        self.graph = None
        # Warm-up on a side stream (as graph capture wants); the 2nd and 3rd passes must not
        # synchronize, or the forward cannot be captured.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            out = forward(model, self.static_in)
            if graph:
                with forbid_syncs(torch):
                    for _ in range(2):
                        out = forward(model, self.static_in)
            else:
                out = forward(model, self.static_in)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        if graph:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                out = forward(model, self.static_in).contiguous()
            self.graph, self.static_out = g, out
        self.host_out = torch.empty(tuple(out.shape), dtype=out.dtype).pin_memory()
        self.request()  # one full request, graph replay included, before anything is timed

    def request(self):
        """One request, end to end; returns when its output is in host memory."""
        torch = self.torch
        self.static_in.copy_(self.host_in, non_blocking=True)
        if self.graph is not None:
            self.graph.replay()
            out = self.static_out
        else:
            out = self.forward(self.model, self.static_in)
        self.host_out.copy_(out, non_blocking=True)
        torch.cuda.synchronize()


def load_served(torch, model_name, graph, modules):
    """A Served for model_name (graph or eager); modules caches built nn.Modules by name so
    the graph and eager ResNet-50 scenarios share one. Raises SkipModel."""
    if model_name == "gptdecode":
        try:
            torch.manual_seed(0)
            with torch.device("cuda"):
                model = build_decoder(torch)()
            return DecodeServed(torch, model.half().eval())
        except Exception as e:  # noqa: BLE001 - skip the scenario, say why
            torch.cuda.synchronize()
            raise SkipModel(f"decoder: {type(e).__name__}: {e}") from e
    candidates, spec, forward = MODELS[model_name]
    reasons = []
    for label, build in candidates:
        key = (model_name, label)
        try:
            if key not in modules:
                modules[key] = build_module(torch, build)
            return Served(torch, model_name, modules[key], forward, make_host_input(torch, spec), graph)
        except Exception as e:  # noqa: BLE001 - try the next candidate, else skip the model
            reasons.append(f"{label or 'build'}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            modules.pop(key, None)
            torch.cuda.synchronize()  # raises if the failure broke the CUDA context
            torch.cuda.empty_cache()
    raise SkipModel("; ".join(reasons))


# ---------------------------------------------------------------- load generators

def sleep_until(t):
    """Sleeps until time.perf_counter() >= t: time.sleep for all but the last 0.5 ms, then spins
    (time.sleep alone overshoots by up to ~0.1 ms)."""
    while True:
        dt = t - time.perf_counter()
        if dt <= 0:
            return
        if dt > 0.001:
            time.sleep(dt - 0.0005)


def closed_loop(served, seconds, think_s, starts=None):
    """Requests back to back with think_s between them for `seconds`; latencies in ms. With a
    list `starts`, each request's start (Unix seconds) is appended to it, so a slow request can
    be set beside what the other tenants did at that moment (tail_events.py)."""
    lat = []
    end = time.perf_counter() + seconds
    while True:
        t0 = time.perf_counter()
        if t0 >= end:
            return lat
        if starts is not None:
            starts.append(time.time())
        served.request()
        lat.append((time.perf_counter() - t0) * 1e3)
        if think_s > 0:
            time.sleep(think_s)


def open_loop(served, seconds, next_gap, overrun_s, starts=None):
    """Arrivals scheduled over `seconds`, next_gap() seconds apart (poisson_gaps: a Poisson
    process; a constant: a fixed rate, --period-ms), served in order by this one thread;
    latency = completion - scheduled arrival, in ms, so queueing counts. Serving stops overrun_s
    after the window: arrivals not served by then are counted as dropped (the service fell
    behind its arrival rate). With a list `starts`, each request's start (Unix seconds) is
    appended to it, as in closed_loop. Returns (latencies, arrivals, dropped)."""
    start = time.perf_counter()
    end, cutoff = start + seconds, start + seconds + overrun_s
    lat, arrivals = [], 0
    arrival = start + next_gap()
    while arrival < end:
        arrivals += 1
        if time.perf_counter() <= cutoff:
            sleep_until(arrival)
            if starts is not None:
                starts.append(time.time())
            served.request()
            lat.append((time.perf_counter() - arrival) * 1e3)
        arrival += next_gap()
    return lat, arrivals, arrivals - len(lat)


def poisson_gaps(mean_gap_s, rng):
    """open_loop's gaps of a Poisson process of mean gap mean_gap_s, drawn from `rng`."""
    return lambda: rng.expovariate(1.0 / mean_gap_s)



def measure_capacity(served, n=200, warm=20):
    """Mean latency (ms) of n back-to-back requests after `warm` of them."""
    for _ in range(warm):
        served.request()
    t0 = time.perf_counter()
    for _ in range(n):
        served.request()
    return (time.perf_counter() - t0) * 1e3 / n


# ---------------------------------------------------------------- main

def parse_args(argv=None):
    p = argparse.ArgumentParser(description="LS service for bench/colocation")
    p.add_argument("--mode", required=True, help="tag of the run (alone, none, mps, missile, ...)")
    p.add_argument("--scenarios", required=True, help="comma list: " + ", ".join(MAIN_SCENARIOS)
                   + ", sweep:<model> with model in " + ", ".join(MODELS))
    p.add_argument("--seconds", type=float, default=8, help="measured window of a main scenario")
    p.add_argument("--sweep-seconds", type=float, default=4, help="measured window of a sweep scenario")
    p.add_argument("--warmup-seconds", type=float, default=1.0)
    p.add_argument("--windows", type=int, default=1,
                   help="measured windows of each main scenario, back to back after one warm-up; "
                        "the k-th (k > 1) is reported as scenario SCEN@k")
    p.add_argument("--think-ms", type=float, default=5.0, help="closed loop: pause between requests")
    p.add_argument("--period-ms", type=float, default=0.0,
                   help="main scenarios: a request due every PERIOD ms (fixed rate, latency from "
                        "when it was due) instead of --think-ms after the last one; 0: closed loop")
    p.add_argument("--load", type=float, default=0.3, help="open loop: arrival rate / solo capacity")
    p.add_argument("--rates", help="JSON {model: solo mean latency ms} (from --write-rates)")
    p.add_argument("--write-rates", help="measure solo capacities here and write them to FILE")
    p.add_argument("--rates-only", action="store_true", help="only measure and write --write-rates")
    p.add_argument("--seed", type=int, default=0, help="seed of the arrival process")
    p.add_argument("--raw-dir", default=".", help="where the raw latencies go")
    p.add_argument("--wait-file", help="after 'ready', wait until this file exists")
    p.add_argument("--wait-timeout", type=float, default=300, help="seconds to wait for --wait-file")
    a = p.parse_args(argv)
    a.scenario_list = [s.strip() for s in a.scenarios.split(",") if s.strip()]
    for s in a.scenario_list:
        if s in MAIN_SCENARIOS:
            continue
        if s.startswith(SWEEP_PREFIX) and s[len(SWEEP_PREFIX):] in MODELS:
            continue
        p.error(f"unknown scenario '{s}'")
    if not a.scenario_list:
        p.error("no scenarios")
    if a.rates_only and not a.write_rates:
        p.error("--rates-only needs --write-rates")
    if not (0 < a.load < 1.5):
        p.error("--load must be in (0, 1.5)")
    if not (a.period_ms == 0 or 1 <= a.period_ms <= 10000):
        p.error("--period-ms must be 0 (closed loop) or in [1, 10000]")
    return a


def say(*parts):
    print(*parts, flush=True)


def run(a):
    import torch
    if not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available")
    torch.backends.cudnn.benchmark = False
    say(f"INFO torch {torch.__version__} cuda {torch.version.cuda} device "
        f"{torch.cuda.get_device_name(0)} mode {a.mode}")
    os.makedirs(a.raw_dir, exist_ok=True)

    # 1. Build and capture everything the scenarios need, before any measurement.
    modules, served, skipped = {}, {}, []
    for scen in a.scenario_list:
        model, graph = (MAIN_SCENARIOS[scen] if scen in MAIN_SCENARIOS
                        else (scen[len(SWEEP_PREFIX):], True))
        if (model, graph) in served:
            continue
        t0 = time.perf_counter()
        try:
            served[(model, graph)] = load_served(torch, model, graph, modules)
            say(f"INFO loaded {model} {'graph' if graph else 'eager'} in {time.perf_counter() - t0:.1f} s")
        except SkipModel as e:
            say(f"SKIP {model} ({a.mode}, {'graph' if graph else 'eager'}): {e}")
            skipped.append(scen)

    # 2. Solo capacities of the sweep models: from --rates, else measured now (LS alone).
    sweep = [s for s in a.scenario_list if s.startswith(SWEEP_PREFIX) and s not in skipped]
    rates = {}
    if sweep and a.rates and not a.rates_only:
        with open(a.rates) as fh:
            rates = json.load(fh)
    elif sweep:
        for s in sweep:
            m = s[len(SWEEP_PREFIX):]
            rates[m] = measure_capacity(served[(m, True)])
            say(f"INFO solo {m}: mean {rates[m]:.3f} ms, capacity {1e3 / rates[m]:.0f} req/s")
        if a.write_rates:
            tmp = a.write_rates + ".tmp"
            with open(tmp, "w") as fh:
                json.dump(rates, fh, indent=1, sort_keys=True)
            os.replace(tmp, a.write_rates)
            say(f"INFO wrote {a.write_rates}")
        if a.rates_only:
            return 0
    for s in list(sweep):
        m = s[len(SWEEP_PREFIX):]
        if not isinstance(rates.get(m), (int, float)) or rates[m] <= 0:
            say(f"SKIP {m} ({a.mode}): no solo latency for it in {a.rates}")
            sweep.remove(s)
            skipped.append(s)
    todo = [s for s in a.scenario_list if s not in skipped]
    if not todo:
        raise RuntimeError("nothing to run: every scenario was skipped")

    # 3. Ready; wait for the go.
    say("ready")
    if a.wait_file:
        deadline = time.monotonic() + a.wait_timeout
        while not os.path.exists(a.wait_file):
            if time.monotonic() > deadline:
                print(f"ERROR ls_service: {a.wait_file} did not appear within {a.wait_timeout:.0f} s",
                      file=sys.stderr, flush=True)
                return 3
            time.sleep(0.01)

    # 4. The scenarios, one after another (a main one for --windows windows).
    runs = []
    for scen in todo:
        if scen in MAIN_SCENARIOS:
            runs += [(scen, k) for k in range(1, max(1, a.windows) + 1)]
        else:
            runs.append((scen, 1))
    for base, k in runs:
        scen = base if k == 1 else f"{base}@{k}"
        extra = {}
        if base in MAIN_SCENARIOS:
            model, graph = MAIN_SCENARIOS[base]
            srv = served[(model, graph)]
            starts = []
            if a.period_ms > 0:
                # A fixed rate: every mode serves the same requests (a closed loop gives an LS
                # that runs faster more of them, and so more of the GPU).
                period_s = a.period_ms / 1e3
                if k == 1:
                    open_loop(srv, a.warmup_seconds, lambda: period_s, a.warmup_seconds)
                t_start = time.time()
                lat, arrivals, dropped = open_loop(srv, a.seconds, lambda: period_s, a.seconds,
                                                   starts)
                t_end = time.time()
                extra = {"loop": "fixed-rate", "period_ms": a.period_ms, "arrivals": arrivals,
                         "dropped": dropped, "graph": graph, "window": k}
            else:
                if k == 1:
                    closed_loop(srv, a.warmup_seconds, a.think_ms / 1e3)
                t_start = time.time()
                lat = closed_loop(srv, a.seconds, a.think_ms / 1e3, starts)
                t_end = time.time()
                extra = {"loop": "closed", "think_ms": a.think_ms, "graph": graph, "window": k}
        else:
            starts = None
            model = scen[len(SWEEP_PREFIX):]
            srv = served[(model, True)]
            mean_gap = rates[model] / 1e3 / a.load
            # String seeds are hashed deterministically: the same arrivals in every mode.
            open_loop(srv, a.warmup_seconds,
                      poisson_gaps(mean_gap, random.Random(f"{a.seed}:{model}:warm")),
                      a.warmup_seconds)
            t_start = time.time()
            gaps = poisson_gaps(mean_gap, random.Random(f"{a.seed}:{model}"))
            lat, arrivals, dropped = open_loop(srv, a.sweep_seconds, gaps, a.sweep_seconds)
            t_end = time.time()
            extra = {"loop": "open", "model": model, "load": a.load, "solo_mean_ms": rates[model],
                     "rate_hz": 1.0 / mean_gap, "arrivals": arrivals, "dropped": dropped}
        stats = summarize(lat)
        result = {"mode": a.mode, "scenario": scen, "n": stats["n"]}
        for k in ("p50_ms", "p99_ms", "p999_ms", "mean_ms", "max_ms"):
            result[k] = round(stats[k], 4) if stats["n"] else None
        result.update({"t_start": round(t_start, 6), "t_end": round(t_end, 6)})
        result.update(extra)
        with open(os.path.join(a.raw_dir, raw_file_name(a.mode, scen)), "w") as fh:
            if starts:  # "latency_ms start_unix_s"; readers take the first column
                fh.write("".join(f"{x:.4f} {t:.6f}\n" for x, t in zip(lat, starts)))
            else:
                fh.write("".join(f"{x:.4f}\n" for x in lat))
        say("RESULT " + json.dumps(result))
    return 2 if skipped else 0


def main(argv=None):
    a = parse_args(argv)
    try:
        import torch
    except ImportError as e:
        print(f"ERROR ls_service: cannot import torch: {e}", file=sys.stderr, flush=True)
        return 1
    try:
        with torch.no_grad():
            return run(a)
    except KeyboardInterrupt:
        print("ERROR ls_service: interrupted", file=sys.stderr, flush=True)
        return 1
    except Exception as e:  # noqa: BLE001 - report any failure clearly, exit non-zero
        print(f"ERROR ls_service ({a.mode}): {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main())

"""Runs one framework's GPU work deterministically and saves what it computed, so a run under the
shim can be compared bit for bit with a plain run (bench/run_frameworks_on_gpu.sh).

usage: frameworks_check.py FRAMEWORK OUT.npz
  FRAMEWORK: cupy | jax | triton | torch-graph | torch-async
Prints one line "FRAMEWORK total=<bytes> free=<bytes>" with the capacity the program sees, then
"FRAMEWORK done". Exit 0 when the work ran; 1 when the framework failed; 3 when it is missing.
"""
import sys

import numpy as np


def run_cupy(out):
    import cupy as cp
    free, total = cp.cuda.runtime.memGetInfo()
    print(f"cupy total={total} free={free}")
    rng = np.random.default_rng(1)
    a = cp.asarray(rng.standard_normal((2048, 2048), dtype=np.float32))
    b = cp.asarray(rng.standard_normal((2048, 2048), dtype=np.float32))
    c = a @ b
    # A raw kernel, several streams, a large allocation and a device-to-device copy.
    k = cp.RawKernel(r'''
extern "C" __global__ void axpy(const float* x, float* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}''', 'axpy')
    n = 1 << 24
    x = cp.arange(n, dtype=cp.float32)
    ys = [cp.ones(n, dtype=cp.float32) for _ in range(4)]
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(4)]
    for i, (s, y) in enumerate(zip(streams, ys)):
        with s:
            k(((n + 255) // 256,), (256,), (x, y, cp.float32(i + 1), cp.int32(n)))
    for s in streams:
        s.synchronize()
    big = cp.empty(1 << 30, dtype=cp.uint8)
    big[:] = 7
    y2 = cp.stack(ys).copy()
    np.savez(out, c=cp.asnumpy(c), y=cp.asnumpy(y2), big=int(cp.asnumpy(big[::1 << 20]).sum()))


def run_jax(out):
    import jax
    import jax.numpy as jnp
    dev = jax.devices("gpu")[0]
    stats = dev.memory_stats() or {}
    print(f"jax total={stats.get('bytes_limit', -1)} free=-1")
    key = jax.random.PRNGKey(0)
    a = jax.random.normal(key, (2048, 2048), dtype=jnp.float32)

    @jax.jit
    def step(m):
        for _ in range(4):
            m = jnp.tanh(m @ m.T / 2048.0)
        return m

    r = step(a)
    r.block_until_ready()
    np.savez(out, r=np.asarray(r))


def run_triton(out):
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def add_kernel(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(axis=0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2 + tl.load(y_ptr + offs, mask=mask),
                 mask=mask)

    free, total = torch.cuda.mem_get_info()
    print(f"triton total={total} free={free}")
    g = torch.Generator().manual_seed(2)
    x = torch.randn(1 << 22, generator=g).cuda()
    y = torch.randn(1 << 22, generator=g).cuda()
    o = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, o, x.numel(), BLOCK=1024)
    np.savez(out, o=o.cpu().numpy())


def run_torch(out, graph):
    import torch
    free, total = torch.cuda.mem_get_info()
    print(f"torch total={total} free={free}")
    g = torch.Generator().manual_seed(3)
    # Scaled so that eight layers stay finite in fp16.
    w = (torch.randn(1024, 1024, generator=g) / 32).cuda().half()
    x = torch.randn(64, 1024, generator=g).cuda().half()
    def f(t):
        for _ in range(8):
            t = torch.relu(t @ w)
        return t
    if graph:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            f(x)
        torch.cuda.current_stream().wait_stream(s)
        gr = torch.cuda.CUDAGraph()
        with torch.cuda.graph(gr):
            y = f(x)
        for _ in range(10):
            gr.replay()
    else:
        y = f(x)
    torch.cuda.synchronize()
    np.savez(out, y=y.float().cpu().numpy())


def main():
    fw, out = sys.argv[1], sys.argv[2]
    runners = {
        "cupy": run_cupy,
        "jax": run_jax,
        "triton": run_triton,
        "torch-graph": lambda o: run_torch(o, True),
        "torch-async": lambda o: run_torch(o, False),
    }
    try:
        runners[fw](out)
    except ImportError as e:
        print(f"{fw} missing: {e}")
        return 3
    print(f"{fw} done")
    return 0


if __name__ == "__main__":
    sys.exit(main())

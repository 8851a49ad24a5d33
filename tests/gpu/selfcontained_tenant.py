"""A tenant for bench/run_selfcontained_shim_on_gpu.sh, run under missile-run with no library
path: it checks that libmissile.so is loaded, then runs identity checks through it.

  selfcontained_tenant.py torch   allocations, H2D/D2H copies (pageable and pinned, sync and
                                  async), a matmul compared with the CPU's
  selfcontained_tenant.py grpc    the same process also uses its own grpc (and protobuf): an
                                  in-process server and an insecure channel, before and after
                                  the GPU work; exits 3 (skipped) where grpc is not installed

Prints one PASS or FAIL line per check; the exit status is 0 only if every check passed.
"""
import os
import sys

failures = 0


def check(ok, what):
    global failures
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures += 1


def environment_checks():
    check("LD_LIBRARY_PATH" not in os.environ,
          "the tenant runs without LD_LIBRARY_PATH (%s)" % os.environ.get("LD_LIBRARY_PATH", "unset"))
    with open("/proc/self/maps") as f:
        maps = f.read()
    check("libmissile.so" in maps, "libmissile.so is mapped in the tenant")


def torch_checks():
    import torch
    dev = torch.device("cuda")
    gen = torch.Generator().manual_seed(1234)
    held = [torch.empty(n, dtype=torch.uint8, device=dev) for n in (1 << 10, 3 << 20, 64 << 20, 512 << 20)]
    check(all(t.is_cuda for t in held), "allocations of 1 KiB, 3 MiB, 64 MiB and 512 MiB")
    for size in (4 << 10, 1 << 20, 64 << 20, 256 << 20):
        host = torch.randint(0, 256, (size,), dtype=torch.uint8, generator=gen)
        back = host.to(dev).cpu()
        ok = torch.equal(host, back)
        pinned = host.pin_memory()
        dev_copy = pinned.to(dev, non_blocking=True)
        pinned_back = torch.empty_like(pinned).pin_memory()
        pinned_back.copy_(dev_copy, non_blocking=True)
        torch.cuda.synchronize()
        ok = ok and torch.equal(host, pinned_back)
        check(ok, "H2D/D2H copies of %d bytes (pageable and pinned) come back identical" % size)
    a = torch.randn(2048, 2048, dtype=torch.float64, generator=gen)
    b = torch.randn(2048, 2048, dtype=torch.float64, generator=gen)
    gpu = (a.to(dev) @ b.to(dev)).cpu()
    err = (gpu - a @ b).abs().max().item()
    check(err < 1e-9, "fp64 matmul 2048x2048 matches the CPU (max abs diff %.3g)" % err)
    af, bf = a.float(), b.float()
    gpu32 = (af.to(dev) @ bf.to(dev)).cpu()
    err32 = ((gpu32 - af @ bf).abs().max() / (af @ bf).abs().max()).item()
    check(err32 < 1e-3, "fp32 matmul matches the CPU (max relative diff %.3g)" % err32)
    free, total = torch.cuda.mem_get_info()
    check(0 < free <= total, "cudaMemGetInfo through the shim: free %d of %d bytes" % (free, total))
    del held


def grpc_echo(grpc, channel, text):
    call = channel.unary_unary("/probe.Echo/Say")
    return call(text.encode(), timeout=10) == b"echo: " + text.encode()


def grpc_checks():
    try:
        import grpc
    except ImportError:
        print("SKIP grpc is not installed for this python", flush=True)
        sys.exit(3)
    from concurrent import futures

    def say(request, context):
        return b"echo: " + request

    handler = grpc.method_handlers_generic_handler(
        "probe.Echo", {"Say": grpc.unary_unary_rpc_method_handler(say)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((handler,))
    path = "/tmp/missile/selfcontained-echo-%d.sock" % os.getpid()
    server.add_insecure_port("unix:" + path)
    server.start()
    channel = grpc.insecure_channel("unix:" + path)
    check(grpc_echo(grpc, channel, "before the GPU"), "the tenant's own grpc %s: echo before the GPU work" % grpc.__version__)
    try:
        from google.protobuf import struct_pb2
        s = struct_pb2.Struct()
        s.update({"tenant": "own protobuf", "n": 3})
        back = struct_pb2.Struct.FromString(s.SerializeToString())
        check(back["tenant"] == "own protobuf", "the tenant's own protobuf serializes and parses")
    except ImportError:
        print("SKIP protobuf is not installed for this python", flush=True)
    torch_checks()
    check(grpc_echo(grpc, channel, "after the GPU"), "the tenant's own grpc: echo after the GPU work")
    server.stop(1)
    try:
        os.unlink(path)
    except OSError:
        pass


if __name__ == "__main__":
    environment_checks()
    if len(sys.argv) > 1 and sys.argv[1] == "grpc":
        grpc_checks()
    else:
        torch_checks()
    sys.exit(1 if failures else 0)

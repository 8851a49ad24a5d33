#!/usr/bin/env bash
# On the GPU machine: missiled on the real H200 with real tenants (tests/gpu/run_daemon_gpu.sh),
# the allocation latency benchmark plain and through Missile, and the hook overhead benchmark.
# Expects binaries packed with their shared libraries in RUNTIME_DIR (RUNTIME_DIR/lib), as
# described in docs/hardware/h200.md, "Running binaries built on the development machine there".
# usage: bench/run_daemon_on_gpu.sh RUNTIME_DIR OUT_DIR
set -uo pipefail
rt=$(cd "$1" && pwd); out=$2
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out/daemon" /tmp/missile/profiles
export LD_LIBRARY_PATH="$rt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MISSILE_SOCKET=/tmp/missile/missiled.sock
cat > /tmp/missile/missiled.toml <<TOML
[daemon]
socket = "$MISSILE_SOCKET"
log_level = "info"
[gpu]
prealloc = "8GiB"
cache_limit = "16GiB"
profile_dir = "/tmp/missile/profiles"
TOML
chmod 644 /tmp/missile/missiled.toml
{
  bash "$here/bench/gpu_header.sh" "bench/run_daemon_on_gpu.sh"
  "$rt/missiled" --config /tmp/missile/missiled.toml > "$out/daemon/missiled.log" 2>&1 &
  daemon=$!
  for i in $(seq 1 100); do [ -S "$MISSILE_SOCKET" ] && break; sleep 0.1; done
  echo "missiled pid $daemon up after $((i * 100)) ms"
  echo "== allocation latency, plain driver"
  "$rt/alloc_latency" 50
  echo "== allocation latency through missile-run (LS tenant, daemon pool prealloc 8 GiB)"
  "$rt/missile-run" --shim "$rt/libmissile.so" --socket "$MISSILE_SOCKET" --name alloc-bench --class ls -- "$rt/alloc_latency" 50
  echo "== tenants, PyTorch, quotas"
  bash "$here/tests/gpu/run_daemon_gpu.sh" "$rt" "$out/daemon"
  echo "daemon checks exit: $?"
  echo "== hook overhead (no daemon involved: cuMemGetInfo is answered from the daemon when connected, so run without one)"
  MISSILE_SOCKET=/nonexistent LD_PRELOAD="$rt/libmissile.so" "$rt/hook_overhead" "$(ldconfig -p | awk '/libcuda.so.1 /{print $NF; exit}')" 100000
  kill -TERM $daemon; wait $daemon; echo "missiled exit: $?"
  tail -n 20 "$out/daemon/missiled.log"
} 2>&1 | tee "$out/daemon_on_gpu.log"
tar -C "$out" -czf "$out/daemon_results.tgz" daemon && rm -rf "$out/daemon"

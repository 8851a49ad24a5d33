#!/usr/bin/env bash
# On the GPU machine: the driver's VMM costs (bench/vmm_cost), allocation latency plain and
# through Missile with both block shapes, then the PyTorch checks again (tests/gpu).
# usage: bench/run_alloc_on_gpu.sh RUNTIME_DIR OUT_DIR
set -uo pipefail
rt=$(cd "$1" && pwd); out=$2
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out/daemon" /tmp/missile/profiles
export LD_LIBRARY_PATH="$rt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MISSILE_SOCKET=/tmp/missile/missiled.sock
cat > /tmp/missile/missiled.toml <<TOML
[daemon]
socket = "$MISSILE_SOCKET"
[gpu]
prealloc = "8GiB"
cache_limit = "16GiB"
profile_dir = "/tmp/missile/profiles"
TOML
chmod 644 /tmp/missile/missiled.toml
run="$rt/missile-run --shim $rt/libmissile.so --socket $MISSILE_SOCKET"
{
  bash "$here/bench/gpu_header.sh" "bench/run_alloc_on_gpu.sh"
  echo "== driver VMM costs"
  "$rt/vmm_cost" 10
  "$rt/missiled" --config /tmp/missile/missiled.toml > "$out/daemon/missiled.log" 2>&1 &
  daemon=$!
  for i in $(seq 1 100); do [ -S "$MISSILE_SOCKET" ] && break; sleep 0.1; done
  echo "== allocation latency, plain driver"
  "$rt/alloc_latency" 50
  echo "== allocation latency through Missile, MISSILE_BLOCKS=single (the default on a one-colour GPU)"
  $run --name alloc-single --class ls -- "$rt/alloc_latency" 50
  echo "== allocation latency through Missile, MISSILE_BLOCKS=chunks"
  MISSILE_BLOCKS=chunks $run --name alloc-chunks --class ls -- "$rt/alloc_latency" 50
  echo "== tenants, PyTorch, quotas (single blocks)"
  bash "$here/tests/gpu/run_daemon_gpu.sh" "$rt" "$out/daemon"
  echo "daemon checks exit: $?"
  kill -TERM $daemon; wait $daemon; echo "missiled exit: $?"
} 2>&1 | tee "$out/alloc_on_gpu.log"
tar -C "$out" -czf "$out/alloc_results.tgz" daemon && rm -rf "$out/daemon"

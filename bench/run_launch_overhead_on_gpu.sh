#!/usr/bin/env bash
# On the GPU machine: what the shim adds to a launch and a small copy, with missiled running and
# pacing on, as an LS tenant (every launch marked) and as a BE tenant (every launch also
# admitted; no LS is busy, so none is held), and with no daemon (pass-through).
# usage: bench/run_launch_overhead_on_gpu.sh RUNTIME_DIR OUT_DIR [CALLS]   (about 30 s)
set -uo pipefail
rt=$(cd "$1" && pwd); out=$2; calls=${3:-100000}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out" /tmp/missile/profiles
export LD_LIBRARY_PATH="$rt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
sock=/tmp/missile/overhead.sock
real=$(ldconfig -p | awk '/libcuda.so.1 /{print $NF; exit}')
{
  bash "$here/bench/gpu_header.sh" "bench/run_launch_overhead_on_gpu.sh $calls"
  echo "== no daemon (pass-through)"
  MISSILE_SOCKET=/nonexistent LD_PRELOAD="$rt/libmissile.so" timeout 120 "$rt/hook_overhead" "$real" "$calls"
  printf '[daemon]\nsocket = "%s"\n[gpu]\nprealloc = "256MiB"\nprofile_dir = "/tmp/missile/profiles"\n' "$sock" > /tmp/missile/overhead.toml
  chmod 644 /tmp/missile/overhead.toml
  timeout 300 "$rt/missiled" --config /tmp/missile/overhead.toml > "$out/overhead-missiled.log" 2>&1 &
  daemon=$!
  for _ in $(seq 1 100); do [ -S "$sock" ] && break; sleep 0.1; done
  for cls in ls be; do
    echo "== missiled running, pacing on, tenant class $cls"
    timeout 120 "$rt/missile-run" --shim "$rt/libmissile.so" --socket "$sock" --name "ovh-$cls" \
      --class "$cls" --report stderr -- "$rt/hook_overhead" "$real" "$calls" 2>&1 | grep -v '^[0-9]* cu' 
  done
  kill -TERM "$daemon"; wait "$daemon"
} 2>&1 | tee "$out/launch_overhead.log"

#!/usr/bin/env bash
# On the GPU machine: the shim's correctness checks against the real driver and the hook
# overhead benchmark. Expects binaries packed with their shared libraries in RUNTIME_DIR
# (RUNTIME_DIR/lib), as described in docs/hardware/h200.md, "Running binaries built on the
# development machine there".
# usage: bench/run_shim_on_gpu.sh RUNTIME_DIR OUT_DIR
set -uo pipefail
rt=$(cd "$1" && pwd); out=$2
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out/shim"
export LD_LIBRARY_PATH="$rt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
real=$(ldconfig -p | awk '/libcuda.so.1 /{print $NF; exit}')
{
  bash "$here/bench/gpu_header.sh" "bench/run_shim_on_gpu.sh"
  echo "== correctness: driver_probe and PyTorch ResNet-50 plain vs under libmissile.so"
  bash "$here/tests/gpu/run_shim_gpu.sh" "$rt/libmissile.so" "$rt/driver_probe" "$out/shim"
  echo "correctness exit: $?"
  echo "== hook overhead: LD_PRELOAD=libmissile.so hook_overhead $real 200000"
  LD_PRELOAD="$rt/libmissile.so" "$rt/hook_overhead" "$real" 200000
  echo "== hook overhead, second run"
  LD_PRELOAD="$rt/libmissile.so" "$rt/hook_overhead" "$real" 200000
} 2>&1 | tee "$out/shim_on_gpu.log"
rm -f "$out"/shim/*.pt
tar -C "$out" -czf "$out/shim_reports.tgz" shim && rm -rf "$out/shim"

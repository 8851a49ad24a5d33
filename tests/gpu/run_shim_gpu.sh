#!/usr/bin/env bash
# GPU check of libmissile.so against the real driver:
#  1. driver_probe, each resolution path, plain vs under the shim: identical output;
#  2. PyTorch ResNet-50 (random weights, fp16, eager + CUDA graph) plain vs under the shim, with
#     the default caching allocator, expandable segments and the cudaMallocAsync backend:
#     bitwise identical outputs, and the shim's report of what it intercepted.
# usage: run_shim_gpu.sh LIBMISSILE DRIVER_PROBE OUT_DIR
set -uo pipefail
shim=$1; probe=$2; out=$3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
fail=0
unset MISSILE_REAL_LIBCUDA MISSILE_DISABLE

for mode in direct dlsym getproc getproc2 threads; do
  plain=$("$probe" $mode 2>&1); prc=$?
  shimmed=$(LD_PRELOAD="$shim" MISSILE_REPORT="$out/probe-$mode.report" "$probe" $mode 2>&1); src=$?
  # The shim's own log lines (no daemon here: it says it runs without one) are not the program's.
  shimmed=$(printf '%s\n' "$shimmed" | grep -v '^missile\[[0-9]*\] ' || true)
  if [ $prc -eq 0 ] && [ $src -eq 0 ] && [ "$plain" = "$shimmed" ]; then
    echo "PASS driver_probe $mode: identical output under the shim"
  else
    echo "FAIL driver_probe $mode: plain rc=$prc shim rc=$src"; echo "$plain"; echo "$shimmed"; fail=1
  fi
done

for conf in default expandable_segments:True backend:cudaMallocAsync; do
  tag=${conf%%:*}
  env_conf=()
  [ "$conf" != default ] && env_conf=(PYTORCH_CUDA_ALLOC_CONF=$conf)
  env "${env_conf[@]}" python3 "$here/torch_infer.py" "$out/plain-$tag.pt" || fail=1
  env "${env_conf[@]}" LD_PRELOAD="$shim" MISSILE_REPORT="$out/torch-$tag.report" \
    python3 "$here/torch_infer.py" "$out/shim-$tag.pt" || fail=1
  if python3 "$here/compare_outputs.py" "$out/plain-$tag.pt" "$out/shim-$tag.pt"; then
    echo "PASS resnet50 $conf: outputs bitwise identical under the shim"
  else
    echo "FAIL resnet50 $conf: outputs differ"; fail=1
  fi
  echo "--- shim report, resnet50 $conf:"
  cat "$out/torch-$tag.report" 2>/dev/null || { echo "no report"; fail=1; }
done
exit $fail

#!/usr/bin/env bash
# On the GPU machine, after the isolation rework (sealed pacing regions, sessions that outlive a
# daemon stall, no block handed to two tenants, per-uid limits):
#   checks  the GPU checks of the README's test command with this build's binaries
#           (tests/gpu/ctest_gpu.sh shim and daemon) and bench/run_identity_paced_on_gpu.sh
#           (a paced BE's PyTorch outputs bitwise identical next to a busy LS: the pacing
#           regions on the real driver)
#   coloc   pair (a) of bench/colocation (ResNet-50 CUDA-graph LS next to the ResNet-152 BE):
#           alone, no isolation and Missile, REPEATS times (default 3), each in a fresh run
# usage: bench/run_isolation_on_gpu.sh RUNTIME_DIR OUT_DIR [checks,coloc]
set -uo pipefail
rt=$(cd "$1" && pwd); out=$2
steps=${3:-checks,coloc}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
bash "$here/bench/gpu_header.sh" "bench/run_isolation_on_gpu.sh $steps"
export LD_LIBRARY_PATH="$rt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [[ ,$steps, == *,checks,* ]]; then
  export MISSILED=$rt/missiled MISSILE_RUN=$rt/missile-run MISSILECTL=$rt/missilectl
  export MISSILE_SHIM=$rt/libmissile.so TENANT_PROBE=$rt/tenant_probe DRIVER_PROBE=$rt/driver_probe
  for check in shim daemon; do
    start=$SECONDS
    timeout 300 bash "$here/tests/gpu/ctest_gpu.sh" $check > "$out/gpu-$check.log" 2>&1
    echo "gpu check $check: exit $? in $((SECONDS - start)) s; $(tail -n 1 "$out/gpu-$check.log")"
  done
  start=$SECONDS
  MODELS=resnet50 timeout 400 bash "$here/bench/run_identity_paced_on_gpu.sh" "$rt" "$out/identity" \
    > "$out/identity.log" 2>&1
  echo "identity paced: exit $? in $((SECONDS - start)) s"
  grep -E "^(PASS|FAIL)" "$out/identity.log"
fi
if [[ ,$steps, == *,coloc,* ]]; then
  for r in $(seq 1 "${REPEATS:-3}"); do
    FRESH=1 MODES="alone none missile" MAIN_SCENARIOS=resnet50-graph SECONDS_MAIN=8 \
      BE_SOLO_SECONDS=10 timeout 280 bash "$here/bench/colocation/run_on_gpu.sh" "$rt" \
      "$out/coloc-$r" main > "$out/coloc-$r.log" 2>&1
    echo "== colocation repeat $r (exit $?)"
    grep -E "^\| (alone|none|missile) " "$out/coloc-$r/summary.md" 2>/dev/null || tail -n 5 "$out/coloc-$r.log"
  done
fi

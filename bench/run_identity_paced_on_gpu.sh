#!/usr/bin/env bash
# On the GPU machine: PyTorch outputs stay bitwise identical when the tenant is a paced BE (its
# launches held, counted in the window, its copies host-paced) next to a busy LS tenant.
# tests/gpu/torch_infer.py runs fp16 inference eagerly and as a CUDA-graph replay and saves the
# outputs; each configuration runs plainly and as a BE under missile-run beside an LS loop, with
# the default allocator, expandable segments and cudaMallocAsync, ResNet-50 and a BERT encoder.
# usage: bench/run_identity_paced_on_gpu.sh RUNTIME_DIR OUT_DIR   (about 2 minutes)
set -uo pipefail
rt=$(cd "$1" && pwd); out=$2
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out" /tmp/missile/profiles
export LD_LIBRARY_PATH="$rt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
sock=/tmp/missile/identity.sock
run() { timeout 200 "$rt/missile-run" --shim "$rt/libmissile.so" --socket "$sock" "$@"; }
infer="$here/tests/gpu/torch_infer.py"
fail=0
{
  bash "$here/bench/gpu_header.sh" "bench/run_identity_paced_on_gpu.sh"
  printf '[daemon]\nsocket = "%s"\n[gpu]\nprealloc = "1GiB"\nprofile_dir = "/tmp/missile/profiles"\n' "$sock" > /tmp/missile/identity.toml
  chmod 644 /tmp/missile/identity.toml
  timeout 400 "$rt/missiled" --config /tmp/missile/identity.toml > "$out/identity-missiled.log" 2>&1 &
  daemon=$!
  for _ in $(seq 1 100); do [ -S "$sock" ] && break; sleep 0.1; done
  run --name web --class ls -- python3 "$infer" /tmp/ls.pt --model resnet50 --loop-seconds 400 > /tmp/ls-loop.txt 2>&1 &
  ls_pid=$!
  sleep 8
  for model in ${MODELS:-resnet50 bert}; do
    for conf in ${CONFS:-default expandable_segments:True backend:cudaMallocAsync}; do
      tag=$model-${conf%%:*}
      env_conf=()
      [ "$conf" != default ] && env_conf=(PYTORCH_CUDA_ALLOC_CONF=$conf)
      env "${env_conf[@]}" timeout 200 python3 "$infer" "/tmp/plain-$tag.pt" --model $model > /dev/null 2>&1 || fail=1
      # (env cannot run the shell function run: the launcher is spelled out)
      env "${env_conf[@]}" timeout 200 "$rt/missile-run" --shim "$rt/libmissile.so" --socket "$sock" \
        --name be-$model --class be --report "/tmp/be-$tag.report" -- \
        python3 "$infer" "/tmp/be-$tag.pt" --model $model > "/tmp/be-$tag.txt" 2>&1 || fail=1
      if python3 "$here/tests/gpu/compare_outputs.py" "/tmp/plain-$tag.pt" "/tmp/be-$tag.pt"; then
        echo "PASS $model $conf: a paced BE's outputs are bitwise identical to a plain run"
      else
        echo "FAIL $model $conf: outputs differ"; fail=1
      fi
      grep -E "^# (pacing|graphs)|PCIe scheduler" "/tmp/be-$tag.report" || tail -5 "/tmp/be-$tag.txt"
    done
  done
  kill -TERM "$ls_pid" 2>/dev/null; wait "$ls_pid"
  kill -TERM "$daemon"; wait "$daemon"
  [ $fail = 0 ] && echo "identity: all PASS" || echo "identity: FAILURES"
} 2>&1 | tee "$out/identity.log"

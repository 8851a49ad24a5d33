#!/usr/bin/env bash
# On the GPU machine: what an LS request waits for beside BE work of any shape.
#   identity  bench/run_identity_paced_on_gpu.sh: a paced BE's PyTorch outputs, eager and as a
#             CUDA-graph replay (split into pieces), bitwise identical to a plain run
#   e         pair (e) of bench/colocation: the ResNet-50 CUDA-graph LS beside a ResNet-152 fp16
#             batch-64 BE replayed as ONE torch.cuda.CUDAGraph, no copies; modes $E_MODES
#             (alone none missile), REPEATS times (default 3), each a fresh run
#   a         pair (a) (the ResNet-152 batch-128 eager BE with 512 MiB copies), same modes
#   b         pair (b): the BERT-base CUDA-graph LS beside the BE of pair (a), same modes
#   tpc       bench/tpc_probe (in RUNTIME_DIR): the live TPC mask bits, each reserve size checked
#             (no BE block on a reserved SM), the mask's cost per launch; time-sliced, then as an
#             MPS client (a control daemon of its own, stopped after)
#   k         the same LS beside a BE of long kernels: be_job.py --model gemm (8 fp16 GEMMs of
#             2048x8192x8192, each a few hundred microseconds), eager, no copies
# The LS reserve on MPS: EXTRA_MODES="missile-mps-r8:bench/colocation/modes/reserve8.toml ..."
# (a mode whose name starts with missile-mps runs its tenants on MPS, the BE at low priority).
# usage: bench/run_residue_on_gpu.sh RUNTIME_DIR OUT_DIR [identity,e,a]
set -uo pipefail
rt=$(cd "$1" && pwd); out=$2
steps=${3:-identity,e}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
bash "$here/bench/gpu_header.sh" "bench/run_residue_on_gpu.sh $steps"
export LD_LIBRARY_PATH="$rt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [[ ,$steps, == *,tpc,* ]]; then
  echo "== tpc_probe, time-sliced"
  timeout 120 "$rt/tpc_probe" 0 2>&1 | tee "$out/tpc-timesliced.log"
  echo "== tpc_probe, as an MPS client"
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/tpc-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/tpc-mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if timeout 20 nvidia-cuda-mps-control -d; then
    timeout 120 "$rt/tpc_probe" 0 2>&1 | tee "$out/tpc-mps.log"
    echo quit | timeout 10 nvidia-cuda-mps-control
    sleep 2
  else
    echo "could not start MPS"
  fi
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
fi
if [[ ,$steps, == *,identity,* ]]; then
  start=$SECONDS
  MODELS=${ID_MODELS:-resnet50} timeout 400 bash "$here/bench/run_identity_paced_on_gpu.sh" "$rt" \
    "$out/identity" > "$out/identity.log" 2>&1
  echo "identity paced: exit $? in $((SECONDS - start)) s"
  grep -E "^(PASS|FAIL)|^# graphs" "$out/identity.log"
fi
pair() {  # pair NAME BE_ARGS [LS_SCENARIO]
  local name=$1 be_args=$2 scen=${3:-resnet50-graph} r m raw=/tmp/colocation-run/colocation/raw
  rm -f /tmp/colocation-run/colocation/logs/*.report
  for r in $(seq "${FIRST:-1}" "${REPEATS:-3}"); do
    FRESH=1 MODES="${E_MODES:-alone none missile}" EXTRA_MODES="${EXTRA_MODES:-}" MAIN_SCENARIOS=$scen SECONDS_MAIN=8 \
      BE_SOLO_SECONDS=10 BE_ARGS="$be_args" timeout 300 \
      bash "$here/bench/colocation/run_on_gpu.sh" "$rt" "$out/$name-$r" main > "$out/$name-$r.log" 2>&1
    echo "== pair ($name) repeat $r (exit $?)"
    grep -E "^\| (alone|none|mps|missile)" "$out/$name-$r/summary.md" 2>/dev/null || tail -n 5 "$out/$name-$r.log"
    grep -h "^# graphs\|^# pacing\|^# reserve" /tmp/colocation-run/colocation/logs/*missile*be*.report 2>/dev/null | head -8
    for m in ${E_MODES:-alone none missile}; do  # the slow LS requests against the BE's iterations
      [ "$m" = alone ] || [ ! -f "$raw/${m}__$scen.txt" ] && continue
      python3 "$here/bench/colocation/tail_events.py" "$raw/${m}__$scen.txt" "$raw/${m}__be-"*main.txt \
        --alone "$raw/alone__$scen.txt" > "$out/$name-$r-tail-$m.txt" 2>&1
      echo "tail ($m): $(grep -E "requests slow" "$out/$name-$r-tail-$m.txt")"
    done
    # One archive per window: few files come back from the machine.
    tar czf "$out/$name-$r.tgz" -C "$out" "$name-$r" && rm -rf "${out:?}/$name-$r"
  done
}
[[ ,$steps, == *,e,* ]] && pair e "--copy-mib 0 --batch 64 --graph"
[[ ,$steps, == *,a,* ]] && pair a ""
[[ ,$steps, == *,b,* ]] && pair b "" bert-graph
[[ ,$steps, == *,k,* ]] && pair k "--copy-mib 0 --model gemm --batch 2048"
exit 0

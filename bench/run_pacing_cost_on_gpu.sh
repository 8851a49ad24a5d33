#!/usr/bin/env bash
# On the GPU machine: what a paced BE's tracking costs it (docs/pacing.md, "What a BE's pacing
# costs it"). First bench/colocation/write_cost.py, the BE's model alone with completion writes
# between its modules, plain and as an MPS client (OUT/write_cost.txt, about a minute); then the
# token-decoding LS beside the BE at a budget whose last step releases the BE, against pacing off
# (bench/run_budget_on_gpu.sh, OUT/decode*, about 4 minutes).
# With GRAPH_BE=1 instead: the write cost is skipped and the BE replays its model as one CUDA
# graph with no copy (be_job.py --graph --copy-mib 0), which a released BE launches whole and a
# held one piece by piece (OUT/decode-graphbe*, about 4 minutes: a call of its own).
# usage: bench/run_pacing_cost_on_gpu.sh RUNTIME_DIR OUT_DIR
# env: BUDGET (200) LS_WARMUP (16) GRAPH_BE (0)
set -uo pipefail
rt=$1 out=$2
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
if [ "${GRAPH_BE:-0}" = 1 ]; then
  SCENARIOS=decode-graph BUDGETS="" BASE_MODES="alone alone-mps" MPS_BUDGETS="${BUDGET:-200}" \
    MORE_MODES="missile-mps-nopace:bench/colocation/modes/nopace.toml" LS_WARMUP=${LS_WARMUP:-16} \
    BE_ARGS="--graph --copy-mib 0" bash "$here/bench/run_budget_on_gpu.sh" "$rt" "$out/decode-graphbe"
  exit
fi
{
  bash "$here/bench/gpu_header.sh" "bench/run_pacing_cost_on_gpu.sh"
  echo "== write cost, plain"
  python3 "$here/bench/colocation/write_cost.py"
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe-cost CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log-cost
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if timeout 20 nvidia-cuda-mps-control -d; then
    echo "== write cost, as an MPS client"
    python3 "$here/bench/colocation/write_cost.py"
    echo quit | timeout 10 nvidia-cuda-mps-control
    sleep 2
  else
    echo "== write cost, as an MPS client: the MPS control daemon did not start"
  fi
} > "$out/write_cost.txt" 2>&1
cat "$out/write_cost.txt"
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
SCENARIOS=decode-graph BUDGETS="" BASE_MODES="alone alone-mps" MPS_BUDGETS="${BUDGET:-200}" \
  MORE_MODES="missile-mps-nopace:bench/colocation/modes/nopace.toml" LS_WARMUP=${LS_WARMUP:-16} \
  bash "$here/bench/run_budget_on_gpu.sh" "$rt" "$out/decode"

#!/usr/bin/env bash
# On the GPU machine: what MPS by itself costs each LS scenario (bench/colocation/mps_cost.py),
# wall and GPU time per request, as a plain CUDA process and as an MPS client, ROUNDS times
# alternating (default 2). No Missile binaries are used.
# usage: bench/run_mps_cost_on_gpu.sh OUT_DIR
# env: ROUNDS (2) SECONDS_EACH (4) MPSCOST_ARGS (more mps_cost.py arguments, e.g. --scenarios resnet50-graph)
set -uo pipefail
out=$1
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
bash "$here/bench/gpu_header.sh" "bench/run_mps_cost_on_gpu.sh"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-cost-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-cost-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
stop_mps() {
  echo quit | timeout 10 nvidia-cuda-mps-control > /dev/null 2>&1
  for _ in $(seq 1 150); do
    pgrep -u "$(id -u)" -f '(^|/)nvidia-cuda-mps-(control|server)( |$)' > /dev/null || return 0
    sleep 0.1
  done
  echo "WARN: MPS still running 15 s after quit"
}
trap stop_mps EXIT
for r in $(seq 1 "${ROUNDS:-2}"); do
  echo "== round $r: plain"
  python3 "$here/bench/colocation/mps_cost.py" --tag "plain-$r" --seconds "${SECONDS_EACH:-4}" ${MPSCOST_ARGS:-} 2>&1 | tee -a "$out/mps_cost.txt"
  timeout 20 nvidia-cuda-mps-control -d || { echo "ERROR: nvidia-cuda-mps-control -d failed"; exit 1; }
  echo "== round $r: MPS client"
  python3 "$here/bench/colocation/mps_cost.py" --tag "mps-$r" --seconds "${SECONDS_EACH:-4}" ${MPSCOST_ARGS:-} 2>&1 | tee -a "$out/mps_cost.txt"
  stop_mps
done
echo "== summary (ms)"
python3 - "$out/mps_cost.txt" <<'PY'
import json, sys
rows = [json.loads(l.split(" ", 1)[1]) for l in open(sys.argv[1]) if l.startswith("MPSCOST ")]
print(f"{'tag':10} {'scenario':16} {'n':>6} {'wall p50':>9} {'wall p99':>9} {'gpu p50':>8} {'gpu p99':>8}")
for r in rows:
    w50, w99 = (r['wall_p50'] or float('nan')), (r['wall_p99'] or float('nan'))
    print(f"{r['tag']:10} {r['scenario']:16} {r['n']:6d} {w50:9.4f} {w99:9.4f} "
          f"{r.get('gpu_p50', float('nan')):8.4f} {r.get('gpu_p99', float('nan')):8.4f}")
PY

#!/usr/bin/env bash
# On the GPU machine: what one tenant's completion marks cost another tenant's GPU work
# (bench/mark_cost.cu; docs/results.md, "The top end's gap"). Under MPS (the BE at client
# priority 1, as the colocation modes mps-prio and missile-mps-* run): the BE alone, then for
# each mark MODE the LS beside the BE, ROUNDS rounds (default 3) of SECONDS_EACH s each
# (default 6), the modes interleaved within a round; then each LS mode alone for its own rate.
# OUT_DIR/mark_cost.txt: the raw output; OUT_DIR/table.txt: the table printed at the end.
# usage: bench/run_mark_cost_on_gpu.sh MARK_COST_BINARY OUT_DIR
# env: ROUNDS (3) SECONDS_EACH (6) BE_KIND (burn: arithmetic only; stream: memory-bound)
#   BE_ITERS (burn: 20000, the kernel's length; stream: 256, the MiB each kernel reads and writes)
#   MODES ("none write-host write-host-nobar write-dev event kernel-host"; g-MODE: graph tokens)
set -uo pipefail
bin=$1 out=$2
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
secs=${SECONDS_EACH:-6}
modes=${MODES:-none write-host write-host-nobar write-dev event kernel-host}
kind=${BE_KIND:-burn}
if [ "$kind" = stream ]; then iters=${BE_ITERS:-256}; else iters=${BE_ITERS:-20000}; fi
{
  bash "$here/bench/gpu_header.sh" "bench/run_mark_cost_on_gpu.sh"
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe-mark CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log-mark
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  timeout 20 nvidia-cuda-mps-control -d || { echo "the MPS control daemon did not start"; exit 1; }
  echo "== BE alone"
  CUDA_MPS_CLIENT_PRIORITY=1 "$bin" be "$secs" "$iters" "$kind"
  for r in $(seq 1 "${ROUNDS:-3}"); do
    for m in $modes; do
      echo "== round $r mode $m"
      CUDA_MPS_CLIENT_PRIORITY=1 "$bin" be "$secs" "$iters" "$kind" &
      be=$!
      sleep 0.3
      "$bin" ls "$m" "$((secs - 1))"
      wait "$be"
    done
  done
  for m in $modes; do
    echo "== LS alone mode $m"
    "$bin" ls "$m" 3
  done
  echo quit | timeout 10 nvidia-cuda-mps-control
  sleep 1
} > "$out/mark_cost.txt" 2>&1
# The table: per mode, the BE's rate beside the LS (median and range over the rounds) and the
# LS's tokens per second.
python3 - "$out/mark_cost.txt" <<'PY' | tee "$out/table.txt"
import re, statistics, sys
be_alone, be, ls, alone, mode = None, {}, {}, {}, None
for line in open(sys.argv[1]):
    m = re.match(r"== (?:round \d+ mode|LS alone mode) (\S+)", line)
    if line.startswith("== BE alone"): mode = "_be_alone"
    elif m: mode = ("alone:" if "LS alone" in line else "") + m.group(1)
    m = re.match(r"be (?:kind \S+ )?kernels_per_s ([\d.]+)", line)
    if m:
        if mode == "_be_alone": be_alone = float(m.group(1))
        else: be.setdefault(mode, []).append(float(m.group(1)))
    m = re.match(r"ls mode (\S+) tokens_per_s ([\d.]+)", line)
    if m:
        (alone if mode.startswith("alone:") else ls).setdefault(m.group(1), []).append(float(m.group(2)))
print(f"BE alone: {be_alone} kernels/s")
print(f"{'mark':12} {'BE % of alone (median, range)':32} {'LS tokens/s beside':20} {'LS alone':10}")
for k in be:
    b = [100 * x / be_alone for x in be[k]] if be_alone else be[k]
    l = ls.get(k, [0])
    print(f"{k:12} {statistics.median(b):6.1f} ({min(b):.1f}-{max(b):.1f}){'':14} "
          f"{statistics.median(l):8.1f}{'':12} {alone.get(k, [0])[0]:8.1f}")
PY

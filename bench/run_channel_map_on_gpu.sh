#!/usr/bin/env bash
# On the GPU machine: missile-calibrate --channel-map, which recovers the VRAM channel hash
# inside one 2 MiB chunk (docs/colouring.md, "The channel map below 2 MiB"). Writes to OUT_DIR:
# channel_map.log (the raw log), <uuid>.channels.toml (the map file), .channels.txt (report),
# .channels.pairs.csv (bandwidth under contention per predicted colour pair), .channels.scan.csv
# (every scanned mask), channel_map.png (when matplotlib is there), and a summary at the end.
# Expects the binaries packed with their shared libraries in RUNTIME_DIR (RUNTIME_DIR/lib), as
# docs/hardware/h200.md, "Running binaries built on the development machine there" describes.
# usage: bench/run_channel_map_on_gpu.sh RUNTIME_DIR OUT_DIR [--quick] [--seed S]
#        (about 2 minutes; --quick about 30 s; nothing else should run on the GPU meanwhile)
set -uo pipefail
rt=$(cd "$1" && pwd); out=$2; shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out/prof"
out=$(cd "$out" && pwd)
export LD_LIBRARY_PATH="$rt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{
  bash "$here/bench/gpu_header.sh" "bench/run_channel_map_on_gpu.sh $*"
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu \
    --format=csv 2>&1 | sed 's/^/gpu clocks before: /'
  echo "== missile-calibrate --channel-map $*"
  start=$(date +%s.%N)
  timeout 600 "$rt/missile-calibrate" --channel-map --out "$out/prof" "$@"
  rc=$?
  end=$(date +%s.%N)
  echo "missile-calibrate exit: $rc; wall time: $(awk "BEGIN{printf \"%.1f\", $end - $start}") s"
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv 2>&1 |
    sed 's/^/gpu clocks after: /'
} 2>&1 | tee "$out/channel_map.log"

cp "$out"/prof/*.channels.* "$out/" 2>/dev/null
pairs=$(ls "$out"/*.channels.pairs.csv 2>/dev/null | head -n 1)
scan=$(ls "$out"/*.channels.scan.csv 2>/dev/null | head -n 1)
map=$(ls "$out"/*.channels.toml 2>/dev/null | head -n 1)
if [ -n "$pairs" ] && [ -n "$scan" ]; then
  python3 "$here/bench/plot_channel_map.py" --pairs "$pairs" --scan "$scan" \
    --out "$out/channel_map.png" 2>&1 | tee -a "$out/channel_map.log" ||
    echo "PNG not made here; on a machine with matplotlib: python3 bench/plot_channel_map.py" \
      "--pairs $(basename "$pairs") --scan $(basename "$scan") --out channel_map.png" |
      tee -a "$out/channel_map.log"
fi
{
  echo "== summary"
  if [ -n "$map" ]; then
    grep -E '^(masks|channel_groups|source|confidence|agreement|verification_accuracy|verification_observations|pair_accuracy|pair_observations|seconds) ' "$map"
    txt="${map%.toml}.txt"
    grep -E 'source |fit: rank|group bit|cross-validation|noise threshold|L2-hit latency|chunks:|predictions right|time taken' "$txt"
  else
    echo "no map file was written: see channel_map.log"
  fi
} 2>&1 | tee -a "$out/channel_map.log"

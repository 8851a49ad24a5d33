#!/usr/bin/env bash
# On the GPU machine: missiled with `[compute] mps = "start"` starts the MPS control daemon
# before it opens the GPU, a BE tenant started by missile-run afterwards runs as an MPS client
# at CUDA_MPS_CLIENT_PRIORITY=1, and the control daemon is gone after missiled stops.
# usage: bench/run_mps_start_on_gpu.sh RUNTIME_DIR OUT_DIR   (about 30 s; nothing else may run
# MPS on the machine meanwhile)
set -uo pipefail
rt=$(cd "$1" && pwd); out=$2
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out" /tmp/missile/profiles
export LD_LIBRARY_PATH="$rt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
pipe=/tmp/mps-start-pipe logd=/tmp/mps-start-log sock=/tmp/missile/mps-start.sock
{
  bash "$here/bench/gpu_header.sh" "bench/run_mps_start_on_gpu.sh"
  before=$(pgrep -c -f nvidia-cuda-mps-control || true)
  printf '[daemon]\nsocket = "%s"\n[gpu]\nprealloc = "256MiB"\nprofile_dir = "/tmp/missile/profiles"\n[compute]\nmps = "start"\nmps_pipe_directory = "%s"\nmps_log_directory = "%s"\n' \
    "$sock" "$pipe" "$logd" > /tmp/missile/mps-start.toml
  chmod 644 /tmp/missile/mps-start.toml
  timeout 120 "$rt/missiled" --config /tmp/missile/mps-start.toml > "$out/missiled.log" 2>&1 &
  daemon=$!
  for _ in $(seq 1 200); do [ -S "$sock" ] && break; sleep 0.1; done
  echo "== missiled up: $([ -S "$sock" ] && echo yes || echo no)"
  grep -h "MPS" "$out/missiled.log"
  echo "== server list while missiled runs:"
  echo get_server_list | CUDA_MPS_PIPE_DIRECTORY=$pipe timeout 5 nvidia-cuda-mps-control; echo "(rc $?)"
  CUDA_MPS_PIPE_DIRECTORY=$pipe timeout 120 "$rt/missile-run" --shim "$rt/libmissile.so" --socket "$sock" \
    --name mps-be --class be -- python3 -c '
import os, torch
x = torch.randn(4096, 4096, device="cuda")
y = (x @ x).sum().item()
print("tenant: CUDA_MPS_CLIENT_PRIORITY =", os.environ.get("CUDA_MPS_CLIENT_PRIORITY"), "result finite:", y == y)'
  echo "tenant rc $?"
  echo "== server list after the tenant:"
  echo get_server_list | CUDA_MPS_PIPE_DIRECTORY=$pipe timeout 5 nvidia-cuda-mps-control; echo "(rc $?)"
  kill -TERM "$daemon"; wait "$daemon"; echo "missiled rc $?"
  gone=no
  for i in $(seq 1 200); do
    if ! pgrep -f nvidia-cuda-mps-control >/dev/null; then gone="yes, $((i / 10)).$((i % 10)) s after missiled"; break; fi
    sleep 0.1
  done
  echo "== MPS control daemons before: $before; gone after missiled stopped: $gone"
  pgrep -a -f nvidia-cuda-mps || true
  tail -n 3 "$out/missiled.log"
} 2>&1 | tee "$out/mps_start.log"

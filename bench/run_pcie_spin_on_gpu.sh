#!/usr/bin/env bash
# On the GPU machine: does the arbiter's sleep between an LS tenant's requests explain the LS
# copy's tail through Missile? C++ tenants (tests/programs/copy_probe: driver API, pinned
# memory, asynchronous copies), an LS tenant copying 4 MiB every 5 ms alone and next to a BE
# tenant streaming 1 GiB copies: unmanaged, then through Missile with pcie.ls_spin_us = 0 (the
# arbiter sleeps between LS requests, as up to 2026-11-29-pcie4-h200) and 20000 (the default:
# it keeps polling between them).
# usage: bench/run_pcie_spin_on_gpu.sh RUNTIME_DIR OUT_DIR
set -uo pipefail
rt=$(cd "$1" && pwd); out=$2
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out/spin" /tmp/missile/profiles
export LD_LIBRARY_PATH="$rt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MISSILE_SOCKET=/tmp/missile/missiled.sock
run() { timeout 60 "$rt/missile-run" --shim "$rt/libmissile.so" --socket "$MISSILE_SOCKET" "$@"; }
P="$rt/copy_probe"
{
  bash "$here/bench/gpu_header.sh" "bench/run_pcie_spin_on_gpu.sh"
  echo "== unmanaged"
  echo "alone: $($P lat 4 400 5 async | grep lat)"
  $P bulk 1024 5 - async > "$out/spin/u-be" & pid=$!; sleep 1
  echo "under BE: $($P lat 4 400 5 async | grep lat)"
  wait $pid; echo "BE: $(grep bulk "$out/spin/u-be")"
  for spin in 0 20000; do
    cat > /tmp/missile/missiled.toml <<TOML
[daemon]
socket = "$MISSILE_SOCKET"
[gpu]
prealloc = "1GiB"
profile_dir = "/tmp/missile/profiles"
[pcie]
chunk = "2MiB"
be_chunk = "8MiB"
ls_spin_us = $spin
TOML
    chmod 644 /tmp/missile/missiled.toml
    "$rt/missiled" --config /tmp/missile/missiled.toml > "$out/spin/missiled-$spin.log" 2>&1 &
    daemon=$!
    for _ in $(seq 1 100); do [ -S "$MISSILE_SOCKET" ] && break; sleep 0.1; done
    echo "== Missile, chunk 2MiB, be_chunk 8MiB, ls_spin_us $spin"
    echo "alone: $(run --name ls --class ls -- $P lat 4 400 5 async | grep lat)"
    run --name be --class be -- $P bulk 1024 5 - async > "$out/spin/m-be-$spin" & pid=$!; sleep 1.5
    echo "under BE: $(run --name ls --class ls -- $P lat 4 400 5 async | grep lat)"
    wait $pid; echo "BE: $(grep bulk "$out/spin/m-be-$spin")"
    echo "missiled CPU time (s): $(awk '{print ($14 + $15) / 100}' /proc/$daemon/stat)"
    kill -TERM $daemon; wait $daemon
  done
} 2>&1 | tee "$out/pcie_spin_on_gpu.log"

#!/usr/bin/env bash
# On the GPU machine: where does a BE tenant's bulk copying slow a ResNet-50 LS service?
# The LS (bench/pcie/pcie_resnet.py, CUDA graph, one request every 5 ms) runs with each set of
# copies (none, input only, output only, both) alone and next to a BE copying 1 GiB host to
# device back to back: unmanaged, through Missile with the defaults, and through Missile with
# pcie.bypass_below = 0 (the LS's 2 KiB output copy scheduled too). If the LS without any copy
# is slowed as much as with them, the interference is on the kernels (the GPU time-slicing the
# two processes), which no copy scheduler can remove.
# usage: bench/run_resnet_diag_on_gpu.sh RUNTIME_DIR OUT_DIR   (about 4 minutes; S=seconds each)
set -uo pipefail
rt=$(cd "$1" && pwd); out=$2
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out/diag" /tmp/missile/profiles
export LD_LIBRARY_PATH="$rt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MISSILE_SOCKET=/tmp/missile/missiled.sock
S=${S:-3}
T="timeout 60 python3 $here/bench/pcie/pcie_tenant.py"
R="timeout 60 python3 $here/bench/pcie/pcie_resnet.py"
run() { timeout 60 "$rt/missile-run" --shim "$rt/libmissile.so" --socket "$MISSILE_SOCKET" "$@"; }
ready() { for _ in $(seq 1 300); do grep -q ready "$out/diag/$1" 2>/dev/null && return; sleep 0.1; done; }
# $1: tag prefix; $2: "run --name ... --" or empty (unmanaged)
variants() {
  local tag=$1; shift
  for c in none in out both; do $* $R --seconds $S --copies $c --tag "$tag-alone-$c"; done
  $* $T bulk --mib 1024 --seconds $((4 * S + 12)) --tag "$tag-be" > "$out/diag/$tag-be" 2>&1 & local pid=$!
  ready "$tag-be"
  for c in none in out both; do $* $R --seconds $S --copies $c --tag "$tag-under-be-$c"; done
  wait $pid; grep RESULT "$out/diag/$tag-be"
}
{
  bash "$here/bench/gpu_header.sh" "bench/run_resnet_diag_on_gpu.sh"
  echo "== unmanaged"
  variants unmanaged
  for bypass in 64KiB 0; do
    cat > /tmp/missile/missiled.toml <<TOML
[daemon]
socket = "$MISSILE_SOCKET"
[gpu]
prealloc = "1GiB"
profile_dir = "/tmp/missile/profiles"
[pcie]
bypass_below = "$bypass"
TOML
    chmod 644 /tmp/missile/missiled.toml
    "$rt/missiled" --config /tmp/missile/missiled.toml > "$out/diag/missiled-$bypass.log" 2>&1 &
    daemon=$!
    for _ in $(seq 1 100); do [ -S "$MISSILE_SOCKET" ] && break; sleep 0.1; done
    echo "== Missile, defaults, bypass_below $bypass (LS: the ResNet; BE: the copier)"
    for c in none in out both; do run --name web --class ls -- $R --seconds $S --copies $c --tag "missile-$bypass-alone-$c"; done
    run --name be --class be -- $T bulk --mib 1024 --seconds $((4 * S + 12)) --tag "missile-$bypass-be" > "$out/diag/m-$bypass-be" 2>&1 & pid=$!
    ready "m-$bypass-be"
    for c in none in out both; do run --name web --class ls -- $R --seconds $S --copies $c --tag "missile-$bypass-under-be-$c"; done
    wait $pid; grep RESULT "$out/diag/m-$bypass-be"
    kill -TERM $daemon; wait $daemon
  done
} 2>&1 | tee "$out/resnet_diag_on_gpu.log"
grep RESULT "$out/resnet_diag_on_gpu.log" | sort -u > "$out/resnet_diag_summary.txt"

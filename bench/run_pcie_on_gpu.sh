#!/usr/bin/env bash
# bench/pcie on the GPU machine, in one run: unmanaged vs Missile for
#  (a) LS 4 MiB host-to-device latency while a BE tenant streams 1 GiB copies,
#  (b) one BE tenant alone through Missile vs the raw link,
#  (c) two BE tenants with weights 1:3,
#  (d) both directions at once (BE host-to-device + BE device-to-host, LS host-to-device),
#  (e) ResNet-50 LS end to end (input copy + CUDA graph + output copy) next to a BE copying 1 GiB,
# for each scheduler setting in SETTINGS (chunk:be_chunk:max_inflight_chunks:max_inflight_per_tenant
# [:spin_us], default "2MiB:0:2:2 2MiB:4MiB:2:2 2MiB:8MiB:2:2"; be_chunk is what BE tenants use
# while no LS tenant copies); first, bench/chunk_cost (what chunk
# boundaries cost the GPU, no Missile involved); and checks that ResNet-50's outputs under missile-run
# (copies scheduled) are bitwise identical to a plain run. Tenants are PyTorch processes run by
# missile-run. usage: bench/run_pcie_on_gpu.sh RUNTIME_DIR OUT_DIR
set -uo pipefail
rt=$(cd "$1" && pwd); out=$2
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out/pcie" /tmp/missile/profiles
export LD_LIBRARY_PATH="$rt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MISSILE_SOCKET=/tmp/missile/missiled.sock
T="timeout 60 python3 $here/bench/pcie/pcie_tenant.py"
R="timeout 60 python3 $here/bench/pcie/pcie_resnet.py"
run() { timeout 60 "$rt/missile-run" --shim "$rt/libmissile.so" --socket "$MISSILE_SOCKET" "$@"; }
ctl() { "$rt/missilectl" --socket "$MISSILE_SOCKET" "$@"; }
# Waits for a background tenant's "ready" line (its output goes to $out/pcie/NAME).
ready() { for _ in $(seq 1 300); do grep -q ready "$out/pcie/$1" 2>/dev/null && return; sleep 0.1; done; }
S=${MEASURE_SECONDS:-4}
{
  bash "$here/bench/gpu_header.sh" "bench/run_pcie_on_gpu.sh"
  echo "== chunk boundaries on the GPU: bench/chunk_cost (plain driver)"
  "$rt/chunk_cost" 5
  echo "== unmanaged (no Missile)"
  $T lat --seconds $S --tag alone
  $T bulk --mib 1024 --seconds $S --tag be-alone
  $T bulk --mib 1024 --seconds $S --dir d2h --tag be-alone-d2h
  $T bulk --mib 1024 --seconds $((S + 4)) --tag be-next-to-ls > "$out/pcie/u-be" 2>&1 & pid=$!; ready u-be
  $T lat --seconds $S --tag unmanaged
  wait $pid; grep RESULT "$out/pcie/u-be"
  $R --seconds $S --tag resnet-alone
  $T bulk --mib 1024 --seconds $((S + 8)) --tag be-next-to-resnet > "$out/pcie/u-rbe" 2>&1 & pid=$!; ready u-rbe
  $R --seconds $S --tag resnet-unmanaged
  wait $pid; grep RESULT "$out/pcie/u-rbe"
  first=1
  for setting in ${SETTINGS:-2MiB:0:2:2 2MiB:4MiB:2:2 2MiB:8MiB:2:2}; do
    IFS=: read -r chunk be_chunk inflight per_tenant spin <<< "$setting"
    spin=${spin:-200}
    cat > /tmp/missile/missiled.toml <<TOML
[daemon]
socket = "$MISSILE_SOCKET"
[gpu]
prealloc = "8GiB"
cache_limit = "16GiB"
profile_dir = "/tmp/missile/profiles"
[pcie]
chunk = "$chunk"
be_chunk = "$be_chunk"
max_inflight_chunks = $inflight
max_inflight_per_tenant = $per_tenant
spin_us = $spin
TOML
    chmod 644 /tmp/missile/missiled.toml
    m="missile-$chunk-be$be_chunk-$inflight-$per_tenant-spin$spin"
    "$rt/missiled" --config /tmp/missile/missiled.toml > "$out/pcie/missiled-$m.log" 2>&1 &
    daemon=$!
    for _ in $(seq 1 100); do [ -S "$MISSILE_SOCKET" ] && break; sleep 0.1; done
    echo "== Missile, $chunk chunks (BE: $be_chunk), $inflight in flight, $per_tenant per tenant, spin_us $spin"
    if [ $first = 1 ]; then
      first=0
      python3 "$here/tests/gpu/torch_infer.py" "$out/pcie/plain.pt" --model resnet50 > /dev/null 2>&1
      run --name ident --class ls --report "$out/pcie/ident.report" -- \
        python3 "$here/tests/gpu/torch_infer.py" "$out/pcie/shim.pt" --model resnet50 > /dev/null 2>&1
      python3 "$here/tests/gpu/compare_outputs.py" "$out/pcie/plain.pt" "$out/pcie/shim.pt" \
        && echo "PASS resnet50 outputs bitwise identical under missile-run with copies scheduled" \
        || echo "FAIL resnet50 outputs differ under missile-run"
      grep -E "scheduled|missiled" "$out/pcie/ident.report"; rm -f "$out"/pcie/*.pt
    fi
    run --name ls --class ls -- $T lat --seconds $S --tag $m-ls-alone
    run --name be --class be -- $T bulk --mib 1024 --seconds $S --tag $m-be-alone
    run --name be --class be -- $T bulk --mib 1024 --seconds $((S + 4)) --tag $m-be-next-to-ls > "$out/pcie/m-be-$m" 2>&1 & pid=$!; ready m-be-$m
    run --name ls --class ls -- $T lat --seconds $S --tag $m-ls-under-be
    ctl tenants
    wait $pid; grep RESULT "$out/pcie/m-be-$m"
    # (c) weights 1:3, both best-effort, measured over the same window
    at=$(( $(date +%s) + 12 ))
    run --name be1 --class be -- $T bulk --mib 1024 --seconds $((S + 4)) --tag $m-weight1 --start-at $at > "$out/pcie/m-w1-$m" 2>&1 & p1=$!; ready m-w1-$m
    run --name be3 --class be -- $T bulk --mib 1024 --seconds $((S + 4)) --tag $m-weight3 --start-at $at > "$out/pcie/m-w3-$m" 2>&1 & p3=$!; ready m-w3-$m
    ctl set --name be1 --weight 1024 && ctl set --name be3 --weight 3072
    sleep 2; ctl tenants
    wait $p1 $p3; grep RESULT "$out/pcie/m-w1-$m" "$out/pcie/m-w3-$m"
    # (d) both directions
    run --name beh --class be -- $T bulk --mib 1024 --seconds $((S + 4)) --tag $m-both-h2d > "$out/pcie/m-h-$m" 2>&1 & ph=$!; ready m-h-$m
    run --name bed --class be -- $T bulk --mib 1024 --seconds $((S + 4)) --dir d2h --tag $m-both-d2h > "$out/pcie/m-d-$m" 2>&1 & pd=$!; ready m-d-$m
    run --name ls --class ls -- $T lat --seconds $S --tag $m-ls-under-both
    wait $ph $pd; grep RESULT "$out/pcie/m-h-$m" "$out/pcie/m-d-$m"
    # (e) ResNet-50 end to end
    run --name web --class ls -- $R --seconds $S --tag $m-resnet-alone
    run --name be --class be -- $T bulk --mib 1024 --seconds $((S + 8)) --tag $m-be-next-to-resnet > "$out/pcie/m-rbe-$m" 2>&1 & pid=$!; ready m-rbe-$m
    run --name web --class ls -- $R --seconds $S --tag $m-resnet-under-be
    wait $pid; grep RESULT "$out/pcie/m-rbe-$m"
    echo "missiled CPU time (user+system, s) over this setting: $(awk '{print ($14 + $15) / 100}' /proc/$daemon/stat)"
    kill -TERM $daemon; wait $daemon
  done
  echo "== summary"
} 2>&1 | tee "$out/pcie_on_gpu.log"
grep RESULT "$out/pcie_on_gpu.log" | sort -u > "$out/pcie_summary.txt"
tar -C "$out" -czf "$out/pcie_results.tgz" pcie && rm -rf "$out/pcie"

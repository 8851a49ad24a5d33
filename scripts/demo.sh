#!/usr/bin/env bash
# The main job: installs what is missing and builds (the output goes to a log file), then shows
# what Missile is for: an LS tenant's request latency alone, next to a BE tenant spinning kernels
# with no isolation, and under Missile, with the BE's kernel rate in each; then starts missiled
# and two tenants (one latency-sensitive, one best-effort) under libmissile.so, and shows
# `missilectl status` and `missilectl tenants`. The latency table always runs on the driver test
# double (tests/fakecuda), whose compute engine time-slices processes as a GPU does, and says so;
# the tenants after it use the real driver on a machine with an NVIDIA GPU, the test double
# elsewhere, and say which.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$PWD/${MISSILE_BUILD_DIR:-build}
mkdir -p "$build"
log=$build/demo-build.log
echo "demo: installing what is missing and building; the output goes to $log"
if ! { ./scripts/install-deps.sh && \
       MISSILE_BUILD_TARGETS="missiled missilectl missile-run missile fakecuda tenant_probe pace_probe" \
         ./scripts/build.sh; } > "$log" 2>&1; then
  echo "demo: the build FAILED; the end of $log:" >&2
  tail -n 40 "$log" >&2
  exit 1
fi
work=$(mktemp -d /tmp/missile-demo-XXXXXX)
chmod 755 "$work"
socket=$work/missiled.sock
shm=/fakecuda-demo-$$
daemon=""
cleanup() {
  [ -n "$daemon" ] && kill -TERM "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null || true
  rm -rf "$work" "/dev/shm$shm" "/dev/shm$shm-iso"
}
trap cleanup EXIT

# Starts missiled with the configuration $1 (its socket $work/$2.sock), the environment in
# env_args; waits for its socket.
start_daemon() {
  chmod 644 "$1"
  env "${env_args[@]}" "$build/daemon/missiled" --config "$1" 2> "$work/$2.log" &
  daemon=$!
  for _ in $(seq 1 100); do [ -S "$work/$2.sock" ] && break; sleep 0.1; done
  [ -S "$work/$2.sock" ] || { cat "$work/$2.log"; echo "demo: missiled did not start" >&2; exit 1; }
}
stop_daemon() {
  kill -TERM "$daemon" && wait "$daemon" || true
  daemon=""
}

# ---- Isolation: an LS tenant's latency next to a BE tenant, on the test double's engine ----
# The LS: 300 requests 3 ms apart, each 4 kernels of 200 us run one after the other (each
# synchronised before the next, as an eager service reading results); the BE: 200 us kernels
# back to back for 4 s (a synchronisation every 8). Processes take the engine in time slices of
# 1 ms (FAKECUDA_TIMESLICE_US), as GPU contexts do: with no isolation, each LS kernel waits for
# the BE's slice. Under Missile the BE's launches are held while the LS has work in flight.
probe=$build/tests/programs/pace_probe
ls_args=(requests 300 4 200 3)
be_secs=4
be_args=(spin 200 "$be_secs")
env_args=(LD_LIBRARY_PATH="$build/tests/fakecuda" MISSILE_REAL_LIBCUDA="$build/tests/fakecuda/libcuda.so.1"
          FAKECUDA_SHM="$shm-iso" FAKECUDA_TOTAL_MEM=8G FAKECUDA_TIMESLICE_US=1000)

# Runs the BE (its command line in "$@") in the background until it prints "ready", then lets
# it spin; be_out is its output file.
start_be() {
  be_out=$work/be-$RANDOM.out
  exec 5> >(env "${env_args[@]}" "$@" > "$be_out" 2>&1)
  for _ in $(seq 1 100); do grep -q ready "$be_out" 2>/dev/null && break; sleep 0.1; done
  exec 5>&-
}
# The BE's kernels per second, once it has finished.
be_rate() {
  for _ in $(seq 1 200); do grep -q "spin kernels" "$be_out" 2>/dev/null && break; sleep 0.1; done
  sed -nE 's/^spin kernels=([0-9]+)$/\1/p' "$be_out" | awk -v s="$be_secs" '{ printf "%d", $1 / s }'
}
# A percentile (p50, p99) of the LS's requests line $2, in microseconds.
pct() {
  sed -nE "s/.*$1_us=([0-9]+).*/\\1/p" <<< "$2"
}
# One table row: the LS's requests line in $2, the BE's kernel rate in $3; p50 and p99 also as
# multiples of the LS's alone.
row() {
  awk -v n="$1" -v a="$(pct p50 "$2")" -v b="$(pct p99 "$2")" -v r="$3" \
    -v a0="$(pct p50 "$ls_alone")" -v b0="$(pct p99 "$ls_alone")" \
    'BEGIN { printf "  %-26s %6.2f ms (%4.1fx) %6.2f ms (%4.1fx) %12s\n", n, a / 1000, a / a0,
             b / 1000, b / b0, r }'
}

echo
echo "demo: ISOLATION, SIMULATED BY THE DRIVER TEST DOUBLE (tests/fakecuda: a compute engine time-sliced"
echo "demo: between processes; no GPU result is claimed from this table)"
echo "demo: LS: pace_probe ${ls_args[*]} (300 requests of 4 x 200 us kernels, 3 ms apart)"
echo "demo: BE: pace_probe ${be_args[*]} (200 us kernels back to back for ${be_secs} s)"
ls_alone=$(env "${env_args[@]}" "$probe" "${ls_args[@]}" 2>&1 || true)
start_be "$probe" "${be_args[@]}"
be_alone=$(be_rate)
start_be "$probe" "${be_args[@]}"
sleep 0.3
ls_plain=$(env "${env_args[@]}" "$probe" "${ls_args[@]}" 2>&1 || true)
be_plain=$(be_rate)
cat > "$work/iso.toml" <<TOML
[daemon]
socket = "$work/iso.sock"
[gpu]
profile_dir = "$work/profiles"
[compute]
# as tests/daemon/pacing_process_test.cc: a loaded machine wakes processes late between kernels
ls_idle_us = 1000
TOML
start_daemon "$work/iso.toml" iso
run=("$build/cli/missile-run" --socket "$work/iso.sock")
start_be "${run[@]}" --name batch --class be -- "$probe" "${be_args[@]}"
sleep 0.3
ls_missile=$(env "${env_args[@]}" "${run[@]}" --name web --class ls -- "$probe" "${ls_args[@]}" \
             2>&1 || true)
be_missile=$(be_rate)
stop_daemon
for out in "$ls_alone" "$ls_plain" "$ls_missile"; do
  grep -q "p99_us=" <<< "$out" || { echo "demo: the LS failed: $out" >&2; exit 1; }
done
printf "  %-26s %16s %16s %12s\n" "" "LS p50" "LS p99" "BE kernels/s"
row "alone (each by itself)" "$ls_alone" "$be_alone"
row "together, no isolation" "$ls_plain" "$be_plain"
row "together, under Missile" "$ls_missile" "$be_missile"
echo
env_args=()
if [ -e /dev/nvidiactl ] && command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "demo: (the same on this machine's GPU, with PyTorch tenants: bench/colocation/run_on_gpu.sh;"
  echo "demo: the H200's results: docs/results.md)"
  echo
  echo "demo: QUOTAS: NVIDIA GPU found: missiled and the tenants use the REAL driver ($(nvidia-smi -L | head -n 1))"
else
  echo "demo: (on a GPU, with PyTorch tenants: bench/colocation/run_on_gpu.sh; the H200's results:"
  echo "demo: docs/results.md)"
  echo
  echo "demo: QUOTAS: no NVIDIA GPU here: missiled and the tenants use the driver TEST DOUBLE (tests/fakecuda)"
  echo "demo: (host memory stands in for VRAM; no GPU result is claimed from this run)"
  env_args=(LD_LIBRARY_PATH="$build/tests/fakecuda" MISSILE_REAL_LIBCUDA="$build/tests/fakecuda/libcuda.so.1"
            FAKECUDA_SHM="$shm" FAKECUDA_TOTAL_MEM=8G)
fi

cat > "$work/missiled.toml" <<TOML
[daemon]
socket = "$socket"
[gpu]
profile_dir = "$work/profiles"
[classes.be]
tenant_quota = "50%"
TOML
chmod 644 "$work/missiled.toml"
echo "demo: starting missiled --config $work/missiled.toml"
start_daemon "$work/missiled.toml" missiled

run=("$build/cli/missile-run" --socket "$socket")
probe=$build/tests/programs/tenant_probe
echo "demo: LS tenant 'web':   missile-run --name web --class ls -- tenant_probe info alloc:64 small:100 check hold"
exec 3> >(env "${env_args[@]}" "${run[@]}" --name web --class ls --report "$work/web.report" -- \
          "$probe" info alloc:64 small:100 check hold > "$work/web.out" 2>&1)
echo "demo: BE tenant 'batch': missile-run --name batch --class be -- tenant_probe info alloc:256 vmm:32 check hold"
exec 4> >(env "${env_args[@]}" "${run[@]}" --name batch --class be --report "$work/batch.report" -- \
          "$probe" info alloc:256 vmm:32 check hold > "$work/batch.out" 2>&1)
for _ in $(seq 1 100); do
  grep -q ready "$work/web.out" 2>/dev/null && grep -q ready "$work/batch.out" 2>/dev/null && break
  sleep 0.1
done
echo
"$build/cli/missilectl" --socket "$socket" status
echo
"$build/cli/missilectl" --socket "$socket" tenants
exec 3>&- 4>&-
sleep 0.5
echo
echo "demo: what the tenants saw (cuMemGetInfo reports the tenant's quota):"
sed -E 's/phys=([0-9]+),.*,([0-9]+)$/phys=\1 .. \2 (one per 2 MiB)/; s/^/  web:   /' "$work/web.out"
sed -E 's/phys=([0-9]+),.*,([0-9]+)$/phys=\1 .. \2 (one per 2 MiB)/; s/^/  batch: /' "$work/batch.out"
echo
echo "demo: libmissile.so's report for 'web' (calls, entry point, family, via cuGetProcAddress):"
grep -E "^#|^[1-9]" "$work/web.report" | sed 's/^/  /' || true

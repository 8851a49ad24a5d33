#!/usr/bin/env bash
# GPU check: missiled killed (SIGKILL) and started again under two running PyTorch tenants, an LS
# and a BE (restart_tenant.py): every pass of each, before, between and after, bitwise equal to
# its reference (eager and CUDA-graph outputs, fresh allocations, a 64 MiB copy round trip through
# the PCIe scheduler, 256 MiB kept from the start); both register again with the new missiled
# ("registered again with a restarted missiled"), which lists them; the new missiled stops
# cleanly with no tenant left. As systemd's Restart=on-failure does, with the real driver.
# usage: run_restart_gpu.sh RUNTIME_DIR OUT_DIR CONFIG   (MISSILE_SOCKET: the socket in CONFIG)
set -uo pipefail
rt=$1; out=$2; config=$3
here=$(cd "$(dirname "$0")" && pwd)
run="$rt/missile-run --shim $rt/libmissile.so --socket $MISSILE_SOCKET"
ctl="$rt/missilectl --socket $MISSILE_SOCKET"
fail=0
flags=$out/flags
mkdir -p "$flags"
rm -f "$flags"/*

start_daemon() {  # $1: log name; sets daemon
  rm -f "$MISSILE_SOCKET"
  "$rt/missiled" --config "$config" > "$out/$1" 2>&1 &
  daemon=$!
  for _ in $(seq 1 150); do [ -S "$MISSILE_SOCKET" ] && return 0; sleep 0.1; done
  echo "FAIL missiled ($1) did not open its socket"; return 1
}
listed() {  # whether missilectl tenants lists both tenants
  local t; t=$($ctl tenants 2>/dev/null) || return 1
  grep -q "restart-ls" <<< "$t" && grep -q "restart-be" <<< "$t"
}

start_daemon missiled-1.log || exit 1
pids=()
for class in ls be; do
  $run --name "restart-$class" --class $class -- python3 "$here/restart_tenant.py" \
    --until "$flags/until" --killed "$flags/killed" --restarted "$flags/restarted" --seconds 5 \
    > "$out/tenant-$class.out" 2> "$out/tenant-$class.err" &
  pids+=($!)
done
for f in "$out/tenant-ls.out" "$out/tenant-be.out"; do
  for _ in $(seq 1 600); do grep -q '^ready' "$f" 2>/dev/null && break; sleep 0.1; done
  grep -q '^ready' "$f" || { echo "FAIL a tenant never got ready: $f"; fail=1; }
done
listed && echo "both tenants registered with missiled" \
  || { echo "FAIL tenants not listed"; fail=1; }
sleep 2
echo "== kill -9 missiled (pid $daemon) under both tenants"
kill -KILL "$daemon"
wait "$daemon" 2>/dev/null
touch "$flags/killed"
sleep 3
echo "== start missiled again"
start_daemon missiled-2.log || fail=1
back=0
for _ in $(seq 1 200); do listed && { back=1; break; }; sleep 0.1; done
[ $back = 1 ] && echo "both tenants listed by the restarted missiled" \
  || { echo "FAIL the restarted missiled does not list both tenants"; fail=1; }
$ctl tenants | tee "$out/tenants-after.txt"
touch "$flags/restarted"
sleep 3
touch "$flags/until"
for i in 0 1; do
  class=$([ $i = 0 ] && echo ls || echo be)
  wait "${pids[$i]}"; st=$?
  echo "-- tenant $class exit $st: $(grep '^passes' "$out/tenant-$class.out")"
  grep 'differs' "$out/tenant-$class.out" | head -5
  grep -E 'registered again|session with missiled has ended|missiled is gone' \
    "$out/tenant-$class.err" | head -5
  [ $st = 0 ] \
    || { echo "FAIL tenant $class exit status $st"; tail -20 "$out/tenant-$class.err"; fail=1; }
  grep -q "registered again with a restarted missiled" "$out/tenant-$class.err" \
    || { echo "FAIL tenant $class did not register again"; fail=1; }
done
left=$($ctl tenants 2>/dev/null | grep -c "restart-" || true)
[ "${left:-0}" = 0 ] || { echo "FAIL tenants still listed after they exited"; fail=1; }
kill -TERM "$daemon" 2>/dev/null
wait "$daemon"; st=$?
[ $st = 0 ] \
  || { echo "FAIL the restarted missiled exit status $st"; tail -20 "$out/missiled-2.log"; fail=1; }
[ $fail = 0 ] && echo "PASS missiled killed and restarted under an LS and a BE tenant"
exit $fail

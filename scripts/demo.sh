#!/usr/bin/env bash
# The main job: installs what is missing, builds, then starts missiled and two tenants (one
# latency-sensitive, one best-effort) under libmissile.so, and shows `missilectl status` and
# `missilectl tenants`. On a machine with an NVIDIA GPU it uses the real driver; elsewhere the
# driver test double (tests/fakecuda), and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
build=$PWD/${MISSILE_BUILD_DIR:-build}
work=$(mktemp -d /tmp/missile-demo-XXXXXX)
chmod 755 "$work"
socket=$work/missiled.sock
shm=/fakecuda-demo-$$
daemon=""
cleanup() {
  [ -n "$daemon" ] && kill -TERM "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null || true
  rm -rf "$work" "/dev/shm$shm"
}
trap cleanup EXIT

env_args=()
if [ -e /dev/nvidiactl ] && command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "demo: NVIDIA GPU found: missiled and the tenants use the REAL driver ($(nvidia-smi -L | head -n 1))"
else
  echo "demo: no NVIDIA GPU here: missiled and the tenants use the driver TEST DOUBLE (tests/fakecuda)"
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
env "${env_args[@]}" "$build/daemon/missiled" --config "$work/missiled.toml" 2> "$work/missiled.log" &
daemon=$!
for _ in $(seq 1 100); do [ -S "$socket" ] && break; sleep 0.1; done
[ -S "$socket" ] || { cat "$work/missiled.log"; echo "demo: missiled did not start" >&2; exit 1; }

run=("$build/cli/missile-run" --socket "$socket")
probe=$build/tests/programs/tenant_probe
echo
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

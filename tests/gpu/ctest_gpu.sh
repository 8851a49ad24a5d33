#!/usr/bin/env bash
# One GPU check as a ctest test (label gpu, tests/gpu/CMakeLists.txt): this build's shim and
# daemon on the real driver and GPU.
#   shim           run_shim_gpu.sh: driver_probe and PyTorch ResNet-50 plain vs under the shim
#   daemon         run_daemon_gpu.sh against a missiled of this build: tenant_probe, ResNet-50 and
#                  BERT under missile-run bitwise identical to plain runs, quotas
#   frameworks     bench/run_frameworks_on_gpu.sh: CuPy, JAX, Triton and PyTorch under missile-run
#                  bitwise identical to plain runs (frameworks_check.py)
#   selfcontained  bench/run_selfcontained_shim_on_gpu.sh: the shim in a tenant with no library
#                  path (selfcontained_tenant.py)
#   restart        run_restart_gpu.sh: missiled killed and started again under an LS and a BE
#                  PyTorch tenant, their results bitwise the same throughout
# Exit 0: passed. 77 (ctest's SKIP_RETURN_CODE): skipped, the reason on the first line of the
# output: no GPU here, no PyTorch with CUDA, or for frameworks none of them installed. Any other
# status: failed. Never passes without having run its checks.
# usage: ctest_gpu.sh CHECK   with MISSILED MISSILE_RUN MISSILECTL MISSILE_SHIM TENANT_PROBE
#                             DRIVER_PROBE in the environment (CMake sets them)
set -uo pipefail
check=${1:-}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
skip() { echo "SKIPPED gpu check $check: $*"; exit 77; }
fail() { echo "FAILED gpu check $check: $*"; exit 1; }
case $check in shim|daemon|frameworks|selfcontained|restart) ;; *) fail "unknown check '$check'" ;; esac
if [ ! -e /dev/nvidiactl ] || ! nvidia-smi -L >/dev/null 2>&1; then
  skip "no NVIDIA GPU here (needs /dev/nvidiactl and a working nvidia-smi -L)"
fi
# The real driver only: the test double must never stand in for it here.
unset FAKECUDA_ALLOW_WITH_GPU MISSILE_REAL_LIBCUDA MISSILE_DISABLE
python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 2)' >/dev/null 2>&1
case $? in
  0) ;;
  2) skip "PyTorch is installed without CUDA (torch.cuda.is_available() is False)" ;;
  *) skip "PyTorch is not installed (python3 -c 'import torch' failed); install it to run this check" ;;
esac
for v in MISSILED MISSILE_RUN MISSILECTL MISSILE_SHIM TENANT_PROBE DRIVER_PROBE; do
  [ -x "${!v:-}" ] || [ -f "${!v:-}" ] || fail "$v is not set to a built file (run it through ctest)"
done

work=$(mktemp -d /tmp/missile-gpu-XXXXXX)
rt=$work/rt
out=$work/out
mkdir -p "$rt" "$out" "$work/profiles"
ln -s "$MISSILED" "$rt/missiled"
ln -s "$MISSILE_RUN" "$rt/missile-run"
ln -s "$MISSILECTL" "$rt/missilectl"
ln -s "$MISSILE_SHIM" "$rt/libmissile.so"
ln -s "$TENANT_PROBE" "$rt/tenant_probe"
ln -s "$DRIVER_PROBE" "$rt/driver_probe"
echo "gpu check $check: $(nvidia-smi -L | head -n 1); work directory $work"

rc=0
case $check in
  shim)
    bash "$here/run_shim_gpu.sh" "$rt/libmissile.so" "$rt/driver_probe" "$out"
    rc=$?
    ;;
  daemon)
    export MISSILE_SOCKET=$work/missiled.sock
    printf '[daemon]\nsocket = "%s"\n[gpu]\nprofile_dir = "%s"\n' "$MISSILE_SOCKET" \
      "$work/profiles" > "$work/missiled.toml"
    chmod 644 "$work/missiled.toml"
    "$rt/missiled" --config "$work/missiled.toml" > "$out/missiled.log" 2>&1 &
    daemon=$!
    for _ in $(seq 1 100); do [ -S "$MISSILE_SOCKET" ] && break; sleep 0.1; done
    if [ -S "$MISSILE_SOCKET" ]; then
      bash "$here/run_daemon_gpu.sh" "$rt" "$out"
      rc=$?
    else
      echo "missiled did not start:"; rc=1
    fi
    kill -TERM "$daemon" 2>/dev/null
    wait "$daemon" || { echo "missiled exit status $?"; rc=1; }
    tail -n 30 "$out/missiled.log"
    ;;
  frameworks)
    # The script's status is not its verdict: read it from its log, and pass only if at least
    # one framework ran and passed.
    bash "$root/bench/run_frameworks_on_gpu.sh" "$rt" "$out"
    log=$out/frameworks.log
    passed=$(grep -c "^PASS " "$log" 2>/dev/null || true)
    if grep -q "^FAIL " "$log" || ! grep -q "^frameworks: all PASS" "$log"; then
      rc=1
    elif [ "${passed:-0}" -eq 0 ]; then
      skip "none of CuPy, JAX, Triton or PyTorch could run here (see the SKIP lines above)"
    fi
    ;;
  selfcontained)
    bash "$root/bench/run_selfcontained_shim_on_gpu.sh" "$rt" "$out"
    rc=$?
    ;;
  restart)
    export MISSILE_SOCKET=$work/missiled.sock
    printf '[daemon]\nsocket = "%s"\n[gpu]\nprofile_dir = "%s"\n' "$MISSILE_SOCKET" \
      "$work/profiles" > "$work/missiled.toml"
    chmod 644 "$work/missiled.toml"
    bash "$here/run_restart_gpu.sh" "$rt" "$out" "$work/missiled.toml"
    rc=$?
    ;;
esac
[ $rc = 0 ] || fail "exit status $rc (outputs in $work/out)"
echo "PASSED gpu check $check"
rm -rf "$work"

#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs an unmodified CUDA driver program
# under libmissile.so, printing what the shim intercepted. On a machine with an NVIDIA GPU it
# uses the real driver; elsewhere it uses the driver test double (tests/fakecuda), and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
build=${MISSILE_BUILD_DIR:-build}
shim="$PWD/$build/libintercept/libmissile.so"
probe="$PWD/$build/tests/programs/driver_probe"

env_args=()
if [ -e /dev/nvidiactl ] && command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "demo: NVIDIA GPU found: running against the REAL driver ($(nvidia-smi -L | head -n 1))"
else
  fake="$PWD/$build/tests/fakecuda/libcuda.so.1"
  echo "demo: no NVIDIA GPU here: running against the driver TEST DOUBLE ($fake)"
  echo "demo: (host memory stands in for VRAM; no GPU result is claimed from this run)"
  env_args=(MISSILE_REAL_LIBCUDA="$fake" FAKECUDA_SHM="/fakecuda-demo-$$")
fi

for mode in direct getproc2; do
  echo
  echo "demo: driver_probe $mode, under LD_PRELOAD=libmissile.so (report: calls, entry point, family, handed out by cuGetProcAddress)"
  env "${env_args[@]}" LD_PRELOAD="$shim" MISSILE_REPORT=stderr "$probe" "$mode"
done
rm -f "/dev/shm/fakecuda-demo-$$"

#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test. GPU tests (ctest label "gpu") run only
# where an NVIDIA GPU is present; elsewhere they are listed as skipped, never counted as passed.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
build_dir=${MISSILE_BUILD_DIR:-build}
root=$(pwd)
cd "$build_dir"
if [ -e /dev/nvidiactl ] && command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "test: NVIDIA GPU present: running every test, GPU tests included"
  ctest --output-on-failure --timeout 600
else
  skipped=$(ctest -N -L gpu | grep -E "^ *Test +#" | sed -E 's/^ *Test +#[0-9]+: //' || true)
  if [ -n "$skipped" ]; then
    echo "test: no NVIDIA GPU here: SKIPPING these GPU tests (label gpu):"
    echo "$skipped" | sed 's/^/  skipped: /'
  fi
  ctest --output-on-failure --timeout 600 -LE gpu
fi
cd "$root"

# No hand-written C++ file over 600 lines, no function over 80 without a comment saying why.
echo "test: sizes of files and functions (scripts/check-size.py)"
python3 scripts/check-size.py
echo "test: sizes of files and functions: OK"

# The lock annotations (ABSL_GUARDED_BY & co., FAKECUDA_GUARDED_BY & co.) are checked only by
# clang: compile everything but the benchmarks once more with clang++ and -Wthread-safety as an
# error. Only a static check: with ninja, every source is parsed and checked (-fsyntax-only,
# MISSILE_SYNTAX_ONLY) and nothing is generated or linked, which takes a fraction of a build.
# Other clang warnings stay warnings. The shim links the shared libraries there: rebuilding
# abseil and protobuf (MISSILE_SHIM_STATIC) would check nothing more.
#   MISSILE_TSA_BUILD_DIR  its build directory (default: build-tsa)
if command -v clang++ >/dev/null; then
  tsa_dir=${MISSILE_TSA_BUILD_DIR:-build-tsa}
  tsa_start=$SECONDS
  echo "test: clang -Wthread-safety check in $tsa_dir"
  if command -v ninja >/dev/null; then
    CC=clang CXX=clang++ cmake -S . -B "$tsa_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DMISSILE_BUILD_BENCH=OFF -DMISSILE_WERROR=OFF -DMISSILE_SHIM_STATIC=OFF \
      -DMISSILE_SYNTAX_ONLY=ON -DCMAKE_CXX_FLAGS="-Wthread-safety -Werror=thread-safety" >/dev/null
    # Every C++ object of the tree (generated sources are generated first, as their
    # dependencies); assembly sources have no locks to check.
    mapfile -t tsa_objects < <(ninja -C "$tsa_dir" -t targets all |
      sed -n 's/^\(.*\.\(cc\|cpp\)\.o\): CXX_COMPILER.*/\1/p')
    [ "${#tsa_objects[@]}" -gt 0 ] || { echo "test: no sources to check" >&2; exit 1; }
    ninja -C "$tsa_dir" -j "$(nproc)" "${tsa_objects[@]}" | { grep -v '^\[[0-9]*/[0-9]*\] ' || true; }
    echo "test: clang -Wthread-safety check: ${#tsa_objects[@]} sources OK in $((SECONDS - tsa_start)) s"
  else
    CC=clang CXX=clang++ cmake -S . -B "$tsa_dir" -DCMAKE_BUILD_TYPE=Release \
      -DMISSILE_BUILD_BENCH=OFF -DMISSILE_WERROR=OFF -DMISSILE_SHIM_STATIC=OFF \
      -DCMAKE_CXX_FLAGS="-Wthread-safety -Werror=thread-safety" >/dev/null
    cmake --build "$tsa_dir" --parallel "$(nproc)"
    echo "test: clang -Wthread-safety build: OK in $((SECONDS - tsa_start)) s"
  fi
else
  echo "test: clang++ not found: SKIPPING the clang -Wthread-safety build" >&2
fi

# Sanitizer builds of the CPU tests (ASan+UBSan, TSan) and the fuzz targets, run for a bounded
# time: scripts/sanitize.sh and scripts/fuzz.sh, documented in docs/testing.md. CI (CI=true)
# always runs both; elsewhere MISSILE_SKIP_SANITIZERS=1 or MISSILE_SKIP_FUZZ=1 skips one.
if [ "${CI:-}" = "true" ] || [ "${MISSILE_SKIP_SANITIZERS:-0}" != "1" ]; then
  ./scripts/sanitize.sh
else
  echo "test: MISSILE_SKIP_SANITIZERS=1: SKIPPING the sanitizer builds" >&2
fi
if [ "${CI:-}" = "true" ] || [ "${MISSILE_SKIP_FUZZ:-0}" != "1" ]; then
  ./scripts/fuzz.sh
else
  echo "test: MISSILE_SKIP_FUZZ=1: SKIPPING the fuzz targets" >&2
fi

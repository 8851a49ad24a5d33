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
  # The in-process unit tests side by side, then the others one at a time: the process, test
  # double, soak and packaging tests wait on real processes against wall-time bounds.
  ctest --output-on-failure --timeout 600 -L '^unit$' -LE gpu -j "$(nproc)"
  ctest --output-on-failure --timeout 600 -LE 'gpu|^unit$'
fi
cd "$root"

# No hand-written C++ file over 600 lines, no function over 80 without a comment saying why.
echo "test: sizes of files and functions (scripts/check-size.py)"
python3 scripts/check-size.py
echo "test: sizes of files and functions: OK"

# The lock annotations (ABSL_GUARDED_BY & co., FAKECUDA_GUARDED_BY & co.) are checked only by
# clang: every C++ source but the benchmarks' is compiled once more with clang++ and
# -Wthread-safety as an error. Only a static check: with ninja, scripts/tsa_check.py parses each
# source (-fsyntax-only, from compile_commands.json) after generating the generated sources, and
# nothing is compiled to code or linked, which takes about a third of a build. Other clang
# warnings stay warnings. The shim links the shared libraries there: rebuilding abseil and
# protobuf (MISSILE_SHIM_STATIC) would check nothing more.
#   MISSILE_TSA_BUILD_DIR  its build directory (default: build-tsa)
if command -v clang++ >/dev/null; then
  tsa_dir=${MISSILE_TSA_BUILD_DIR:-build-tsa}
  tsa_start=$SECONDS
  echo "test: clang -Wthread-safety check in $tsa_dir"
  tsa_generator=()
  command -v ninja >/dev/null && tsa_generator=(-G Ninja)
  CC=clang CXX=clang++ cmake -S . -B "$tsa_dir" "${tsa_generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DMISSILE_BUILD_BENCH=OFF -DMISSILE_WERROR=OFF -DMISSILE_SHIM_STATIC=OFF \
    -DCMAKE_CXX_FLAGS="-Wthread-safety -Werror=thread-safety" >/dev/null
  if command -v ninja >/dev/null; then
    python3 scripts/tsa_check.py "$tsa_dir" "$(nproc)"
  else
    cmake --build "$tsa_dir" --parallel "$(nproc)"
  fi
  echo "test: clang -Wthread-safety check: OK in $((SECONDS - tsa_start)) s"
else
  echo "test: clang++ not found: SKIPPING the clang -Wthread-safety build" >&2
fi

# Sanitizer builds, documented in docs/testing.md: scripts/sanitize.sh, the TSan build of the
# threaded CPU tests; scripts/fuzz.sh, one clang ASan+UBSan build of the daemon's tenant-facing
# unit tests and the fuzz targets, which it runs for a bounded time. CI (CI=true) always runs
# both; elsewhere MISSILE_SKIP_SANITIZERS=1 skips the TSan build and MISSILE_SKIP_FUZZ=1 the
# ASan+UBSan build (its unit tests with the fuzzing).
if [ "${CI:-}" = "true" ] || [ "${MISSILE_SKIP_SANITIZERS:-0}" != "1" ]; then
  ./scripts/sanitize.sh
else
  echo "test: MISSILE_SKIP_SANITIZERS=1: SKIPPING the TSan build" >&2
fi
if [ "${CI:-}" = "true" ] || [ "${MISSILE_SKIP_FUZZ:-0}" != "1" ]; then
  ./scripts/fuzz.sh
else
  echo "test: MISSILE_SKIP_FUZZ=1: SKIPPING the ASan+UBSan unit tests and the fuzz targets" >&2
fi

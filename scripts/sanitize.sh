#!/usr/bin/env bash
# Builds the CPU tests whose code runs on several threads at once with ThreadSanitizer, in
# build-tsan/, and runs them (never the gpu label). The ASan+UBSan unit tests run in the clang
# fuzz build (scripts/fuzz.sh), which compiles the daemon's libraries with ASan once for them and
# for the fuzz targets.
# The TSan build uses the default compiler (GCC on Debian 12), like the main build. GCC also links
# the sanitizer runtime into shared libraries, which a test preloading the shim (LD_PRELOAD) or
# loading the driver test double (libcuda.so.1) would need; none of the tests below does: they
# run in process.
# To fit CI's 2 cores, the build compiles only the test targets it runs (below, with why).
#   MISSILE_SANITIZERS      which builds to run (default: thread, the only one; ASan+UBSan is
#                           scripts/fuzz.sh's)
#   MISSILE_TSAN_BUILD_DIR  build directory (default: build-tsan)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
sanitizers=${MISSILE_SANITIZERS:-thread}

# TSan: the tests whose code runs on several threads at once: the pool under concurrent
# tenants, the copy arbiter's thread against the tenant side, the pacing sampler, the daemon
# core; and the replays of the side-channel fuzz target (the server's thread against its
# clients and the core) and of the copy-channel one. Single-threaded pure logic has nothing
# for TSan.
tsan_targets=(
  vram_pool_test copy_arbiter_test pacing_domain_test shim_pacer_test daemon_core_test
  side_channel_fuzzer copy_channel_fuzzer
)

run() {
  local name=$1 sanitizer=$2 dir=$3
  shift 3
  local targets=("$@")
  local generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  echo "sanitize: $name build in $dir (${#targets[@]} targets)"
  local start=$SECONDS
  # Tests are listed when ctest runs (PRE_TEST), not after each link: an instrumented test
  # program that starts slowly on a busy machine must not fail the build.
  cmake -S . -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMISSILE_SANITIZE="$sanitizer" -DMISSILE_BUILD_BENCH=OFF -DMISSILE_WERROR=OFF \
    -DCMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE=PRE_TEST >/dev/null
  cmake --build "$dir" --parallel "$(nproc)" --target "${targets[@]}"
  echo "sanitize: $name build took $((SECONDS - start)) s"
  start=$SECONDS
  # Only the tests whose program is one of the targets built here (instrumented).
  local include
  include=$(cd "$dir" && ctest --show-only=json-v1 -LE gpu |
    python3 "$root/scripts/tests_of_programs.py" "${targets[@]}")
  [ -n "$include" ] || { echo "sanitize: $name: no test of the built targets found" >&2; exit 1; }
  (cd "$dir" && ctest --output-on-failure --timeout 900 -LE gpu -R "$include")
  echo "sanitize: $name tests took $((SECONDS - start)) s"
}

for s in $sanitizers; do
  case $s in
    address)
      echo "sanitize: the ASan+UBSan unit tests run in the clang fuzz build:" \
        "scripts/fuzz.sh (MISSILE_FUZZ_SECONDS=0 replays the corpus without fuzzing)" >&2
      exit 1
      ;;
    thread)
      TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/sanitizers/tsan.supp:${TSAN_OPTIONS:-}" \
        run "TSan" thread "${MISSILE_TSAN_BUILD_DIR:-build-tsan}" "${tsan_targets[@]}"
      ;;
    *) echo "sanitize: unknown sanitizer '$s' (thread)" >&2; exit 1 ;;
  esac
done
echo "sanitize: OK"

#!/usr/bin/env bash
# Builds the CPU tests with sanitizers and runs them (never the gpu label):
#   build-asan/  AddressSanitizer + UndefinedBehaviorSanitizer (and LeakSanitizer)
#   build-tsan/  ThreadSanitizer
# Both use the default compiler (GCC on Debian 12): it links the sanitizer runtime into shared
# libraries too, which the shim (LD_PRELOAD) and the driver test double (libcuda.so.1) need.
# To fit CI's 2 cores, each build compiles only the test targets it runs (below, with why).
#   MISSILE_SANITIZERS     which builds to run (default: "address thread")
#   MISSILE_ASAN_BUILD_DIR, MISSILE_TSAN_BUILD_DIR  build directories
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
sanitizers=${MISSILE_SANITIZERS:-"address thread"}

# ASan + UBSan: the daemon's pieces that a tenant's input reaches (side channel server and
# descriptor passing, shared regions, daemon core, VRAM pool, copy arbiter, pacing domain and
# the pacer that reads its peers' pages) with their unit tests, and the corpus replays of the
# side-channel, copy-channel, configuration and pacing-region fuzz targets. The gRPC handlers run under ASan+UBSan in the fuzz build (scripts/fuzz.sh), so the
# gRPC-heavy targets are not built a second time here. Left out for CI's time: the pure-logic
# tests (scheduler, colours, sizes), which the fuzz targets reach with sanitizers anyway, and
# the multi-process tests (shim, test double, daemon), whose instrumented build is the largest
# part of the tree.
asan_targets=(
  common_fd_passing_test common_shm_region_test common_pacing_region_test vram_pool_test
  copy_arbiter_test pacing_domain_test shim_pacer_test daemon_core_test
  side_channel_fuzzer copy_channel_fuzzer config_fuzzer pacing_region_fuzzer
)
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
  # Only the tests whose program is one of the targets built here (instrumented): tests of
  # other targets (listed as <target>_NOT_BUILT) and tests run by scripts (packaging, soak,
  # manifest checks, the shim's static checks) belong to the main build.
  local include
  include=$(cd "$dir" && ctest --show-only=json-v1 -LE gpu | python3 -c '
import json, os, re, sys
built = set(sys.argv[1:])
names = [t["name"] for t in json.load(sys.stdin)["tests"]
         if t.get("command") and os.path.basename(t["command"][0]) in built]
print("^(" + "|".join(re.escape(n) for n in names) + ")$" if names else "")
' "${targets[@]}")
  [ -n "$include" ] || { echo "sanitize: $name: no test of the built targets found" >&2; exit 1; }
  (cd "$dir" && ctest --output-on-failure --timeout 900 -LE gpu -R "$include")
  echo "sanitize: $name tests took $((SECONDS - start)) s"
}

for s in $sanitizers; do
  case $s in
    address)
      # verify_asan_link_order=0: the multi-process tests preload the (instrumented) shim,
      # which the loader then places before the ASan runtime; the runtime is still loaded
      # first by the instrumented programs. The suppressions are for third-party code only.
      ASAN_OPTIONS="verify_asan_link_order=0:detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}" \
      LSAN_OPTIONS="suppressions=$root/tests/sanitizers/lsan.supp:${LSAN_OPTIONS:-}" \
      UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}" \
        run "ASan+UBSan" address "${MISSILE_ASAN_BUILD_DIR:-build-asan}" "${asan_targets[@]}"
      ;;
    thread)
      TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/sanitizers/tsan.supp:${TSAN_OPTIONS:-}" \
        run "TSan" thread "${MISSILE_TSAN_BUILD_DIR:-build-tsan}" "${tsan_targets[@]}"
      ;;
    *) echo "sanitize: unknown sanitizer '$s' (address, thread)" >&2; exit 1 ;;
  esac
done
echo "sanitize: OK"

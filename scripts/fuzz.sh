#!/usr/bin/env bash
# The clang ASan+UBSan build, in build-fuzz/: the libFuzzer targets (tests/fuzz) and the unit
# tests of the daemon's pieces that a tenant's input reaches, compiled in one build so that the
# libraries they share are compiled with ASan once. Runs those unit tests, replays each target's
# corpus (seeds and regression inputs), then fuzzes each target for a bounded time. New inputs go
# to a scratch copy of the corpus, never into the repository; a crash leaves its input in
# build-fuzz/artifacts/ (add it to tests/fuzz/corpus/<target>/ as regression-<what> once fixed)
# and fails the script.
#   MISSILE_FUZZ_BUILD_DIR   build directory (default: build-fuzz)
#   MISSILE_FUZZ_SECONDS     fuzzing time per target (default 45; 0 replays the corpus only)
#   MISSILE_FUZZ_TARGETS     the targets to run (default: all five)
#   MISSILE_FUZZ_UNIT_TESTS  the unit test programs to build and run (default: the list below;
#                            set and empty: none)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build_dir=${MISSILE_FUZZ_BUILD_DIR:-build-fuzz}
seconds=${MISSILE_FUZZ_SECONDS:-45}
targets=${MISSILE_FUZZ_TARGETS:-"rpc_fuzzer side_channel_fuzzer copy_channel_fuzzer config_fuzzer pacing_region_fuzzer"}
# The unit tests under ASan + UBSan: the daemon's pieces that a tenant's input reaches (side
# channel server and descriptor passing, shared regions, daemon core, VRAM pool, copy arbiter,
# pacing domain and the pacer that reads its peers' pages). Every target of this build is
# compiled with -fsanitize=fuzzer-no-link,address,undefined (cmake/sanitizers.cmake); only the
# fuzz targets link libFuzzer, so these keep gtest's main. Each is an in-process test: nothing
# preloads the shim or loads the driver test double, so clang's sanitizer runtime, linked into
# the executable only, serves them. Left out for CI's time: the pure-logic tests (scheduler,
# colours, sizes), which the fuzz targets reach with sanitizers anyway, and the multi-process
# tests (shim, test double, daemon), whose instrumented build is the largest part of the tree.
unit_tests=(
  common_fd_passing_test common_shm_region_test common_pacing_region_test vram_pool_test
  copy_arbiter_test pacing_domain_test shim_pacer_test daemon_core_test
)
if [ -n "${MISSILE_FUZZ_UNIT_TESTS+set}" ]; then
  read -r -a unit_tests <<<"$MISSILE_FUZZ_UNIT_TESTS"
fi

if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found (scripts/install-deps.sh installs it)" >&2
  exit 1
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# The benchmarks are not needed; only the fuzz targets and the unit tests (and what they link)
# are built. Tests are listed when ctest runs (PRE_TEST), not after each link: an instrumented
# test program that starts slowly on a busy machine must not fail the build.
CC=clang CXX=clang++ cmake -S . -B "$build_dir" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMISSILE_FUZZ=ON -DMISSILE_BUILD_BENCH=OFF \
  -DMISSILE_WERROR=OFF -DCMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE=PRE_TEST "$@" >/dev/null
echo "fuzz: clang ASan+UBSan build in $build_dir ($(wc -w <<<"$targets") fuzz targets," \
  "${#unit_tests[@]} unit test programs)"
build_start=$SECONDS
# shellcheck disable=SC2086
cmake --build "$build_dir" --parallel "$(nproc)" --target $targets "${unit_tests[@]}"
echo "fuzz: build took $((SECONDS - build_start)) s"

# The unit tests: only the tests whose program is one of those built here (the fuzz targets'
# corpus replays run below, under libFuzzer). The suppressions are for third-party code only.
if [ ${#unit_tests[@]} -gt 0 ]; then
  unit_start=$SECONDS
  unit_env=(
    ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}"
    LSAN_OPTIONS="suppressions=$root/tests/sanitizers/lsan.supp:${LSAN_OPTIONS:-}"
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
  )
  include=$(cd "$build_dir" && env "${unit_env[@]}" ctest --show-only=json-v1 -LE gpu |
    python3 "$root/scripts/tests_of_programs.py" "${unit_tests[@]}")
  [ -n "$include" ] || { echo "fuzz: no test of the unit test programs found" >&2; exit 1; }
  (cd "$build_dir" &&
    env "${unit_env[@]}" ctest --output-on-failure --timeout 900 -LE gpu -R "$include")
  echo "fuzz: ASan+UBSan unit tests took $((SECONDS - unit_start)) s"
fi

artifacts="$build_dir/artifacts"
scratch="$build_dir/scratch-corpus"
mkdir -p "$artifacts"
# Fuzz targets leak-check every input (LeakSanitizer); a leak or a crash ends the run at once.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# One target: replays its corpus, then fuzzes it. Its lines go to $build_dir/$target.out, printed
# when it is done (the targets run side by side).
fuzz_one() {
  local target=$1 bin="$build_dir/tests/fuzz/$1" corpus="tests/fuzz/corpus/$1"
  echo "fuzz: $target: replaying $(find "$corpus" -type f | wc -l) inputs of $corpus"
  if ! "$bin" -runs=0 -artifact_prefix="$artifacts/$target-" "$corpus" >"$build_dir/$target.replay.log" 2>&1; then
    echo "fuzz: $target: FAILED replaying its corpus:"
    tail -n 60 "$build_dir/$target.replay.log"
    return 1
  fi
  [ "$seconds" -gt 0 ] || return 0
  rm -rf "${scratch:?}/$target"
  mkdir -p "$scratch/$target"
  echo "fuzz: $target: fuzzing for ${seconds} s"
  # -timeout: one input taking longer than 10 s is a hang; -rss_limit_mb: a runaway allocation.
  if ! "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
      -print_final_stats=1 -artifact_prefix="$artifacts/$target-" "$scratch/$target" "$corpus" \
      >"$build_dir/$target.fuzz.log" 2>&1; then
    echo "fuzz: $target: FAILED (input saved under $artifacts):"
    tail -n 80 "$build_dir/$target.fuzz.log"
    return 1
  fi
  grep -E "^stat::number_of_executed_units|^stat::new_units_added" "$build_dir/$target.fuzz.log" |
    sed "s/^/fuzz: $target: /"
}

# As many targets at once as there are CPUs (each fuzzer is one process on one core): on CI's
# two cores the five take three rounds of the fuzzing time instead of five.
fuzz_start=$SECONDS
status=0
pids=() names=()
collect() {  # waits for the oldest running target and prints its lines
  local rc=0
  wait "${pids[0]}" || rc=$?
  cat "$build_dir/${names[0]}.out"
  [ $rc -eq 0 ] || status=1
  pids=("${pids[@]:1}") names=("${names[@]:1}")
}
for target in $targets; do
  while [ ${#pids[@]} -ge "$(nproc)" ]; do collect; done
  fuzz_one "$target" >"$build_dir/$target.out" 2>&1 &
  pids+=($!) names+=("$target")
done
while [ ${#pids[@]} -gt 0 ]; do collect; done
echo "fuzz: replays and fuzzing took $((SECONDS - fuzz_start)) s"
[ $status -eq 0 ] && echo "fuzz: every target: OK"
exit $status

#!/usr/bin/env bash
# On the GPU machine (Ubuntu 24.04, no gRPC, protobuf or abseil installed): the self-contained
# libmissile.so (MISSILE_SHIM_STATIC, docs/interception.md "A self-contained shim") loads and
# works in a tenant that has NO library path. Only missiled gets RUNTIME_DIR/lib; the tenant runs
# under `env -u LD_LIBRARY_PATH`, and missile-run, if it needs libraries of RUNTIME_DIR/lib, gets
# them through the dynamic loader's --library-path, which its exec'd program does not inherit.
#  1. `ldd libmissile.so` with no library path: nothing "not found"; its NEEDED and glibc floor;
#  2. PyTorch through missile-run: allocations, H2D/D2H copies, fp64/fp32 matmul against the CPU,
#     and the shim's MISSILE_REPORT: connected to missiled, allocations served from its blocks,
#     copies through its PCIe scheduler (tests/gpu/selfcontained_tenant.py torch);
#  3. the same in a Python process that also uses its own grpc (and protobuf), if installed
#     there (skipped otherwise).
# usage: bench/run_selfcontained_shim_on_gpu.sh RUNTIME_DIR OUT_DIR   (about 2 minutes)
set -uo pipefail
rt=$(cd "$1" && pwd); out=$2
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out" /tmp/missile/profiles
unset LD_LIBRARY_PATH MISSILE_REAL_LIBCUDA MISSILE_DISABLE
sock=/tmp/missile/selfcontained.sock
tenant="$here/tests/gpu/selfcontained_tenant.py"
fail=0
pass() { echo "PASS $*"; }
failed() { echo "FAIL $*"; fail=1; }
{
  bash "$here/bench/gpu_header.sh" "bench/run_selfcontained_shim_on_gpu.sh"
  echo "== ldd libmissile.so, no library path"
  ldd "$rt/libmissile.so" 2>&1 | tee "$out/ldd-libmissile.txt"
  if grep -q "not found" "$out/ldd-libmissile.txt"; then
    failed "libmissile.so has unresolved libraries without a library path"
  else
    pass "libmissile.so resolves every library it needs without a library path"
  fi
  echo "NEEDED: $(readelf -d "$rt/libmissile.so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
  floor=$(objdump -T "$rt/libmissile.so" | grep -o 'GLIBC_[0-9.]*' | sort -u -V | tail -n 1)
  echo "glibc floor of libmissile.so: $floor; this machine: $(ldd --version | head -n 1)"
  ls -l "$rt/libmissile.so"

  # missile-run: without a library path if it can, else through the loader's --library-path.
  launcher=("$rt/missile-run")
  if ldd "$rt/missile-run" | grep -q "not found"; then
    echo "missile-run needs, from RUNTIME_DIR/lib: $(ldd "$rt/missile-run" | awk '/not found/{print $1}' | tr '\n' ' ')"
    loader=$(readelf -l "$rt/missile-run" | sed -n 's/.*interpreter: \(.*\)\]/\1/p')
    launcher=("$loader" --library-path "$rt/lib" "$rt/missile-run")
    echo "missile-run starts through $loader --library-path (not inherited by the tenant)"
  else
    echo "missile-run needs no library path either"
  fi

  printf '[daemon]\nsocket = "%s"\n[gpu]\nprofile_dir = "/tmp/missile/profiles"\n' "$sock" \
    > /tmp/missile/selfcontained.toml
  chmod 644 /tmp/missile/selfcontained.toml
  LD_LIBRARY_PATH="$rt/lib" timeout 150 "$rt/missiled" --config /tmp/missile/selfcontained.toml \
    > "$out/selfcontained-missiled.log" 2>&1 &
  daemon=$!
  for _ in $(seq 1 100); do [ -S "$sock" ] && break; sleep 0.1; done
  [ -S "$sock" ] || failed "missiled did not start (see selfcontained-missiled.log)"

  for mode in torch grpc; do
    report="$out/selfcontained-$mode.report"
    echo "== PyTorch tenant ($mode) under missile-run, env -u LD_LIBRARY_PATH"
    env -u LD_LIBRARY_PATH timeout 100 "${launcher[@]}" --shim "$rt/libmissile.so" \
      --socket "$sock" --name "self-$mode" --class ls --report "$report" -- \
      python3 "$tenant" "$mode" > "$out/selfcontained-$mode.txt" 2>&1
    rc=$?
    cat "$out/selfcontained-$mode.txt"
    if [ $rc = 3 ] && grep -q "^SKIP grpc" "$out/selfcontained-$mode.txt"; then
      echo "SKIP $mode: grpc is not installed for python3 here"
      continue
    fi
    [ $rc = 0 ] && pass "$mode tenant: every check passed" || failed "$mode tenant: exit $rc"
    echo "--- shim report ($mode):"
    grep -E "^# |cuMemAlloc|cuMemcpy|cuMemGetInfo|cuLaunchKernel " "$report" 2>/dev/null | head -40
    if grep -q "^# missiled: connected; [1-9][0-9]* allocations served from daemon blocks" "$report" 2>/dev/null; then
      pass "$mode: allocations were served from missiled's blocks"
    else
      failed "$mode: the report shows no allocation served by missiled"
    fi
    if grep -q "^# [1-9][0-9]* host-device copies went through the PCIe scheduler" "$report" 2>/dev/null; then
      pass "$mode: host-device copies went through missiled's PCIe scheduler"
    else
      failed "$mode: the report shows no copy through missiled's scheduler"
    fi
  done

  kill -TERM "$daemon" 2>/dev/null; wait "$daemon"
  [ $fail = 0 ] && echo "selfcontained: all PASS" || echo "selfcontained: FAILURES"
} 2>&1 | tee "$out/selfcontained.log"
# (the block runs in a pipeline: its verdict is read back from the log)
grep -q "^selfcontained: all PASS" "$out/selfcontained.log"

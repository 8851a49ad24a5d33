#!/usr/bin/env bash
# On the GPU machine: programs of other frameworks than PyTorch's eager path run under the shim
# unchanged and compute the same bits. tests/gpu/frameworks_check.py runs CuPy (cuBLAS, a raw
# kernel on four streams, a 1 GiB allocation), JAX (jit, XLA's own allocator, which sizes itself
# from the capacity the driver reports), Triton, and PyTorch as a CUDA graph and with the
# cudaMallocAsync backend; each runs plainly, then as a paced BE tenant with an 8 GiB quota
# beside a busy LS tenant, then as an LS tenant; the outputs must be bitwise identical and the
# capacity a tenant sees must be its quota.
# usage: bench/run_frameworks_on_gpu.sh RUNTIME_DIR OUT_DIR   (about 2 minutes)
set -uo pipefail
rt=$(cd "$1" && pwd); out=$2
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out" /tmp/missile/profiles /tmp/fw
export LD_LIBRARY_PATH="$rt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
sock=/tmp/missile/frameworks.sock
check="$here/tests/gpu/frameworks_check.py"
quota_bytes=$((8 << 30))
# Exits 0 when two saved outputs are bitwise identical; prints each array's verdict.
cmp=/tmp/fw/compare.py
cat > "$cmp" <<'EOF'
import sys
import numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
def same_bits(x, y):
    return x.shape == y.shape and x.tobytes() == y.tobytes()
def finite(x):
    return bool(np.isfinite(x).all()) if x.dtype.kind == "f" else True
same = all(same_bits(a[k], b[k]) for k in a.files)
print("  outputs:", ", ".join(f"{k} identical={same_bits(a[k], b[k])} finite={finite(a[k])}"
                             for k in a.files))
sys.exit(0 if same else 1)
EOF
fail=0
{
  bash "$here/bench/gpu_header.sh" "bench/run_frameworks_on_gpu.sh"
  printf '[daemon]\nsocket = "%s"\n[gpu]\nprealloc = "1GiB"\nprofile_dir = "/tmp/missile/profiles"\n' "$sock" > /tmp/missile/frameworks.toml
  chmod 644 /tmp/missile/frameworks.toml
  timeout 400 "$rt/missiled" --config /tmp/missile/frameworks.toml > "$out/frameworks-missiled.log" 2>&1 &
  daemon=$!
  for _ in $(seq 1 100); do [ -S "$sock" ] && break; sleep 0.1; done
  timeout 250 "$rt/missile-run" --shim "$rt/libmissile.so" --socket "$sock" --name web --class ls -- \
    python3 "$here/tests/gpu/torch_infer.py" /tmp/fw/ls.pt --model resnet50 --loop-seconds 150 > /tmp/fw/ls-loop.txt 2>&1 &
  ls_pid=$!
  sleep 8
  for fw in ${FRAMEWORKS:-cupy jax triton torch-graph torch-async}; do
    # XLA picks kernels by timing them unless told not to: no autotuning, deterministic ops.
    env_fw=(XLA_PYTHON_CLIENT_PREALLOCATE=true "XLA_FLAGS=--xla_gpu_autotune_level=0 --xla_gpu_deterministic_ops=true")
    [ "$fw" = torch-async ] && env_fw+=(PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync)
    env "${env_fw[@]}" timeout 120 python3 "$check" "$fw" "/tmp/fw/plain-$fw.npz" > "/tmp/fw/plain-$fw.txt" 2>&1
    rc=$?
    if [ $rc = 3 ]; then echo "SKIP $fw: not installed here"; continue; fi
    [ $rc = 0 ] || { echo "FAIL $fw: the plain run failed"; tail -5 "/tmp/fw/plain-$fw.txt"; fail=1; continue; }
    # A second plain run: a program that is not deterministic by itself proves nothing here.
    env "${env_fw[@]}" timeout 120 python3 "$check" "$fw" "/tmp/fw/plain2-$fw.npz" > /dev/null 2>&1
    if ! python3 "$cmp" "/tmp/fw/plain-$fw.npz" "/tmp/fw/plain2-$fw.npz" > /dev/null; then
      echo "SKIP $fw: two plain runs differ (the program is not deterministic)"; continue
    fi
    for cls in be ls; do
      env "${env_fw[@]}" timeout 120 "$rt/missile-run" --shim "$rt/libmissile.so" --socket "$sock" \
        --name "fw-$fw" --class $cls --quota 8GiB --report "/tmp/fw/$cls-$fw.report" -- \
        python3 "$check" "$fw" "/tmp/fw/$cls-$fw.npz" > "/tmp/fw/$cls-$fw.txt" 2>&1
      rc=$?
      seen=$(grep -oE "total=[-0-9]+" "/tmp/fw/$cls-$fw.txt" | head -1)
      if [ $rc != 0 ]; then
        echo "FAIL $fw as $cls: rc $rc"; tail -8 "/tmp/fw/$cls-$fw.txt"; fail=1; continue
      fi
      if python3 "$cmp" "/tmp/fw/plain-$fw.npz" "/tmp/fw/$cls-$fw.npz"
      then
        echo "PASS $fw as $cls: bitwise identical to the plain run; capacity seen $seen (quota $quota_bytes)"
      else
        echo "FAIL $fw as $cls: outputs differ"; fail=1
      fi
      grep -E "^# pacing|PCIe scheduler|daemon" "/tmp/fw/$cls-$fw.report" | head -3
    done
  done
  kill -TERM "$ls_pid" 2>/dev/null; wait "$ls_pid"
  echo "LS loop: $(tail -1 /tmp/fw/ls-loop.txt)"
  timeout 10 "$rt/missilectl" --socket "$sock" status 2>&1 | head -20
  kill -TERM "$daemon"; wait "$daemon"
  cp /tmp/fw/*.txt /tmp/fw/*.report "$out/" 2>/dev/null
  [ $fail = 0 ] && echo "frameworks: all PASS" || echo "frameworks: FAILURES"
} 2>&1 | tee "$out/frameworks.log"

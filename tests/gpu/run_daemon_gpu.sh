#!/usr/bin/env bash
# GPU check of missiled + libmissile.so on the real driver (the issue's "what must be shown"):
#  1. tenant_probe through missile-run: allocations, small carving, VMM, stream-ordered, ranges;
#  2. PyTorch ResNet-50 and a BERT-style encoder under missile-run, with the default allocator,
#     expandable segments and cudaMallocAsync: outputs bitwise identical to plain runs, and
#     missilectl tenants showing their VRAM;
#  3. a BE tenant whose quota is smaller than its model gets torch.cuda.OutOfMemoryError while
#     an LS tenant keeps running inference.
# usage: run_daemon_gpu.sh RUNTIME_DIR OUT_DIR   (missiled must already be serving on $MISSILE_SOCKET)
set -uo pipefail
rt=$1; out=$2
here=$(cd "$(dirname "$0")" && pwd)
run="$rt/missile-run --shim $rt/libmissile.so --socket $MISSILE_SOCKET"
ctl="$rt/missilectl --socket $MISSILE_SOCKET"
fail=0

echo "== tenant_probe through missile-run"
$run --name probe --class ls -- "$rt/tenant_probe" info alloc:64 small:100 vmm:20 async:16 alloc:3 range check freeall info \
  | tee "$out/probe.txt"
grep -q "alloc 64 ok" "$out/probe.txt" && grep -q "small 100 ok" "$out/probe.txt" && grep -q "vmm 20 ok" "$out/probe.txt" \
  && grep -q "async 16 ok" "$out/probe.txt" && grep -q "range base_ok=1 size=3145728" "$out/probe.txt" \
  && grep -q "check ok" "$out/probe.txt" && grep -q "freeall ok" "$out/probe.txt" \
  && echo "PASS tenant_probe on the real driver" || { echo "FAIL tenant_probe"; fail=1; }

for model in resnet50 bert; do
  for conf in default expandable_segments:True backend:cudaMallocAsync; do
    tag=$model-${conf%%:*}
    env_conf=()
    [ "$conf" != default ] && env_conf=(PYTORCH_CUDA_ALLOC_CONF=$conf)
    env "${env_conf[@]}" python3 "$here/torch_infer.py" "$out/plain-$tag.pt" --model $model > "$out/plain-$tag.txt" 2>&1 || fail=1
    env "${env_conf[@]}" $run --name $model --class ls --report "$out/shim-$tag.report" -- \
      python3 "$here/torch_infer.py" "$out/shim-$tag.pt" --model $model --hold-seconds 4 > "$out/shim-$tag.txt" 2>&1 &
    pid=$!
    for i in $(seq 1 100); do grep -q holding "$out/shim-$tag.txt" 2>/dev/null && break; sleep 0.3; done
    echo "--- missilectl tenants while $model ($conf) runs:"
    $ctl tenants
    wait $pid || fail=1
    cat "$out/plain-$tag.txt" "$out/shim-$tag.txt"
    if python3 "$here/compare_outputs.py" "$out/plain-$tag.pt" "$out/shim-$tag.pt"; then
      echo "PASS $model $conf: outputs bitwise identical under missile-run"
    else
      echo "FAIL $model $conf: outputs differ"; fail=1
    fi
    grep -E "missiled|cuMemAlloc_v2 |cuMemCreate |cuMemAllocAsync |not intercepted" "$out/shim-$tag.report"
  done
done

echo "== quota smaller than the model: BE gets OutOfMemoryError, LS keeps running"
$run --name web --class ls -- python3 "$here/torch_infer.py" "$out/ls.pt" --model resnet50 --loop-seconds 15 > "$out/ls-loop.txt" 2>&1 &
ls_pid=$!
sleep 6
$run --name batch --class be --quota 64MiB -- python3 "$here/torch_infer.py" "$out/be.pt" --model resnet50 --expect-oom \
  > "$out/be-oom.txt" 2>&1; be_rc=$?
echo "--- missilectl tenants during the LS loop:"
$ctl tenants
wait $ls_pid; ls_rc=$?
cat "$out/be-oom.txt" "$out/ls-loop.txt"
if [ $be_rc -eq 0 ] && grep -q OutOfMemoryError "$out/be-oom.txt" && [ $ls_rc -eq 0 ] && grep -q "unchanged" "$out/ls-loop.txt"; then
  echo "PASS quota: BE raised torch.cuda.OutOfMemoryError, LS kept running"
else
  echo "FAIL quota: be rc=$be_rc ls rc=$ls_rc"; fail=1
fi
echo "--- missilectl status:"
$ctl status
rm -f "$out"/*.pt
exit $fail

#!/usr/bin/env bash
# On the GPU machine: where a BE released by the LS latency budget loses its GPU time
# (docs/results.md, "The top end's gap"). One call of about 6.5 minutes: the token-decoding LS
# beside the colocation BE on MPS in the modes alone, mps-prio, missile-mps-lsmark (the LS's
# marking only), missile-mps-b200 (released) and missile-mps-nopace (pacing off), the BE's GPU
# timeline profiled 26 s after it starts (in the LS's warm-up, after the release; be_job.py
# --profile-at), through bench/run_budget_on_gpu.sh. Then, from its output: the BE's iterations
# per mode from 30 s (be_iterations.py: wall, host issue and GPU copy and forward-pass times) and
# the profiles side by side (profile_diff.py): pacing off against released, MPS with priorities
# against the LS's marking.
# usage: bench/run_released_diag_on_gpu.sh RUNTIME_DIR OUT_DIR
# env: PROFILE_AT (26) MODES_EXTRA ("") ANALYSE_ONLY (1: no run, only the analysis of an
#   earlier OUT_DIR/diag)
set -uo pipefail
rt=$1 out=$2
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
[ "${ANALYSE_ONLY:-0}" = 1 ] || SCENARIOS=decode-graph BUDGETS="" BASE_MODES="alone mps-prio missile-mps-lsmark ${MODES_EXTRA:-}" \
  MPS_BUDGETS="200" MORE_MODES="missile-mps-nopace:bench/colocation/modes/nopace.toml" \
  BE_ARGS="--profile-at ${PROFILE_AT:-26}" bash "$here/bench/run_budget_on_gpu.sh" "$rt" "$out/diag"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar xzf "$out/diag/decode-graph-1.tgz" -C "$work" || exit 1
tar xzf "$work/decode-graph-1/colocation.tar.gz" -C "$work" 2>/dev/null
raw=$(find "$work" -type d -name raw | head -n 1)
logs=$(find "$work" -type d -name logs | head -n 1)
[ -n "$raw" ] || { echo "no raw directory in the output"; exit 1; }
{
  echo "== BE iterations from 30 s"
  for m in mps-prio missile-mps-lsmark missile-mps-b200 missile-mps-nopace; do
    f=$raw/${m}__be-be--main.txt
    [ -f "$f" ] || continue
    echo "-- $m"
    python3 "$here/bench/colocation/be_iterations.py" --from 30 "$f" | tail -n 3
  done
  echo "== PROFILE lines"
  grep -h '^PROFILE ' "$logs"/main-*-be.out 2>/dev/null
  for pair in "missile-mps-nopace missile-mps-b200" "mps-prio missile-mps-lsmark"; do
    set -- $pair
    a=$raw/${1}__be-be--main--profile.json b=$raw/${2}__be-be--main--profile.json
    echo "== profile: $1 (base) against $2"
    if [ -f "$a" ] && [ -f "$b" ]; then
      python3 "$here/bench/colocation/profile_diff.py" "$a" "$b" --top 10
    else
      echo "missing: $(ls "$a" "$b" 2>&1 | grep -c 'No such') of the two profiles"
    fi
  done
} | tee "$out/diag.txt"
cp "$raw"/*--profile.json "$out/" 2>/dev/null
exit 0

#!/usr/bin/env bash
# On the GPU machine: the LS latency budget's frontier (docs/pacing.md, "The LS latency budget").
# For each LS scenario of bench/colocation ($SCENARIOS: decode-graph, resnet50-graph,
# resnet50-eager) beside the BE of pair (a) (ResNet-152 fp16 batch 128 with a 512 MiB copy per
# iteration), the modes alone, none, mps-prio, missile (budget 100 %) and missile-bN for each
# budget N in $BUDGETS ([compute] ls_budget_pct = N, bench/colocation/modes/budgetN.toml), on
# MPS (BE at client priority 1) missile-mps-bN for each N in $MPS_BUDGETS and missile-mps-rT-bN
# (the budget with ls_reserve_tpcs = T) for each T in $RESERVES and N in $RESERVE_BUDGETS,
# WINDOWS measured windows (default 3) of SECONDS_MAIN s back to back in each mode (the LS's
# --windows: one set-up, one warm-up of LS_WARMUP s so the budget controller has settled:
# default 30 where a budget mode runs (the controller takes about 22 s to release the BE on the
# decoder), 3 otherwise), in REPEATS fresh runs of bench/colocation/run_on_gpu.sh (default 1)
# with their own alone baseline and BE solo run. Per run: OUT/SCEN-R.log (the summary tables and what missiled
# measured of the LS: budget, stretch, BE share) and OUT/SCEN-R.tgz (everything); then
# bench/colocation/frontier.py OUT gives the medians and the plot. First, where RUNTIME_DIR has
# bench/window_cost, what the BE's in-flight window costs this host's CPU per paced launch
# (OUT/window_cost.txt, a few seconds).
# usage: bench/run_budget_on_gpu.sh RUNTIME_DIR OUT_DIR
# env: SCENARIOS BUDGETS ("125 150 200"; set and empty: none) MPS_BUDGETS ("") RESERVES ("") RESERVE_BUDGETS ("")
#   WINDOWS (3) REPEATS (1) FIRST (1) SECONDS_MAIN (5)
#   BASE_MODES ("alone none mps-prio missile") MORE_MODES ("") LS_WARMUP (30 with budgets, else 3)
#   BE_ARGS (e.g. "--profile-at 26": the BE's GPU timeline in the warm-up, be_job.py)
#   LS_MORE (more ls_service.py arguments, e.g. "--period-ms 52": the LS at a fixed rate)
set -uo pipefail
rt=$(cd "$1" && pwd); out=$2
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
bash "$here/bench/gpu_header.sh" "bench/run_budget_on_gpu.sh"
if [ -x "$rt/window_cost" ]; then
  LD_LIBRARY_PATH="$rt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$rt/window_cost" > "$out/window_cost.txt" 2>&1
  echo "== window cost per launch (ns)"; grep -E "^1024 " "$out/window_cost.txt"
fi
extra="" modes=${BASE_MODES:-alone none mps-prio missile}
for b in ${BUDGETS-125 150 200}; do
  extra+=" missile-b$b:bench/colocation/modes/budget$b.toml"
  modes+=" missile-b$b"
done
for b in ${MPS_BUDGETS:-}; do
  extra+=" missile-mps-b$b:bench/colocation/modes/budget$b.toml"
  modes+=" missile-mps-b$b"
done
# MORE_MODES: "name:snippet.toml ..." as run_on_gpu.sh's EXTRA_MODES (e.g.
# missile-mps-nopace:bench/colocation/modes/nopace.toml), after the others.
for em in ${MORE_MODES:-}; do
  extra+=" $em"
  modes+=" ${em%%:*}"
done
# The warm-up: long enough for a budget's controller to settle, where any budget runs.
if [ -n "${BUDGETS-125 150 200}${MPS_BUDGETS:-}${RESERVE_BUDGETS:-}" ]; then warm_default=30; else warm_default=3; fi
warmup=${LS_WARMUP:-$warm_default}
snippets=$out/modes
mkdir -p "$snippets"
for t in ${RESERVES:-}; do
  for b in ${RESERVE_BUDGETS:-}; do
    f=$snippets/reserve$t-budget$b.toml
    printf '[compute]\nls_reserve_tpcs = %s\nls_budget_pct = %s\n' "$t" "$b" > "$f"
    extra+=" missile-mps-r$t-b$b:$f"
    modes+=" missile-mps-r$t-b$b"
  done
done
for scen in ${SCENARIOS:-decode-graph resnet50-graph resnet50-eager}; do
  for r in $(seq "${FIRST:-1}" "${REPEATS:-1}"); do
    start=$SECONDS
    FRESH=1 MODES="$modes" EXTRA_MODES="$extra" MAIN_SCENARIOS=$scen \
      SECONDS_MAIN=${SECONDS_MAIN:-5} BE_SOLO_SECONDS=${BE_SOLO_SECONDS:-8} \
      LS_WINDOWS=${WINDOWS:-3} LS_ARGS="--warmup-seconds $warmup --windows ${WINDOWS:-3} ${LS_MORE:-}" BE_ARGS="${BE_ARGS:-}" timeout 590 \
      bash "$here/bench/colocation/run_on_gpu.sh" "$rt" "$out/$scen-$r" main > "$out/$scen-$r.log" 2>&1
    echo "== $scen window $r (exit $?, $((SECONDS - start)) s)"
    grep -E "^\| (alone|none|mps|missile)" "$out/$scen-$r/summary.md" 2>/dev/null || tail -n 5 "$out/$scen-$r.log"
    grep -E "^-- main|^  budget " "$out/$scen-$r.log"
    tar czf "$out/$scen-$r.tgz" -C "$out" "$scen-$r" && rm -rf "${out:?}/$scen-$r"
  done
done
exit 0

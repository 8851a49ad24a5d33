#!/usr/bin/env bash
# On the GPU machine: GPU co-location of a latency-sensitive (LS) inference service with
# best-effort (BE) jobs, without and with Missile and MPS. See bench/colocation/README.md.
#
# usage: bench/colocation/run_on_gpu.sh RUNTIME_DIR OUT_DIR [PHASE]
#   RUNTIME_DIR: missiled, missile-run, missilectl, libmissile.so and lib/
#   PHASE (comma list): main | sweep | pair-d | all (default all = main,sweep,pair-d)
#     main    pairs (a) ResNet-50 graph, (b) BERT graph, (c) ResNet-50 eager beside the BE
#             (ResNet-152 bs128 + 512 MiB copies), modes $MODES             (~6-7 min)
#     sweep   open-loop Poisson LS at LOAD x capacity, SWEEP_MODELS, modes SWEEP_MODES (~7 min)
#     pair-d  two BE jobs (weights 1:3 under Missile) beside the ResNet-50 graph LS (~3 min)
#   Modes: alone, alone-mps (the LS alone on MPS), missile-mps-alone (the LS alone under Missile on
#   MPS), missile-mps-marked (the same beside an idle BE tenant under Missile, so that the LS
#   marks its work: what its marks cost it), none, mps, mps-prio, missile, missile-mps, missile-nopace, missile-mps-lsmark (the LS
#   under Missile marking its work, the BE without Missile, as in mps-prio), and EXTRA_MODES
#   ("name:snippet.toml ...": Missile with the snippet appended to missiled's config). A Missile
#   mode named *-every runs the LS with MISSILE_LS_MARKS=every (a completion write after every
#   item, as before the LS wrote only before it waits).
# env: SECONDS_MAIN (8) SECONDS_SWEEP (4) BE_SOLO_SECONDS (15) LOAD (0.3) MODES SWEEP_MODES
#   D_MODES ("none missile") D_WEIGHTS ("1 3") SWEEP_MODELS EXTRA_MODES MAIN_SCENARIOS
#   BE_ARGS (extra be_job.py arguments for every BE job, solo too, e.g. "--copy-mib 0 --graph")
#   WORK_DIR (/tmp/colocation-run; kept between calls on one machine, FRESH=1 clears it)
# Tenants under Missile write the shim's exit report (pacing: items held, by reason) to
# logs/<process>.report.
# Everything comes back in OUT_DIR: colocation.log, summary.md, latency.png, be_throughput.png
# and colocation.tar.gz (the work dir: logs/, raw/, sweep_rates.json, ...), refreshed after every
# mode so that a run cut short still brings its results back.
set -uo pipefail
if [ $# -lt 2 ]; then
  sed -n '4,20p' "$0"
  exit 2
fi
rt=$(cd "$1" && pwd) || { echo "ERROR: no runtime dir $1"; exit 2; }
mkdir -p "$2" && out=$(cd "$2" && pwd) || { echo "ERROR: cannot create $2"; exit 2; }
phases=${3:-all}
[ "$phases" = all ] && phases=main,sweep,pair-d
here=$(cd "$(dirname "$0")/../.." && pwd)
bench=$here/bench/colocation

work_root=${WORK_DIR:-/tmp/colocation-run}
work=$work_root/colocation
[ "${FRESH:-0}" = 1 ] && rm -rf "$work"
logs=$work/logs raw=$work/raw ctl_dir=$work_root/ctl
mkdir -p "$logs" "$raw" "$ctl_dir" /tmp/missile/profiles
exec > >(tee -a "$out/colocation.log") 2>&1

export LD_LIBRARY_PATH="$rt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MISSILE_SOCKET=/tmp/missile/missiled.sock
# MPS clients and the control daemon meet here; without a daemon there, CUDA runs without MPS.
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1

S_MAIN=${SECONDS_MAIN:-8}
S_SWEEP=${SECONDS_SWEEP:-4}
BE_SOLO_S=${BE_SOLO_SECONDS:-15}
LOAD=${LOAD:-0.3}
MAIN_SCEN=${MAIN_SCENARIOS:-resnet50-graph,bert-graph,resnet50-eager}
SWEEP_MODELS=${SWEEP_MODELS:-resnet50 mobilenet_v3_large efficientnet_b0 densenet121 inception_v3 vit_b_16 convnext_tiny swin_t bert gpt2}
D_WEIGHTS=${D_WEIGHTS:-1 3}
LS_LOAD_LIMIT=300   # s for the LS to build, capture (and measure rates) until "ready"
BE_LOAD_LIMIT=180   # s for a BE job to start and warm up until "ready"
WAIT_LIMIT=300      # s the LS waits for the go file after "ready"

# Extra modes: Missile with a config snippet each. missile-nopace is one of them.
declare -A snippet
nopace=$work_root/missile-nopace.toml
printf '[compute]\npacing = false\n' > "$nopace"
snippet[missile-nopace]=$nopace
extra_names=""
for em in ${EXTRA_MODES:-}; do
  name=${em%%:*} file=${em#*:}
  [ "$name" != "$em" ] || { echo "ERROR: EXTRA_MODES entry '$em' is not name:file"; exit 2; }
  [ -f "$file" ] || file=$here/$file
  [ -f "$file" ] || { echo "ERROR: EXTRA_MODES $name: no file $file"; exit 2; }
  snippet[$name]=$file
  extra_names+=" $name"
done
main_modes=${MODES:-alone none mps mps-prio missile missile-mps missile-nopace}
for name in $extra_names; do [[ " $main_modes " == *" $name "* ]] || main_modes+=" $name"; done
sweep_modes=${SWEEP_MODES:-${MODES:-alone none mps-prio missile missile-mps}}
d_modes=${D_MODES:-none missile}

# ---------------------------------------------------------------- processes

pids=()      # every background process still running (timeout's pid)
daemon=""    # missiled (timeout's pid)
mps_on=0
LAUNCHED_PID=""

forget() {
  local p keep=()
  for p in "${pids[@]}"; do [ "$p" != "$1" ] && keep+=("$p"); done
  pids=("${keep[@]}")
}

# finish PID GRACE_S LABEL: waits up to GRACE_S for PID, then sends it TERM (timeout passes it on
# and KILLs 10 s later) and waits 15 s more; returns PID's exit status.
finish() {
  local pid=$1 grace=$2 label=$3 t0=$SECONDS rc
  while kill -0 "$pid" 2>/dev/null && (( SECONDS - t0 < grace )); do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    (( grace > 0 )) && echo "WARN: $label still running after ${grace} s, stopping it"
    kill -TERM "$pid" 2>/dev/null
    t0=$SECONDS
    while kill -0 "$pid" 2>/dev/null && (( SECONDS - t0 < 15 )); do sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  fi
  wait "$pid"; rc=$?
  forget "$pid"
  return $rc
}

show_tail() {  # LOGNAME: the last lines of a process's stderr and stdout
  echo "---- tail of $1.err"; tail -n 15 "$logs/$1.err" 2>/dev/null
  echo "---- tail of $1.out"; tail -n 5 "$logs/$1.out" 2>/dev/null
  echo "----"
}

mode_uses_mps() { case $1 in mps|mps-prio|alone-mps|missile-mps*) return 0 ;; esac; return 1; }
mode_be_prio() { case $1 in mps-prio|missile-mps*) return 0 ;; esac; return 1; }
mode_uses_missile() { case $1 in missile*) return 0 ;; esac; [ -n "${snippet[$1]:-}" ]; }
# missile-*-lsmark: the LS under Missile, the BE job without it (as in mps-prio), and an idle
# placeholder BE tenant "marker" under Missile, so that the LS marks its work for it: what the
# LS's own marking does to the GPU's sharing, with nothing of the BE paced.
mode_be_plain() { case $1 in *-lsmark) return 0 ;; esac; return 1; }

# launch LOGNAME MODE TENANT CLASS LIMIT_S CMD...: starts CMD in the background with a timeout,
# plain or under missile-run as MODE says (BE jobs of the MPS priority modes with
# CUDA_MPS_CLIENT_PRIORITY=1); stdout to $logs/LOGNAME.out, stderr to .err; LAUNCHED_PID is set.
launch() {
  local log=$1 mode=$2 tenant=$3 cls=$4 limit=$5; shift 5
  local pre=(env)
  [ "$cls" = be ] && mode_be_prio "$mode" && pre=(env CUDA_MPS_CLIENT_PRIORITY=1)
  # A mode named *-every: the LS writes its completion after every item (MISSILE_LS_MARKS).
  [ "$cls" = ls ] && [ "${mode%-every}" != "$mode" ] && pre=(env MISSILE_LS_MARKS=every)
  local managed=1
  mode_uses_missile "$mode" || managed=0
  [ "$cls" = be ] && [ "$tenant" != marker ] && mode_be_plain "$mode" && managed=0
  if [ $managed = 1 ]; then
    "${pre[@]}" timeout -k 10 "$limit" "$rt/missile-run" --shim "$rt/libmissile.so" \
      --socket "$MISSILE_SOCKET" --name "$tenant" --class "$cls" --report "$logs/$log.report" -- "$@" \
      > "$logs/$log.out" 2> "$logs/$log.err" &
  else
    "${pre[@]}" timeout -k 10 "$limit" "$@" > "$logs/$log.out" 2> "$logs/$log.err" &
  fi
  LAUNCHED_PID=$!
  pids+=("$LAUNCHED_PID")
}

# wait_ready LOGNAME PID LIMIT_S: until the process prints "ready"; fails if it exits first.
wait_ready() {
  local name=$1 pid=$2 limit=$3 t0=$SECONDS
  while ! grep -q '^ready$' "$logs/$name.out" 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "ERROR: $name exited before it was ready"; show_tail "$name"; return 1
    fi
    if (( SECONDS - t0 >= limit )); then
      echo "ERROR: $name not ready after $limit s"; show_tail "$name"; return 1
    fi
    sleep 0.2
  done
  echo "  $name ready after $((SECONDS - t0)) s"
}

ctl() { timeout 10 "$rt/missilectl" --socket "$MISSILE_SOCKET" "$@"; }

# ---------------------------------------------------------------- infrastructure

write_config() {  # SNIPPET_FILE or "": missiled's config, defaults plus the snippet
  cat > /tmp/missile/missiled.toml <<TOML
[daemon]
socket = "$MISSILE_SOCKET"
[gpu]
prealloc = "1GiB"
profile_dir = "/tmp/missile/profiles"
TOML
  if [ -n "$1" ]; then echo >> /tmp/missile/missiled.toml; cat "$1" >> /tmp/missile/missiled.toml; fi
  chmod 644 /tmp/missile/missiled.toml
}

start_daemon() {  # MODE LOGTAG
  write_config "${snippet[$1]:-}"
  echo "  missiled config:"; sed 's/^/    /' /tmp/missile/missiled.toml
  rm -f "$MISSILE_SOCKET" "$MISSILE_SOCKET.fd"
  timeout -k 10 3600 "$rt/missiled" --config /tmp/missile/missiled.toml > "$logs/missiled-$2.log" 2>&1 &
  daemon=$!
  local i
  for i in $(seq 1 150); do
    [ -S "$MISSILE_SOCKET" ] && return 0
    kill -0 "$daemon" 2>/dev/null || break
    sleep 0.1
  done
  echo "ERROR: missiled did not start (mode $1); its log:"; tail -n 20 "$logs/missiled-$2.log"
  stop_daemon
  return 1
}

stop_daemon() {
  [ -n "$daemon" ] || return 0
  local child
  child=$(pgrep -P "$daemon" -x missiled 2>/dev/null | head -n 1)
  [ -n "$child" ] && [ -r "/proc/$child/stat" ] &&
    echo "  missiled CPU time (user+system): $(awk '{print ($14 + $15) / 100}' "/proc/$child/stat") s"
  kill -TERM "$daemon" 2>/dev/null
  wait "$daemon" 2>/dev/null  # timeout passes TERM on and KILLs missiled 10 s later
  daemon=""
}

# The MPS control daemon or server of this user (matched on the command line: process names are
# cut to 15 characters, "nvidia-cuda-mps", so pgrep -x on the full name never matches).
mps_running() { pgrep -u "$(id -u)" -f '(^|/)nvidia-cuda-mps-(control|server)( |$)' > /dev/null; }

start_mps() {
  command -v nvidia-cuda-mps-control > /dev/null || { echo "ERROR: nvidia-cuda-mps-control not found"; return 1; }
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  timeout 20 nvidia-cuda-mps-control -d || { echo "ERROR: nvidia-cuda-mps-control -d failed"; return 1; }
  mps_on=1
  local i
  for i in $(seq 1 50); do
    echo get_server_list | timeout 5 nvidia-cuda-mps-control > /dev/null 2>&1 && { echo "  MPS started"; return 0; }
    sleep 0.1
  done
  echo "ERROR: MPS control daemon does not answer"; stop_mps; return 1
}

stop_mps() {
  [ "$mps_on" = 1 ] || return 0
  echo quit | timeout 10 nvidia-cuda-mps-control > /dev/null 2>&1
  local i
  for i in $(seq 1 150); do
    mps_running || { mps_on=0; echo "  MPS stopped"; return 0; }
    sleep 0.1
  done
  echo "WARN: MPS still running 15 s after quit"; mps_on=0
}

infra_up() {  # MODE LOGTAG
  if mode_uses_mps "$1"; then start_mps || return 1; fi
  if mode_uses_missile "$1"; then start_daemon "$1" "$2" || { stop_mps; return 1; }; fi
  if ! mode_uses_mps "$1" && mps_running; then echo "WARN: an MPS daemon is running in mode $1"; fi
  return 0
}

infra_down() { stop_daemon; stop_mps; }

cleanup() {
  local rc=$? p
  trap - EXIT INT TERM
  touch "$ctl_dir/abort"
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do finish "$p" 15 "pid $p"; done
  infra_down
  exit $rc
}
trap cleanup EXIT
trap 'echo "interrupted"; exit 130' INT TERM

# Results of this run so far, into OUT_DIR (a run cut short still brings them back).
pack() {
  cp -f "$out/colocation.log" "$work/colocation.log" 2>/dev/null
  tar -C "$work_root" -czf "$work_root/colocation.tar.gz.tmp" colocation &&
    mv -f "$work_root/colocation.tar.gz.tmp" "$out/colocation.tar.gz"
}

# ---------------------------------------------------------------- one measurement

hook=""  # a function to run once every process is ready, before the LS starts measuring

# colocate RUN TAG MODE SCENARIOS "LS_ARGS" WINDOW_S [BE_NAME...]: the LS (--mode TAG) and the BE
# jobs under MODE's infrastructure (already up); BEs and LS get ready, then the LS measures
# (go file), then the BEs stop (stop file). Logs are $logs/RUN-TAG-{ls,BE_NAME}.{out,err}.
colocate() {
  local run=$1 tag=$2 mode=$3 scen=$4 ls_args=$5 window=$6; shift 6
  local bes=("$@") go="$ctl_dir/$run-$tag.go" stop="$ctl_dir/$run-$tag.stop" ok=1 rc i
  rm -f "$go" "$stop" "$ctl_dir/abort"
  local nscen
  nscen=$(( $(tr -cd , <<< "$scen" | wc -c) + 1 ))
  local ls_run=$(( nscen * (2 * window + 6) * ${LS_WINDOWS:-1} + 60 ))  # an open-loop window may overrun by one window
  local ls_limit=$(( LS_LOAD_LIMIT + WAIT_LIMIT + ls_run ))
  echo "-- $run $tag: LS [$scen] $ls_args${bes[*]:+ beside BE ${bes[*]}} (mode $mode)"
  launch "$run-$tag-ls" "$mode" ls ls "$ls_limit" python3 "$bench/ls_service.py" --mode "$tag" \
    --scenarios "$scen" $ls_args ${LS_ARGS:-} --raw-dir "$raw" --wait-file "$go" --wait-timeout "$WAIT_LIMIT"
  local ls_pid=$LAUNCHED_PID be_pids=() be
  for be in "${bes[@]}"; do
    local be_args=${BE_ARGS:-}
    [ "$be" = marker ] && be_args=--idle
    launch "$run-$tag-$be" "$mode" "$be" be $(( ls_limit + 120 )) python3 "$bench/be_job.py" \
      --mode "$tag" --name "$be" --run "$run" --seconds $(( ls_limit + 60 )) --stop-file "$stop" --raw-dir "$raw" \
      $be_args
    be_pids+=("$LAUNCHED_PID")
  done
  wait_ready "$run-$tag-ls" "$ls_pid" "$LS_LOAD_LIMIT" || ok=0
  for i in "${!bes[@]}"; do
    [ $ok = 1 ] || break
    wait_ready "$run-$tag-${bes[i]}" "${be_pids[i]}" "$BE_LOAD_LIMIT" || ok=0
  done
  if [ $ok = 1 ]; then
    if mode_uses_missile "$mode"; then ctl tenants; fi
    [ -n "$hook" ] && $hook
    touch "$go"
    echo "  measuring: $nscen scenario(s) of $window s (+ warm-up)"
    # Under Missile, what missiled measured of each tenant every 2 s while the LS runs (the LS
    # latency budget's stretch and share among it): $logs/RUN-TAG-tenants.jsonl.
    local watch_pid=""
    if mode_uses_missile "$mode"; then
      ( while kill -0 "$ls_pid" 2>/dev/null; do
          ctl --json tenants 2>/dev/null | tr -d '\n'; echo; sleep 2
        done ) > "$logs/$run-$tag-tenants.jsonl" &
      watch_pid=$!
    fi
    finish "$ls_pid" "$ls_run" "$run-$tag-ls"; rc=$?
    if [ -n "$watch_pid" ]; then
      kill "$watch_pid" 2>/dev/null; wait "$watch_pid" 2>/dev/null
      python3 - "$logs/$run-$tag-tenants.jsonl" <<'PY' || true
import json, statistics, sys
last = None
measured = []  # (period_ms, alone_ms) of the newest measured period, at each snapshot
for line in open(sys.argv[1]):
    try:
        doc = json.loads(line)
    except ValueError:
        continue
    for t in doc.get("tenants", []):
        for c in t.get("compute", []):
            if t.get("tenant_class") == "LATENCY_SENSITIVE":
                last = (t.get("name"), c)
                if float(c.get("alone_ms", 0)) > 0:
                    measured.append((float(c["period_ms"]), float(c["alone_ms"])))
if last:
    n, c = last
    print(f"  budget {n}: {c.get('budget_pct', 0)}% {c.get('budget', 'BUDGET_OFF')}, stretch "
          f"{float(c.get('stretch', 0)):.3f}, BE share {float(c.get('be_share', 0)):.3f}, "
          f"window x{c.get('be_window_scale', 1)}, "
          f"periods {c.get('periods', 0)}, alone {c.get('alone_periods', 0)}, dropped "
          f"{c.get('dropped_periods', 0)}")
if measured:
    print(f"  budget {n}: newest period at {len(measured)} snapshots, median "
          f"{statistics.median(m[0] for m in measured):.3f} ms (max "
          f"{max(m[0] for m in measured):.3f}) against alone "
          f"{statistics.median(m[1] for m in measured):.3f} ms (range "
          f"{min(m[1] for m in measured):.3f}-{max(m[1] for m in measured):.3f})")
PY
    fi
    case $rc in
      0) ;;
      2) echo "WARN: $run-$tag-ls skipped some scenarios" ;;
      *) ok=0; echo "ERROR: $run-$tag-ls exited with $rc"; show_tail "$run-$tag-ls" ;;
    esac
  else
    finish "$ls_pid" 0 "$run-$tag-ls"
  fi
  # What the daemon accounted to each tenant (BE: GPU time for the share, time held), while the
  # BE jobs still run.
  if mode_uses_missile "$mode" && [ ${#bes[@]} -gt 1 ]; then
    ctl --json tenants > "$logs/$run-$tag-tenants.json" 2>&1
    python3 - "$logs/$run-$tag-tenants.json" <<'PY' || true
import json, sys
for t in json.load(open(sys.argv[1])).get("tenants", []):
    for c in t.get("compute", []):
        print(f"  accounted {t.get('name')}: gpu {float(c.get('gpu_ms', 0)):.0f} ms, held "
              f"{float(c.get('held_ms', 0)):.0f} ms, submissions {c.get('submissions', 0)}")
PY
  fi
  touch "$stop"
  for i in "${!bes[@]}"; do
    finish "${be_pids[i]}" 30 "$run-$tag-${bes[i]}"; rc=$?
    [ $rc = 0 ] || { ok=0; echo "ERROR: $run-$tag-${bes[i]} exited with $rc"; show_tail "$run-$tag-${bes[i]}"; }
  done
  grep -h -E '^(RESULT|BE|SKIP) ' "$logs/$run-$tag-"*.out 2>/dev/null
  pack
  [ $ok = 1 ]
}

# be_solo TAG MODE: the BE job alone for BE_SOLO_S seconds (its solo throughput).
be_solo() {
  local tag=$1 mode=$2 rc
  echo "-- solo $tag: BE alone for $BE_SOLO_S s (mode $mode)"
  launch "solo-$tag-be" "$mode" be be $(( BE_SOLO_S + BE_LOAD_LIMIT + 60 )) python3 "$bench/be_job.py" \
    --mode "$tag" --name be --run solo --seconds "$BE_SOLO_S" --raw-dir "$raw" ${BE_ARGS:-}
  local pid=$LAUNCHED_PID
  if wait_ready "solo-$tag-be" "$pid" "$BE_LOAD_LIMIT"; then
    finish "$pid" $(( BE_SOLO_S + 30 )) "solo-$tag-be"; rc=$?
  else
    finish "$pid" 0 "solo-$tag-be"; rc=1
  fi
  [ $rc = 0 ] || { echo "ERROR: solo-$tag-be exited with $rc"; show_tail "solo-$tag-be"; }
  grep -h '^BE ' "$logs/solo-$tag-be.out" 2>/dev/null
  pack
}

# The BE's solo throughput, plain and under Missile; once per work dir.
be_solo_all() {
  if ! grep -q '^BE ' "$logs/solo-alone-be.out" 2>/dev/null; then be_solo alone alone; fi
  if ! grep -q '^BE ' "$logs/solo-alone-missile-be.out" 2>/dev/null; then
    if infra_up missile solo-alone-missile; then be_solo alone-missile missile; infra_down
    else echo "SKIP mode alone-missile: missiled did not start"; fi
  fi
}

# run_mode RUN MODE TAG SCENARIOS "LS_ARGS" WINDOW_S BE_NAME...: colocate inside MODE's
# infrastructure (MPS and/or missiled), torn down afterwards.
run_mode() {
  local run=$1 mode=$2 tag=$3; shift 3
  if infra_up "$mode" "$run-$tag"; then
    colocate "$run" "$tag" "$mode" "$@" || echo "WARN: $run $tag incomplete"
    infra_down
  else
    echo "SKIP mode $tag ($run): infrastructure did not start"
  fi
}

# ---------------------------------------------------------------- phases

phase_main() {
  local mode
  for mode in $main_modes; do
    echo "== main: $mode ($(date -u +%T))"
    if [ "$mode" = alone ]; then
      colocate main alone alone "$MAIN_SCEN" "--seconds $S_MAIN" "$S_MAIN" || echo "WARN: main alone incomplete"
      be_solo_all
    elif [ "$mode" = alone-mps ]; then  # the LS alone on the MPS server: what MPS itself costs it
      run_mode main alone-mps alone-mps "$MAIN_SCEN" "--seconds $S_MAIN" "$S_MAIN"
    elif [ "$mode" = missile-mps-alone ]; then  # the LS alone under Missile on MPS: what both cost it
      run_mode main missile-mps-alone missile-mps-alone "$MAIN_SCEN" "--seconds $S_MAIN" "$S_MAIN"
    elif [ "${mode%-every}" = missile-mps-marked ]; then  # the same beside an idle BE tenant: the LS marks its work
      run_mode main "$mode" "$mode" "$MAIN_SCEN" "--seconds $S_MAIN" "$S_MAIN" marker
    elif mode_be_plain "$mode"; then
      run_mode main "$mode" "$mode" "$MAIN_SCEN" "--seconds $S_MAIN" "$S_MAIN" be marker
    else
      run_mode main "$mode" "$mode" "$MAIN_SCEN" "--seconds $S_MAIN" "$S_MAIN" be
    fi
  done
}

phase_sweep() {
  local scen="" m mode rates=$work/sweep_rates.json args
  for m in $SWEEP_MODELS; do scen+="${scen:+,}sweep:$m"; done
  args="--sweep-seconds $S_SWEEP --load $LOAD"
  for mode in $sweep_modes; do
    echo "== sweep: $mode ($(date -u +%T))"
    if [ "$mode" = alone ]; then
      colocate sweep alone alone "$scen" "$args --write-rates $rates" "$S_SWEEP" || echo "WARN: sweep alone incomplete"
      be_solo_all
      continue
    fi
    if [ ! -s "$rates" ]; then  # no LS-alone sweep in this work dir: measure the rates alone first
      echo "-- sweep: measuring solo rates (no alone run yet)"
      launch sweep-rates-ls alone ls ls "$LS_LOAD_LIMIT" python3 "$bench/ls_service.py" --mode rates \
        --scenarios "$scen" --write-rates "$rates" --rates-only --raw-dir "$raw"
      finish "$LAUNCHED_PID" "$LS_LOAD_LIMIT" sweep-rates-ls || { echo "ERROR: rate measurement failed"; show_tail sweep-rates-ls; }
      grep -h -E '^(INFO solo|SKIP)' "$logs/sweep-rates-ls.out"
    fi
    [ -s "$rates" ] || { echo "SKIP sweep mode $mode: no $rates"; continue; }
    run_mode sweep "$mode" "$mode" "$scen" "$args --rates $rates" "$S_SWEEP" be
  done
}

set_d_weights() {  # pair (d) under Missile: BE1:BE2 weights once both are registered
  local w1 w2 i t
  read -r w1 w2 <<< "$D_WEIGHTS"
  for i in $(seq 1 50); do
    t=$(ctl tenants 2>&1)
    grep -qw be1 <<< "$t" && grep -qw be2 <<< "$t" && break
    sleep 0.2
  done
  grep -qw be1 <<< "$t" && grep -qw be2 <<< "$t" || echo "WARN: be1/be2 not both listed by missilectl tenants"
  if ctl set --name be1 --weight "$w1" && ctl set --name be2 --weight "$w2"; then
    echo "  weights set: be1 $w1, be2 $w2"
  else
    echo "ERROR: missilectl set --weight failed"
  fi
  ctl tenants
}

phase_pair_d() {
  local mode
  echo "== pair-d ($(date -u +%T))"
  if [ ! -s "$raw/alone__resnet50-graph.txt" ]; then
    colocate d alone alone resnet50-graph "--seconds $S_MAIN" "$S_MAIN" || echo "WARN: pair-d alone incomplete"
  fi
  be_solo_all
  for mode in $d_modes; do
    echo "== pair-d: $mode ($(date -u +%T))"
    hook=""
    mode_uses_missile "$mode" && hook=set_d_weights
    run_mode d "$mode" "d-$mode" resnet50-graph "--seconds $S_MAIN" "$S_MAIN" be1 be2
    hook=""
    local f
    for f in "$logs"/d-d-"$mode"-*.report; do
      [ -f "$f" ] && echo "  $(basename "$f" .report): $(grep -h '^# pacing' "$f")"
    done
  done
}

# ---------------------------------------------------------------- main

bash "$here/bench/gpu_header.sh" "bench/colocation/run_on_gpu.sh $*"
echo "phases: $phases"
echo "main modes: $main_modes | sweep modes: $sweep_modes | pair-d modes: $d_modes"
echo "SECONDS_MAIN=$S_MAIN SECONDS_SWEEP=$S_SWEEP BE_SOLO_SECONDS=$BE_SOLO_S LOAD=$LOAD D_WEIGHTS='$D_WEIGHTS'"
echo "sweep models: $SWEEP_MODELS"
echo "work dir: $work ($(find "$logs" -name '*.out' | wc -l) earlier process logs kept; FRESH=1 clears)"
for f in missiled missile-run missilectl libmissile.so; do
  [ -e "$rt/$f" ] || { echo "ERROR: $rt/$f missing"; exit 2; }
done
timeout 120 python3 -c 'import torch, torchvision; print("torchvision:", torchvision.__version__)' ||
  { echo "ERROR: torch/torchvision not importable"; exit 2; }
timeout 120 python3 -c 'import transformers; print("transformers:", transformers.__version__)' 2>/dev/null ||
  echo "WARN: transformers not importable: bert-graph, bert and gpt2 will be skipped"
# An MPS daemon left behind on our pipe directory would turn every mode into an MPS mode.
if mps_running; then
  echo "WARN: an MPS daemon is running; asking the one on $CUDA_MPS_PIPE_DIRECTORY to quit"
  mps_on=1; stop_mps
fi
t_start=$SECONDS
IFS=, read -r -a phase_list <<< "$phases"
for ph in "${phase_list[@]}"; do
  case $ph in
    main) phase_main ;;
    sweep) phase_sweep ;;
    pair-d) phase_pair_d ;;
    *) echo "ERROR: unknown phase '$ph' (main, sweep, pair-d, all)" ;;
  esac
  echo "== phase $ph done after $((SECONDS - t_start)) s"
done
echo "== report ($(date -u +%T), $((SECONDS - t_start)) s)"
timeout 120 python3 "$bench/report.py" "$work" "$out/colocation.log" --raw-dir "$raw" --out-dir "$out"
for f in summary.md latency.png be_throughput.png; do [ -f "$out/$f" ] && cp -f "$out/$f" "$work/"; done
pack
echo "== done after $((SECONDS - t_start)) s; results in $out (colocation.tar.gz: everything)"

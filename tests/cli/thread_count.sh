#!/usr/bin/env bash
# --threads 1 bounds every thread a rank computes with, on whatever thread the work runs: with no
# OpenMP variable set, 4 ranks of zero1 (whose boundary collectives run on the communication
# thread; before the fix a team of the default size, one OpenMP worker per core, started there
# and spun, and the run was 25 times slower with overlap on). While they train, each rank's
# threads' CPU time is read twice from /proc/PID/task; only the main thread (TID = PID) and the one
# communication thread may have computed in between (a worker it started would carry its name,
# strata-comm, too, and is counted).
# usage: thread_count.sh <strata> <mpirun command ending in -np>
STRATA=$1; shift; MPIRUN=("$@")
source "$(dirname "$0")/checkpoint_lib.sh"
STRATA=$(readlink -f "$STRATA")
unset OMP_NUM_THREADS OMP_WAIT_POLICY OMP_PROC_BIND OMP_DYNAMIC GOMP_SPINCOUNT
set -m
"${MPIRUN[@]}" 4 "$STRATA" train --model tiny --batch-size 2 --seq-len 64 --topology gcd:2,node:2 \
  --plan zero1 --threads 1 --overlap 1 --steps 1000000 "${quiet[@]}" > "$work/run.log" 2>&1 &
job=$!
trap 'kill -TERM -- -$job 2>/dev/null; kill -KILL -- -$job 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 300); do grep -q "^engine: " "$work/run.log" && break; sleep 0.1; done
sleep 2  # past start-up, into steady training
ranks=$(pgrep -f "^$STRATA train --model tiny" || true)
[ "$(echo "$ranks" | wc -w)" -eq 4 ] || { cat "$work/run.log"; fail "expected 4 rank processes, found: '$ranks'"; }
cpu() {  # cpu <pid>: "tid name ticks" per thread
  for t in /proc/"$1"/task/*; do
    stat=$(cat "$t/stat" 2>/dev/null) || continue
    rest=${stat##*) }
    set -- $rest
    echo "${t##*/} $(cat "$t/comm") $(( ${12} + ${13} ))"
  done
}
for p in $ranks; do cpu "$p" > "$work/before.$p"; done
sleep 3
ticks=$(getconf CLK_TCK)
for p in $ranks; do
  cpu "$p" > "$work/after.$p"
  joined=$(join <(sort "$work/before.$p") <(sort "$work/after.$p"))
  computing=$(echo "$joined" | awk -v hz="$ticks" '{ if (($5 - $3) / hz > 0.15) print $1 "(" $2 ")" }')
  echo "rank process $p: threads that used more than 0.15 s of CPU in 3 s: $computing"
  comm=0
  for t in $computing; do
    tid=${t%%(*}; name=${t#*(}; name=${name%)}
    if [ "$name" = "strata-comm" ]; then comm=$((comm + 1)); continue; fi
    [ "$tid" = "$p" ] || fail "thread $t of rank process $p computed: only the main and communication threads may, under --threads 1"
  done
  [ "$comm" -le 1 ] || fail "$comm threads named strata-comm computed in rank process $p: the communication thread started a team"
  # The thread ran collectives in the window (a compute thread that finds it idle runs a task
  # itself, so it need not have used much CPU; but it must have run some, or nothing was tested).
  ran=$(echo "$joined" | awk '$2 == "strata-comm" && $5 > $3 { n++ } END { print n + 0 }')
  [ "$ran" -ge 1 ] || fail "the communication thread of rank process $p did not run (no overlap?)"
done
echo "ok: under --threads 1 only the main and communication threads compute"

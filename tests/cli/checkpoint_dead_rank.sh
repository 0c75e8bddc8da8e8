#!/usr/bin/env bash
# Faults: SIGKILL one of 8 ranks mid-run: the job ends non-zero within 30 s naming the failed
# rank; --resume auto then continues from the last complete checkpoint and ends with the states
# of an uninterrupted run. SIGSTOP one rank: the watchdog (--collective-timeout 3) ends the job
# within 30 s naming the call that did not return.
# usage: checkpoint_dead_rank.sh <strata> <mpirun command ending in -np>
STRATA=$1; shift; MPIRUN=("$@")
source "$(dirname "$0")/checkpoint_lib.sh"
steps=400
args=(--topology gcd:2,gpu:2,node:2 --plan zero3 --batch-size 1 --steps "$steps" --checkpoint-every 20 --keep-last 2
      "${quiet[@]}")
# The rank processes of the run whose checkpoint root is $1 (not mpirun's).
rank_pids() { pgrep -f -- "--save $1" | while read -r p; do
  [ "$(cat /proc/"$p"/comm 2>/dev/null)" = strata ] && echo "$p"; done; }
wait_for_checkpoint() { for _ in $(seq 600); do
  [ -n "$(find "$1" -name COMPLETE 2>/dev/null)" ] && return 0; sleep 0.1; done; fail "no checkpoint appeared"; }

"${MPIRUN[@]}" 8 "$STRATA" train "${args[@]}" --save "$work/whole" > /dev/null

for signal in KILL STOP; do
  root="$work/run-$signal"
  "${MPIRUN[@]}" 8 "$STRATA" train "${args[@]}" --save "$root" --collective-timeout 3 > "$work/$signal.log" 2>&1 &
  job=$!
  wait_for_checkpoint "$root"
  victim=$(rank_pids "$root" | sed -n 4p)
  [ -n "$victim" ] || fail "no rank process found"
  start=$(date +%s)
  kill -"$signal" "$victim"
  set +e
  for _ in $(seq 300); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$job" 2>/dev/null && { kill -KILL "$victim"; fail "SIG$signal: the job still runs after 30 s"; }
  wait "$job"; status=$?
  set -e
  kill -KILL "$victim" 2>/dev/null || true
  took=$(( $(date +%s) - start ))
  [ "$status" -ne 0 ] || fail "SIG$signal: the job exited 0"
  if [ "$signal" = KILL ]; then
    grep -qE "rank [0-9]+ .*(exited on signal 9|killed|Killed)" "$work/$signal.log" || { cat "$work/$signal.log"; fail "no line names the killed rank"; }
  else
    grep -qE "error on rank [0-9]+ \(host [^)]+\): MPI_[A-Za-z_]+.* has not returned in 3.0 s" "$work/$signal.log" || { cat "$work/$signal.log"; fail "no watchdog sentence"; }
  fi
  echo "ok: SIG$signal of one rank ended the job in ${took} s with exit $status"
done
# Resume the killed run from its newest complete checkpoint and finish it.
"${MPIRUN[@]}" 8 "$STRATA" train "${args[@]}" --save "$work/run-KILL" --resume auto > "$work/resume.log"
grep -q "resumed: " "$work/resume.log" || fail "the run did not resume"
want=$(digests "$work/whole/step-$(printf %08d "$steps")")
[ "$(digests "$work/run-KILL/step-$(printf %08d "$steps")")" = "$want" ] || fail "the resumed run ended with other states"
echo "ok: resumed ($(grep 'resumed: ' "$work/resume.log")) and ended with the uninterrupted run's states"

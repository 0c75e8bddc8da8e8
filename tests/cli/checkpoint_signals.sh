#!/usr/bin/env bash
# Ctrl-C (SIGINT) and SIGTERM sent to mpirun: the ranks finish their step, agree, write a
# complete checkpoint of it and exit; nothing partial is left. (Open MPI kills ranks that have
# not exited about 1 s after it forwards the signal; the README says what to do for slower steps.)
# usage: checkpoint_signals.sh <strata> <mpirun command ending in -np>
STRATA=$1; shift; MPIRUN=("$@")
source "$(dirname "$0")/checkpoint_lib.sh"
# Job control on: a script's background commands would otherwise start with SIGINT ignored.
set -m
for signal in INT TERM; do
  root="$work/$signal"
  "${MPIRUN[@]}" 4 "$STRATA" train --topology gcd:2,node:2 --plan zero3 --steps 100000 \
    --checkpoint-every 50 --save "$root" "${quiet[@]}" > "$work/$signal.log" 2>&1 &
  job=$!
  for _ in $(seq 600); do [ -n "$(find "$root" -name COMPLETE 2>/dev/null)" ] && break; sleep 0.1; done
  sleep 0.3
  kill -"$signal" "$job"
  set +e
  for _ in $(seq 300); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$job" 2>/dev/null && { kill -KILL "$job"; fail "SIG$signal: still running after 30 s"; }
  wait "$job"
  set -e
  stopped=$(grep -oE "stopping after step [0-9]+ \(signal received" "$work/$signal.log" | grep -oE "[0-9]+" | head -1)
  [ -n "$stopped" ] || { cat "$work/$signal.log"; fail "SIG$signal: the run did not stop on the signal"; }
  dir="$root/step-$(printf %08d "$stopped")"
  [ -f "$dir/COMPLETE" ] || fail "SIG$signal: no complete checkpoint of step $stopped"
  "$STRATA" inspect "$dir" > /dev/null || fail "SIG$signal: the checkpoint of step $stopped does not verify"
  [ -z "$(find "$root" -name '*.partial')" ] || fail "SIG$signal: partial files left"
  echo "ok: SIG$signal stopped the run after step $stopped with a complete, verified checkpoint"
done

#!/usr/bin/env bash
# SIGUSR1 to mpirun (which forwards it to the ranks without killing them, as Slurm's
# --signal=USR1@T does ahead of a time limit): 4 ranks with steps of 2-3 s finish the step in
# progress, write a complete, verified checkpoint of it and exit 0; a requeue with --resume auto
# continues bit-exactly (its losses equal an uninterrupted run's, to the last bit).
# usage: checkpoint_usr1.sh <strata> <mpirun command ending in -np>
STRATA=$1; shift; MPIRUN=("$@")
source "$(dirname "$0")/checkpoint_lib.sh"
set -m  # job control: the background job must not start with the signal ignored
run=(train --model small --batch-size 8 --seq-len 128 --grad-accum 4 --topology gcd:2,node:2 --plan zero3
     --steps 5 --val-every 0 --threads 1 --log-every 1)
"${MPIRUN[@]}" 4 "$STRATA" "${run[@]}" --metrics "$work/reference.jsonl" > "$work/reference.log" 2>&1 \
  || { cat "$work/reference.log"; fail "the uninterrupted run failed"; }

root="$work/ckpt"
"${MPIRUN[@]}" 4 "$STRATA" "${run[@]}" --save "$root" --metrics "$work/first.jsonl" > "$work/first.log" 2>&1 &
job=$!
for _ in $(seq 600); do grep -q "^step     1/5" "$work/first.log" && break; sleep 0.1; done
sleep 1  # inside step 2
done_before=$(grep -c "^step " "$work/first.log")
kill -USR1 "$job"
set +e
for _ in $(seq 300); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
kill -0 "$job" 2>/dev/null && { kill -KILL "$job"; fail "still running 30 s after SIGUSR1"; }
wait "$job"
status=$?
set -e
[ "$status" -eq 0 ] || { cat "$work/first.log"; fail "mpirun exited $status after a clean stop on SIGUSR1"; }
stopped=$(grep -oE "stopping after step [0-9]+ \(signal received: SIGUSR1\)" "$work/first.log" | grep -oE "[0-9]+" | head -1)
[ -n "$stopped" ] || { cat "$work/first.log"; fail "the run did not stop on SIGUSR1"; }
[ "$stopped" -eq $((done_before + 1)) ] || fail "stopped after step $stopped, not the step in progress ($((done_before + 1)))"
dir="$root/step-$(printf %08d "$stopped")"
[ -f "$dir/COMPLETE" ] || fail "no complete checkpoint of step $stopped"
"$STRATA" inspect "$dir" > /dev/null || fail "the checkpoint of step $stopped does not verify"
[ -z "$(find "$root" -name '*.partial')" ] || fail "partial files left"

"${MPIRUN[@]}" 4 "$STRATA" "${run[@]}" --save "$root" --resume auto --metrics "$work/requeue.jsonl" \
  > "$work/requeue.log" 2>&1 || { cat "$work/requeue.log"; fail "the requeued run failed"; }
grep -q "resumed: .*step-$(printf %08d "$stopped") after step $stopped" "$work/requeue.log" \
  || { cat "$work/requeue.log"; fail "the requeued run did not resume from step $stopped"; }
want=$(losses_from "$work/reference.jsonl" 1)
got="$(losses_from "$work/first.jsonl" 1) $(losses_from "$work/requeue.jsonl" $((stopped + 1)))"
[ "$want" = "$got" ] || fail "losses differ: uninterrupted [$want], stopped and requeued [$got]"
echo "ok: SIGUSR1 during step $stopped stopped the run after it with a verified checkpoint and exit 0; the requeue matched bit for bit"

#!/usr/bin/env bash
# Bit-exact resume on 8 ranks (fp32, list order: deterministic): 20 steps straight against 10
# steps, exit, --resume auto, 10 steps; the losses of steps 11-20 and every shard file of the
# step-20 checkpoint are identical, for zero3, zeropp and hier3.
# usage: checkpoint_resume_exact.sh <strata> <mpirun command ending in -np>
STRATA=$1; shift; MPIRUN=("$@")
source "$(dirname "$0")/checkpoint_lib.sh"
run8() { "${MPIRUN[@]}" 8 "$STRATA" train --topology gcd:2,gpu:2,node:2 --batch-size 1 --steps 20 --val-every 0 \
  --log-every 1000 "$@" > /dev/null; }
for plan in zero3 zeropp hier3; do
  run8 --plan "$plan" --save "$work/$plan-whole" --metrics "$work/$plan-whole.jsonl"
  run8 --plan "$plan" --save "$work/$plan-split" --metrics "$work/$plan-first.jsonl" --stop-after 10
  [ -f "$work/$plan-split/step-00000010/COMPLETE" ] || fail "$plan: no complete checkpoint after step 10"
  run8 --plan "$plan" --save "$work/$plan-split" --metrics "$work/$plan-second.jsonl" --resume auto
  a=$(losses_from "$work/$plan-whole.jsonl" 11); b=$(losses_from "$work/$plan-second.jsonl" 11)
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "$plan: losses of steps 11-20 differ: [$a] vs [$b]"
  n=0
  for f in "$work/$plan-whole/step-00000020"/rank-*.bin; do
    cmp -s "$f" "$work/$plan-split/step-00000020/$(basename "$f")" || fail "$plan: $(basename "$f") differs"
    n=$((n + 1))
  done
  [ "$n" -ge 1 ] || fail "$plan: no shard files"
  echo "ok: $plan resumed bit-exactly ($n shard files identical, 10 losses identical)"
done

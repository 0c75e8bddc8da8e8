#!/usr/bin/env bash
# Resharding: a checkpoint of 8 ranks hier3 (gcd:2,gpu:2,node:2) after 4 steps loads into 4 ranks
# zero3 and into one process (the same global batch of 8 sequences): the assembled weights and
# both Adam moments are identical (inspect's digests of the converted checkpoints), and the next
# step's loss equals the 8-rank run's to float rounding.
# usage: checkpoint_reshard.sh <strata> <mpirun command ending in -np>
STRATA=$1; shift; MPIRUN=("$@")
source "$(dirname "$0")/checkpoint_lib.sh"
common=(--val-every 0 --log-every 1000)
"${MPIRUN[@]}" 8 "$STRATA" train --topology gcd:2,gpu:2,node:2 --plan hier3 --batch-size 1 --steps 4 \
  --save "$work/h8" --metrics "" "${common[@]}" > /dev/null
ckpt="$work/h8/step-00000004"
# Converted without a step (resumed at the last step), then one step further.
"${MPIRUN[@]}" 4 "$STRATA" train --topology gcd:2,node:2 --plan zero3 --batch-size 2 --steps 4 --resume "$ckpt" \
  --save "$work/z4" --metrics "" "${common[@]}" > /dev/null
"$STRATA" train --batch-size 8 --steps 4 --resume "$ckpt" --save "$work/p1" --metrics "" "${common[@]}" > /dev/null
want=$(digests "$ckpt")
[ "$(digests "$work/z4/step-00000004")" = "$want" ] || fail "4 ranks zero3 loaded other states: $(digests "$work/z4")"
[ "$(digests "$work/p1/step-00000004")" = "$want" ] || fail "one process loaded other states"
"${MPIRUN[@]}" 8 "$STRATA" train --topology gcd:2,gpu:2,node:2 --plan hier3 --batch-size 1 --steps 5 \
  --resume "$ckpt" --metrics "$work/h8.jsonl" "${common[@]}" > /dev/null
"${MPIRUN[@]}" 4 "$STRATA" train --topology gcd:2,node:2 --plan zero3 --batch-size 2 --steps 5 --resume "$ckpt" \
  --metrics "$work/z4.jsonl" "${common[@]}" > /dev/null
"$STRATA" train --batch-size 8 --steps 5 --resume "$ckpt" --metrics "$work/p1.jsonl" "${common[@]}" > /dev/null
/usr/bin/python3 - "$(loss_at "$work/h8.jsonl" 5)" "$(loss_at "$work/z4.jsonl" 5)" "$(loss_at "$work/p1.jsonl" 5)" <<'PY'
import sys
h8, z4, p1 = map(float, sys.argv[1:])
for name, x in (("4 ranks zero3", z4), ("one process", p1)):
    rel = abs(x - h8) / abs(h8)
    assert rel < 1e-5, f"FAIL: step 5 loss {x!r} ({name}) vs {h8!r} (8 ranks hier3), relative {rel:.1e}"
print(f"ok: identical states after resharding; step 5 loss {h8!r} (8 ranks), {z4!r} (4 ranks), {p1!r} (1 process)")
PY

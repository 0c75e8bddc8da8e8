#!/usr/bin/env bash
# Activation recomputation changes no bit: for every preset plan on 4 ranks (gcd:2,gpu:2), two
# micro-batches per step, the losses, gradient norms and every checkpoint shard's digest after 3
# steps are those of the same run without recomputation, with every block recomputed and with
# every:2; and hier3 with int8 weights / int4 gradients and bf16 weights and compute too.
# usage: recompute_parity.sh <strata> <mpirun command ending in -np>
set -euo pipefail
STRATA=$1; shift
MPIRUN=("$@")
work=$(mktemp -d /tmp/strata-recompute.XXXXXX)
trap 'rm -rf "$work"' EXIT
figures() {  # the step records' loss and norm, then the shard digests
  /usr/bin/python3 -c '
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    if d["type"] == "step":
        print(d["step"], repr(d["loss"]), repr(d["grad_norm"]))' "$1/metrics.jsonl"
  (cd "$1/save/step-00000003" && sha256sum rank-*.bin)
}
failed=0
for plan in ddp zero1 zero2 zero3 zeropp mics hier3 "hier3,quant_weights=int8,quant_grads=int4 bf16"; do
  set -- $plan
  extra=(); [ "${2:-}" = bf16 ] && extra=(--dtype bf16 --compute-dtype bf16)
  for ck in none blocks every:2; do
    dir="$work/${1//[,=]/_}-$ck"
    mkdir -p "$dir"
    "${MPIRUN[@]}" 4 "$STRATA" train --topology gcd:2,gpu:2 --plan "$1" "${extra[@]}" --threads 1 --steps 3 \
      --grad-accum 2 --batch-size 2 --val-every 0 --log-every 1000 --activation-checkpointing "$ck" \
      --save "$dir/save" --metrics "$dir/metrics.jsonl" > "$dir/out" 2>&1 ||
      { cat "$dir/out"; echo "FAIL: plan $1 with --activation-checkpointing $ck failed"; exit 1; }
    figures "$dir" > "$dir/figures"
    [ -s "$dir/figures" ] || { echo "FAIL: plan $1 $ck wrote no figures"; exit 1; }
    if [ "$ck" != none ]; then
      if ! diff "$work/${1//[,=]/_}-none/figures" "$dir/figures"; then
        echo "FAIL: plan $1 ${2:-fp32}: --activation-checkpointing $ck changed the figures above"
        failed=1
      fi
    fi
  done
  echo "plan $1 ${2:-fp32}: none, blocks and every:2 agree bit for bit"
done
exit $failed

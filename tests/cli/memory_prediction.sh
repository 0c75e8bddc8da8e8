#!/usr/bin/env bash
# The memory model against the run: for ddp, zero1, zero3 and hier3 with int8 weights / int4
# gradients on 4 ranks (gcd:2,node:2), with and without activation recomputation, at two model
# sizes, the predicted peak strata train prints at its end is within 10% of the largest rank's
# measured peak resident set (VmHWM), and the engine's own allocations (states, schedule buffers,
# pooled staging, activations) within 2% of the model's figure for them.
# usage: memory_prediction.sh <strata> <mpirun command ending in -np>
set -euo pipefail
STRATA=$1; shift
MPIRUN=("$@")
work=$(mktemp -d /tmp/strata-memory.XXXXXX)
trap 'rm -rf "$work"' EXIT
failed=0
check() {  # metrics file, label: compares the run's memory record
  /usr/bin/python3 - "$1" "$2" <<'PY' || failed=1
import json, sys
path, label = sys.argv[1], sys.argv[2]
rec = [json.loads(l) for l in open(path) if json.loads(l)["type"] == "memory"]
assert rec, f"{label}: no memory record in {path}"
m = rec[-1]
p = m["predicted"]
resident, allocated = m["measured_peak_resident_bytes"], m["measured_engine_allocated_bytes"]
engine = p["engine_allocated"]
r1, r2 = p["total"] / resident - 1, engine / allocated - 1
print(f"{label}: predicted {p['total']/1e6:.1f} MB, measured {resident/1e6:.1f} MB ({100*r1:+.1f}%); "
      f"engine {engine/1e6:.1f} MB vs {allocated/1e6:.1f} MB ({100*r2:+.1f}%)")
if abs(r1) > 0.10 or abs(r2) > 0.02:
    print(f"FAIL: {label}: the predicted peak is off by more than the bound")
    sys.exit(1)
PY
}
i=0
for shape in "--model small --batch-size 2 --seq-len 128" "--model gpt2-124m --n-layer 2 --batch-size 1 --seq-len 64"; do
  for plan in ddp zero1 zero3 "hier3,quant_weights=int8,quant_grads=int4"; do
    for ck in none blocks; do
      i=$((i + 1))
      # shellcheck disable=SC2086
      "${MPIRUN[@]}" 4 "$STRATA" train $shape --topology gcd:2,node:2 --plan "$plan" --activation-checkpointing "$ck" \
        --threads 1 --steps 2 --val-every 0 --log-every 1000 --metrics "$work/m$i.jsonl" > "$work/out$i" 2>&1 ||
        { cat "$work/out$i"; echo "FAIL: $shape $plan $ck did not run"; exit 1; }
      check "$work/m$i.jsonl" "${shape%% --batch*} $plan $ck"
    done
  done
done
exit $failed

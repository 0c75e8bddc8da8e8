#!/usr/bin/env bash
# strata plan --largest against strata simulate: for every row (preset plan x recomputation) on
# 8 ranks of the cpu cluster with a 2.5 GB budget, the model it names simulates to a total within
# the budget, and the next preset it says does not fit simulates to more than the budget.
# usage: plan_largest.sh <strata>
set -euo pipefail
STRATA=$1
budget=2.5e9
shape=(--cluster cpu --nodes 4 --micro-batch 1 --seq-len 64 --dtype bf16)
out=$("$STRATA" plan --largest "${shape[@]}" --memory-per-device 2.5GB)
echo "$out"
total() {  # model plan recompute: simulate's total GB per device
  "$STRATA" simulate "${shape[@]}" --model "$1" --plan "$2" --activation-checkpointing "$3" |
    awk '/^engine +plan +nodes +weights/ { getline; print $NF; exit }'
}
rows=0
while read -r plan recompute model _ _ _ next _; do
  rows=$((rows + 1))
  if [ "$model" != "none" ]; then
    t=$(total "$model" "$plan" "$recompute")
    /usr/bin/python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) * 1e9 <= $budget * 1.001 else 1)" "$t" ||
      { echo "FAIL: $plan $recompute: $model simulates to $t GB, over the budget"; exit 1; }
  fi
  if [ "$next" != "-" ] && [ -n "$next" ]; then
    t=$(total "$next" "$plan" "$recompute")
    /usr/bin/python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) * 1e9 > $budget else 1)" "$t" ||
      { echo "FAIL: $plan $recompute: $next simulates to $t GB, within the budget, yet was called too large"; exit 1; }
  fi
done < <(echo "$out" | awk '$2 == "none" || $2 == "blocks"')
[ "$rows" = 14 ] || { echo "FAIL: $rows rows, not 7 plans x 2 settings"; exit 1; }
echo "plan --largest: ok"

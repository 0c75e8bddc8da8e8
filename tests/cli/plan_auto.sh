#!/usr/bin/env bash
# --plan auto on 4 ranks (gcd:2,node:2, small model): with a budget that excludes the fastest
# plan's predicted peak the next plan is chosen, and the run's measured peak stays inside the
# budget (within the memory model's 10%); ranks given different budgets are refused naming the key; a budget no plan fits is
# refused before anything runs, naming the smallest plan's need; a budget over the host's memory
# runs with a warning giving both figures.
# usage: plan_auto.sh <strata> <mpirun command ending in -np>
set -euo pipefail
STRATA=$1; shift
MPIRUN=("$@")
work=$(mktemp -d /tmp/strata-plan-auto.XXXXXX)
trap 'rm -rf "$work"' EXIT
common=(--model small --batch-size 2 --seq-len 64 --topology gcd:2,node:2 --threads 1 --val-every 0 --log-every 1000)
train() {  # name, flags...: runs 4 ranks, keeping stdout+stderr and the exit status
  local name=$1; shift
  set +e
  "${MPIRUN[@]}" 4 "$STRATA" train "${common[@]}" --metrics "$work/$name.jsonl" "$@" > "$work/$name.out" 2>&1
  echo $? > "$work/$name.rc"
  set -e
}
fail() { echo "FAIL: $*"; exit 1; }
chosen() { sed -n 's/.*chose #1 \([^ ]*\) .*/\1/p' "$work/$1.out" | head -1; }
memory() {  # run name, key of the memory record (or predicted.total)
  /usr/bin/python3 -c '
import json, sys
m = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["type"] == "memory"][-1]
print(int(m["predicted"]["total"] if sys.argv[2] == "predicted" else m[sys.argv[2]]))' "$work/$1.jsonl" "$2"
}

train roomy --memory-budget 20GB --steps 2
[ "$(cat "$work/roomy.rc")" = 0 ] || { cat "$work/roomy.out"; fail "--plan auto with 20GB did not run"; }
first=$(chosen roomy)
[ -n "$first" ] || { cat "$work/roomy.out"; fail "no 'chose #1' line"; }
grep -q "runner-up" "$work/roomy.out" || fail "no runners-up printed"
peak=$(memory roomy predicted)
budget=$((peak - 1))
echo "fastest: $first (predicted peak $peak B); budget $budget B"

train tight --memory-budget "$budget" --steps 2
[ "$(cat "$work/tight.rc")" = 0 ] || { cat "$work/tight.out"; fail "--plan auto with $budget B did not run"; }
second=$(chosen tight)
[ -n "$second" ] && [ "$second" != "$first" ] || { cat "$work/tight.out"; fail "a budget under $first's peak chose '$second'"; }
measured=$(memory tight measured_peak_resident_bytes)
predicted=$(memory tight predicted)
echo "under $budget B: $second, predicted peak $predicted B, measured $measured B"
[ "$predicted" -le "$budget" ] || fail "$second's predicted peak $predicted B is over the budget of $budget B"
# The run fits: its measured peak within the budget, give or take the memory model's 10% bound.
[ "$measured" -le $((budget + budget / 10)) ] || fail "$second's run peaked at $measured B, over the budget of $budget B"

# Different budgets (an MPMD launch): refused by name before any step.
set +e
"${MPIRUN[@]}" 2 "$STRATA" train "${common[@]}" --metrics "" --memory-budget 1GB : -np 2 "$STRATA" train "${common[@]}" \
  --metrics "" --memory-budget 2GB > "$work/mpmd.out" 2>&1
rc=$?
set -e
[ "$rc" = 2 ] || { cat "$work/mpmd.out"; fail "different budgets exited $rc, not 2"; }
grep -q "memory-budget" "$work/mpmd.out" || { cat "$work/mpmd.out"; fail "the refusal does not name memory-budget"; }

train small --memory-budget 1MB --steps 2
[ "$(cat "$work/small.rc")" = 2 ] || { cat "$work/small.out"; fail "a 1MB budget exited $(cat "$work/small.rc"), not 2"; }
grep -q "no plan fits the memory budget of 1 MB per rank; the smallest, .* needs" "$work/small.out" ||
  { cat "$work/small.out"; fail "the refusal does not name the smallest plan's need"; }
grep -q "^step " "$work/small.out" && fail "a refused budget still trained"

train huge --memory-budget 100TB --steps 1
[ "$(cat "$work/huge.rc")" = 0 ] || { cat "$work/huge.out"; fail "a 100TB budget did not run"; }
grep -q "warning: a memory budget of 100 TB per rank for 4 ranks on this host is more than its .* of memory" \
  "$work/huge.out" || { cat "$work/huge.out"; fail "no warning for a budget over the host's memory"; }
echo "plan auto: ok"

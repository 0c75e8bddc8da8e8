#!/usr/bin/env bash
# Every command that writes a file (train --metrics and --timeline, export --out, calibrate --out,
# simulate --timeline) refuses to replace a data file, a file inside a checkpoint and an unrelated
# file, each with a sentence, the usage exit and the file unchanged; replaces its own earlier
# output of the same kind; and --force overrides.
# usage: output_policy.sh <strata> <mpirun command ending in -np>
STRATA=$1; shift; MPIRUN=("$@")
source "$(dirname "$0")/checkpoint_lib.sh"
STRATA=$(readlink -f "$STRATA")
cd "$work"
printf 'hello world, some training text that is long enough\n%.0s' $(seq 200) > data.txt
printf '# notes\nnothing of Strata\n' > notes.md
"$STRATA" train --steps 2 --save good "${quiet[@]}" > /dev/null
shard=good/step-00000002/rank-00000.bin
n=0
refused() {  # refused <regex> <file that must stay as it is> <command...>
  local pattern=$1 file=$2; shift 2
  cp "$file" before.copy
  set +e
  out=$(timeout 60 "$@" 2>&1 < /dev/null)
  status=$?
  set -e
  n=$((n + 1))
  [ "$status" -eq 2 ] || { echo "$out"; fail "case $n exited $status, not the usage code 2: $*"; }
  printf '%s\n' "$out" | grep -qE -- "$pattern" || { echo "$out"; fail "case $n: no line matches /$pattern/: $*"; }
  cmp -s "$file" before.copy || fail "case $n changed $file: $*"
  printf '%3d  refused: %s\n     -> %s\n' "$n" "$*" "$(printf '%s\n' "$out" | grep -E -- "$pattern" | head -1)"
}
written() {  # written <file> <command...>: succeeds and leaves <file> changed
  local file=$1; shift
  [ -e "$file" ] && cp "$file" before.copy || : > before.copy
  "$@" > out.log 2>&1 || { cat out.log; fail "case $((n + 1)) failed: $*"; }
  n=$((n + 1))
  cmp -s "$file" before.copy && fail "case $n did not write $file: $*"
  printf '%3d  written: %s\n' "$n" "$*"
}
not_kind="exists and is not"
inside="is inside a checkpoint directory"

# export --out
for target in data.txt notes.md; do
  refused "--out '$target' $not_kind a safetensors file written by strata export" "$target" "$STRATA" export good --out "$target"
done
refused "--out '$shard' $inside" "$shard" "$STRATA" export good --out "$shard"
written model.safetensors "$STRATA" export good --out model.safetensors
cp model.safetensors first.safetensors; printf 'x' >> model.safetensors  # changed, yet still ours
written model.safetensors "$STRATA" export good --out model.safetensors
cp notes.md forced.md
written forced.md "$STRATA" export good --out forced.md --force

# simulate --timeline
refused "--timeline 'data.txt' $not_kind a Strata timeline" data.txt "$STRATA" simulate --nodes 1 --timeline data.txt
refused "--timeline 'notes.md' $not_kind a Strata timeline" notes.md "$STRATA" simulate --nodes 1 --timeline notes.md
refused "--timeline '$shard' $inside" "$shard" "$STRATA" simulate --nodes 1 --timeline "$shard"
written sim.json "$STRATA" simulate --nodes 1 --timeline sim.json
written sim.json "$STRATA" simulate --nodes 1,2 --timeline sim.json
cp notes.md forced.md
written forced.md "$STRATA" simulate --nodes 1 --timeline forced.md --force

# calibrate --out (refused before anything is measured)
cal=("${MPIRUN[@]}" 2 "$STRATA" calibrate --topology gcd:2 --model tiny --repeats 1)
refused "--out 'data.txt' $not_kind a cluster file written by strata calibrate" data.txt "${cal[@]}" --out data.txt
refused "--out '$shard' $inside" "$shard" "${cal[@]}" --out "$shard"
written cluster.toml "${cal[@]}" --out cluster.toml
refused "--out 'cluster.toml' would write over 'cluster.toml', an input of this run" cluster.toml \
  "${cal[@]}" --device cluster.toml --out cluster.toml
written cluster.toml "${cal[@]}" --out cluster.toml
written cluster.toml "${cal[@]}" --device cluster.toml --out cluster.toml --force

# train --metrics and --timeline
refused "--metrics 'data.txt' would write over 'data.txt', an input of this run" data.txt \
  "$STRATA" train --steps 1 --data data.txt --metrics data.txt
refused "--metrics 'notes.md' $not_kind a Strata metrics file" notes.md "$STRATA" train --steps 1 --metrics notes.md
refused "--metrics '$shard' $inside" "$shard" "$STRATA" train --steps 1 --metrics "$shard"
written run.jsonl "$STRATA" train --steps 1 --metrics run.jsonl
written run.jsonl "$STRATA" train --steps 2 --metrics run.jsonl
cp notes.md forced.md
written forced.md "$STRATA" train --steps 1 --metrics forced.md --force
refused "--timeline 'data.txt' would write over 'data.txt', an input of this run" data.txt \
  "$STRATA" train --steps 1 --plan zero3 --data data.txt --metrics "" --timeline data.txt
refused "--timeline 'notes.md' $not_kind a Strata timeline" notes.md \
  "$STRATA" train --steps 1 --plan zero3 --metrics "" --timeline notes.md
refused "--timeline '$shard' $inside" "$shard" "$STRATA" train --steps 1 --plan zero3 --metrics "" --timeline "$shard"
written trace.json "$STRATA" train --steps 1 --plan zero3 --metrics "" --timeline trace.json
written trace.json "$STRATA" train --steps 2 --plan zero3 --metrics "" --timeline trace.json
cp notes.md forced.md
written forced.md "$STRATA" train --steps 1 --plan zero3 --metrics "" --timeline forced.md --force
echo "ok: $n cases; every output refused what is not its own, replaced its own, and --force overrode"

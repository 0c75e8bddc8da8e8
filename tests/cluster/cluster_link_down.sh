#!/usr/bin/env bash
# A host's link goes down mid-run: the job ends within the collective timeout (plus the launcher's
# keepalive), rank output naming the lost host, nothing left running on either host; with the
# link back, --resume auto continues from the last complete checkpoint and ends with the states
# of an uninterrupted run, bit for bit.
# usage: cluster_link_down.sh <strata> <scripts/cluster>
STRATA=$1 CLUSTER=$2
source "$(dirname "$0")/cluster_lib.sh"
cluster_up --hosts 2 --rate 1gbit
timeout_s=5
run=(train --model tiny --steps 40 --batch-size 2 --topology gpu:2,node:2 --plan hier3 --val-every 0 --log-every 1000
     --metrics "" --checkpoint-every 10 --collective-timeout "$timeout_s")
on_cluster "${run[@]}" --save "$work/straight" > /dev/null 2>&1 || fail "the uninterrupted run failed"
on_cluster "${run[@]}" --save "$work/cut" > "$work/out" 2> "$work/err" &
job=$!
for _ in $(seq 1 600); do [ -f "$work/cut/step-00000010/COMPLETE" ] && break; sleep 0.1; done
[ -f "$work/cut/step-00000010/COMPLETE" ] || { kill $job; fail "no checkpoint after 60 s"; }
"$CLUSTER" link h2 down
start=$(date +%s.%N)
status=0; wait $job || status=$?
elapsed=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
echo "the job ended $elapsed s after the link went down, exit $status"
[ "$status" -ne 0 ] || fail "the job exited 0 with a host cut off"
awk -v e="$elapsed" -v t="$timeout_s" 'BEGIN { exit !(e < t + 15) }' ||
  fail "the job took $elapsed s to end (collective timeout $timeout_s s)"
grep -q "strata: error on rank .* (host strata-h1): .* waits on (on host strata-h2) is dead, stopped or unreachable" \
  "$work/err" || { cat "$work/err"; fail "no rank named the lost host strata-h2"; }
for ns in strata-h1 strata-h2; do
  left=$(ip netns pids "$ns" | xargs -r ps -o comm= -p | grep -c strata || true)
  [ "$left" = 0 ] || fail "$left strata processes still run on $ns"
done
last=$(dirname "$(ls -d "$work"/cut/step-*/COMPLETE | tail -1)")
n=$((10#$(basename "$last" | sed 's/step-//')))
"$CLUSTER" link h2 up
sleep 1
on_cluster "${run[@]}" --save "$work/cut" --resume auto > "$work/resumed" 2>&1 || { cat "$work/resumed"; fail "resume failed"; }
grep -q "^resumed: .* after step $n\$" "$work/resumed" || { cat "$work/resumed"; fail "did not resume from $last"; }
[ "$(digests "$work/cut/step-00000040")" = "$(digests "$work/straight/step-00000040")" ] ||
  fail "the resumed run's step-40 states differ from the uninterrupted run's"
echo "ok: cut after $(basename "$last"), resumed, step-40 states equal the uninterrupted run's"

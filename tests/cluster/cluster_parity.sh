#!/usr/bin/env bash
# 2 hosts x 2 ranks of the tiny model across network namespaces (Open MPI over TCP between the
# hosts, shared memory inside each) match one process on the same global batch, for zero3 and
# hier3; the job finds that its declared nodes are the real hosts, and --topology auto finds them
# itself (node:2 from MPI's shared-memory groups).
# usage: cluster_parity.sh <strata> <scripts/cluster>
STRATA=$1 CLUSTER=$2
source "$(dirname "$0")/cluster_lib.sh"
cluster_up --hosts 2 --rate 1gbit
common=(--model tiny --steps 4 --val-every 0 --log-every 1000 --lr 3e-3)
"$STRATA" train "${common[@]}" --batch-size 8 --metrics "$work/one.jsonl" > /dev/null
for plan in zero3 hier3 auto; do
  topology=gpu:2,node:2 plan_flag=$plan
  if [ "$plan" = auto ]; then topology=auto plan_flag=hier3; fi
  on_cluster train "${common[@]}" --topology "$topology" --plan "$plan_flag" --batch-size 2 \
    --metrics "$work/$plan.jsonl" > "$work/$plan.log" 2>&1 || { cat "$work/$plan.log"; fail "$plan run failed"; }
  grep -q "nodes: the topology's 2 nodes of 2 ranks are the job's 2 hosts" "$work/$plan.log" ||
    { cat "$work/$plan.log"; fail "$plan: the job did not find 2 real hosts matching the node level"; }
  if [ "$plan" = auto ]; then
    grep "^topology: auto found" "$work/$plan.log"
    grep -Eq "^topology: auto found ([a-z0-9]+:[0-9]+,)*node:2 " "$work/$plan.log" ||
      { cat "$work/$plan.log"; fail "--topology auto did not find the 2 hosts"; }
    grep -Eq "^topology = \"([a-z0-9]+:[0-9]+,)*node:2\"" "$work/$plan.log" ||
      { cat "$work/$plan.log"; fail "--topology auto does not stand as explicit levels in the resolved configuration"; }
  fi
  losses_match_one_process "$plan on 2 hosts x 2 ranks" "$work/$plan.jsonl" "$work/one.jsonl"
done

#!/usr/bin/env bash
# Slurm on the virtual cluster: `srun -N 2 -n 4 --mpi=pmix` (scripts/cluster srun) launches strata
# across 2 hosts x 2 ranks, --topology auto finds the hosts, and hier3 matches one process on the
# same global batch. Skipped (exit 77, with the reason) where the hosts or Slurm cannot start.
# usage: cluster_slurm.sh <strata> <scripts/cluster>
STRATA=$1 CLUSTER=$2
source "$(dirname "$0")/cluster_lib.sh"
cluster_up --hosts 2 --rate 1gbit
status=0; "$CLUSTER" slurm-up || status=$?
[ "$status" -ne 77 ] || exit 77
[ "$status" -eq 0 ] || fail "scripts/cluster slurm-up failed"
common=(--model tiny --steps 4 --val-every 0 --log-every 1000 --lr 3e-3)
"$STRATA" train "${common[@]}" --batch-size 8 --metrics "$work/one.jsonl" > /dev/null
# srun starts the tasks in the current directory on every host: the shared scratch directory.
(cd "$work" && "$CLUSTER" srun --ranks-per-host 2 --timeout 120 -- "$STRATA" train "${common[@]}" --topology auto \
  --plan hier3 --batch-size 2 --metrics "$work/srun.jsonl" < /dev/null > "$work/srun.log" 2>&1) ||
  { cat "$work/srun.log"; fail "the srun launch failed"; }
grep -Eq "^topology: auto found ([a-z0-9]+:[0-9]+,)*node:2 " "$work/srun.log" ||
  { cat "$work/srun.log"; fail "under srun, --topology auto did not find the 2 hosts"; }
grep -q "nodes: the topology's 2 nodes of 2 ranks are the job's 2 hosts" "$work/srun.log" ||
  { cat "$work/srun.log"; fail "under srun, the ranks were not 2 per host in blocks"; }
losses_match_one_process "srun -N 2 -n 4 --mpi=pmix, hier3 on the topology found" "$work/srun.jsonl" "$work/one.jsonl"

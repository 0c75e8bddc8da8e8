"""Overlap off, on and auto, as a user runs it: `strata train` for every preset at 2, 3, 4 and 8 ranks
on this machine, tiny model, --threads 1 and no OMP_* variable, the three run back to back (the order
rotating between repeats so drift falls on each). `on` forces the communication thread; `auto` (the
default) measures it against inline in its first steps, or goes inline at once where no core is free
for the thread. The boundary overlap follows: on with on and auto, off with off. Each run's figure is
the median of its steps after the first `--skip` (past auto's trial). Prints one JSON line per run
(scripts/bench; bench/tabulate.py makes the table)."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

PRESETS = ["ddp", "zero1", "zero2", "zero3", "zeropp", "mics", "hier3"]
TOPOLOGIES = {2: "world:2", 3: "world:3", 4: "gcd:2,node:2", 8: "gcd:2,gpu:2,node:2"}


def run(strata, mpirun, ranks, plan, overlap, args, metrics):
    cmd = mpirun + ["-np", str(ranks), strata, "train", "--model", args.model, "--batch-size", str(args.batch),
                    "--seq-len", str(args.seq_len), "--steps", str(args.steps), "--threads", "1",
                    "--plan", plan, "--topology", TOPOLOGIES[ranks], "--overlap", overlap,
                    "--boundary-overlap", "0" if overlap == "off" else "1", "--val-fraction", "0", "--log-every", str(args.steps),
                    "--metrics", metrics, "--force"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    with open(metrics) as f:
        steps = [json.loads(line) for line in f]
    # The first steps pay for first touches and thread start-up, as in `strata train`'s own median.
    ms = [s["ms"] for s in steps if s.get("type") == "step" and s["step"] > args.skip]
    return statistics.median(ms)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--strata", default="build/src/strata")
    p.add_argument("--ranks", default="2,3,4,8")
    p.add_argument("--plans", default=",".join(PRESETS))
    p.add_argument("--model", default="tiny")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--skip", type=int, default=20, help="steps left out of each run's median (auto's trial is 18)")
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    mpirun = ["mpirun"]
    if b"Open MPI" in subprocess.run(["mpirun", "--version"], capture_output=True).stdout:
        mpirun.append("--oversubscribe")
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "metrics.jsonl")
        for ranks in (int(r) for r in args.ranks.split(",")):
            for plan in args.plans.split(","):
                print(f"bench: overlap off/on, {ranks} ranks, {plan}", file=sys.stderr)
                for repeat in range(args.repeats):
                    modes = ["off", "on", "auto"]
                    for overlap in modes[repeat % 3:] + modes[:repeat % 3]:
                        ms = run(args.strata, mpirun, ranks, plan, overlap, args, metrics)
                        print(json.dumps({"bench": "overlap_presets", "ranks": ranks, "topology": TOPOLOGIES[ranks],
                                          "plan": plan, "model": args.model, "batch": args.batch,
                                          "seq_len": args.seq_len, "steps": args.steps, "skip": args.skip, "overlap": overlap,
                                          "repeat": repeat, "median_ms": ms}), flush=True)


if __name__ == "__main__":
    main()

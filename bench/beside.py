"""Two jobs sharing this machine's cores, as a user runs them: a 1-rank `strata train` with --threads 2
(A: small, bf16 compute, B=8 T=128) and a 4-rank zero3 run with --threads 1 (B: small, B=2 T=128,
overlap off), no OMP_* variable set. Each is timed alone, then while the other runs a long job in the
background (started first and stopped after), so every measured step has its neighbour running.
Fair sharing of the 2 cores would make each about twice as slow beside the other; a job that spins
its threads takes more than its share and the other loses more. Prints one JSON line per job
(scripts/bench --only single; bench/tabulate.py makes the table)."""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

COMMON = ["--model", "small", "--seq-len", "128", "--val-fraction", "0", "--force"]
JOBS = {
    "A": (1, ["--batch-size", "8", "--compute-dtype", "bf16", "--threads", "2"]),
    "B": (4, ["--batch-size", "2", "--threads", "1", "--plan", "zero3", "--overlap", "off"]),
}


def command(args, job, steps, metrics):
    ranks, flags = JOBS[job]
    cmd = [args.strata, "train"] + COMMON + flags + ["--thread-wait", args.thread_wait, "--steps", str(steps), "--log-every", str(steps),
                                                      "--metrics", metrics]
    if ranks > 1:
        cmd = args.mpirun.split() + ["-np", str(ranks)] + cmd
    return cmd


def median_ms(metrics, skip):
    with open(metrics) as f:
        steps = [json.loads(line) for line in f]
    return statistics.median(s["ms"] for s in steps if s.get("type") == "step" and s["step"] > skip)


def timed(args, env, job, steps, tmp):
    metrics = os.path.join(tmp, f"{job}.jsonl")
    subprocess.run(command(args, job, steps, metrics), env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE)
    return median_ms(metrics, args.skip)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--strata", default="build/src/strata")
    p.add_argument("--mpirun", default="mpirun --oversubscribe")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--skip", type=int, default=3, help="first steps left out of each median")
    p.add_argument("--thread-wait", default="auto", help="strata train's --thread-wait for both jobs")
    args = p.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}
    with tempfile.TemporaryDirectory() as tmp:
        alone = {job: timed(args, env, job, args.steps, tmp) for job in JOBS}
        for job, other in (("A", "B"), ("B", "A")):
            # The neighbour runs many more steps than the measured job needs; it is stopped after.
            neighbour = subprocess.Popen(command(args, other, 100000, os.path.join(tmp, "neighbour.jsonl")), env=env,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            try:
                time.sleep(5)  # past its start-up
                beside = timed(args, env, job, args.steps, tmp)
            finally:
                os.killpg(neighbour.pid, 15)
                neighbour.wait()
            ranks, flags = JOBS[job]
            print(json.dumps({"bench": "beside", "job": job, "ranks": ranks,
                              "threads": int(flags[flags.index("--threads") + 1]), "thread_wait": args.thread_wait,
                              "alone_ms": alone[job],
                              "beside_ms": beside, "slowdown": beside / alone[job]}), flush=True)


if __name__ == "__main__":
    main()

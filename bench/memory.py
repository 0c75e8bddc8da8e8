"""Memory on this machine, as a user runs it: 8 ranks of `strata train` (one thread each, no OMP_*
variable), zero3 with bf16 weights and compute, micro-batch 1 x 64 tokens, a few real steps, for
gpt2-124m, gpt2-350m and the largest GPT-2 preset `strata plan --largest` says fits 8 ranks sharing
this host (budget: MemAvailable / 8, less 5%), each without and with activation recomputation.
Per run: the predicted peak per rank beside the largest rank's measured peak resident set (VmHWM),
the engine's allocations beside the model's figure for them, the activations predicted, and the
median step; then per model the step-time ratio recompute/none (goal: at most about 1.33, one
extra forward). Prints one JSON line per run and a table on stderr (scripts/bench --only memory)."""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def largest(strata, budget):
    out = subprocess.run([strata, "plan", "--largest", "--cluster", "cpu", "--nodes", "4", "--memory-per-device",
                          f"{budget:.0f}", "--micro-batch", "1", "--seq-len", "64", "--dtype", "bf16"],
                         check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0] == "zero3" and fields[1] == "blocks":
            return fields[2], out
    raise SystemExit("strata plan --largest printed no zero3 blocks row:\n" + out)


def run(strata, mpirun, model, recompute, steps, metrics):
    cmd = mpirun + ["-np", "8", strata, "train", "--model", model, "--plan", "zero3", "--topology", "gcd:2,gpu:2,node:2",
                    "--dtype", "bf16", "--compute-dtype", "bf16", "--activation-checkpointing", recompute,
                    "--batch-size", "1", "--seq-len", "64", "--steps", str(steps), "--threads", "1", "--val-every", "0",
                    "--metrics", metrics, "--force"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
    records = [json.loads(line) for line in open(metrics)]
    memory = [r for r in records if r["type"] == "memory"][-1]
    ms = [r["ms"] for r in records if r["type"] == "step" and r["step"] > 1]
    p = memory["predicted"]
    engine = p["engine_allocated"]
    return {"predicted_bytes": p["total"], "measured_peak_resident_bytes": memory["measured_peak_resident_bytes"],
            "predicted_engine_bytes": engine, "measured_engine_bytes": memory["measured_engine_allocated_bytes"],
            "activation_bytes": p["activations"], "median_step_ms": statistics.median(ms) if ms else None,
            "predicted": p}


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--strata", default="build/src/strata")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--models", default="", help="comma-separated presets (default: gpt2-124m, gpt2-350m, the largest)")
    args = p.parse_args()
    mpirun = ["mpirun"]
    if b"Open MPI" in subprocess.run(["mpirun", "--version"], capture_output=True).stdout:
        mpirun.append("--oversubscribe")
    budget = mem_available() * 0.95 / 8
    top, table = largest(args.strata, budget)
    print(f"bench: strata plan --largest at {budget / 1e9:.3g} GB per rank (8 ranks):\n{table}", file=sys.stderr)
    models = args.models.split(",") if args.models else list(dict.fromkeys(["gpt2-124m", "gpt2-350m", top]))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "metrics.jsonl")
        for model in models:
            for recompute in ("none", "blocks"):
                print(f"bench: memory, 8 ranks, zero3 bf16, {model}, recompute {recompute}", file=sys.stderr)
                r = run(args.strata, mpirun, model, recompute, args.steps, metrics)
                r.update({"bench": "memory", "model": model, "recompute": recompute, "ranks": 8, "largest": top,
                          "budget_bytes": budget})
                print(json.dumps(r), flush=True)
                rows.append(r)
    print(f"\n{'model':<11} {'recompute':<9} {'predicted':>10} {'measured':>10} {'off':>7} {'engine':>10} "
          f"{'measured':>10} {'activations':>11} {'ms/step':>9}", file=sys.stderr)
    for r in rows:
        if "error" in r:
            print(f"{r['model']:<11} {r['recompute']:<9} failed: {r['error']}", file=sys.stderr)
            continue
        off = r["predicted_bytes"] / r["measured_peak_resident_bytes"] - 1
        print(f"{r['model']:<11} {r['recompute']:<9} {r['predicted_bytes'] / 1e9:>9.3f}G "
              f"{r['measured_peak_resident_bytes'] / 1e9:>9.3f}G {100 * off:>+6.1f}% {r['predicted_engine_bytes'] / 1e9:>9.3f}G "
              f"{r['measured_engine_bytes'] / 1e9:>9.3f}G {r['activation_bytes'] / 1e6:>10.1f}M "
              f"{r['median_step_ms'] or 0:>9.0f}", file=sys.stderr)
    for model in models:
        pair = [r for r in rows if r["model"] == model and "error" not in r]
        if len(pair) == 2 and all(r["median_step_ms"] for r in pair):
            print(f"{model}: recompute/none step time {pair[1]['median_step_ms'] / pair[0]['median_step_ms']:.3f}, "
                  f"activations {pair[1]['activation_bytes'] / 1e6:.1f} MB vs {pair[0]['activation_bytes'] / 1e6:.1f} MB",
                  file=sys.stderr)


if __name__ == "__main__":
    main()

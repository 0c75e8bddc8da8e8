"""Prints scripts/bench's tables from its JSON-lines results (build/bench-results.jsonl)."""
import json
import sys


def human(b):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= scale:
            return f"{b / scale:.2f} {unit}"
    return f"{b:.0f} B"


def single_process(rows):
    sgemm = next((r for r in rows if r["bench"] == "sgemm"), None)
    strata = [r for r in rows if r["bench"] == "step"]
    torch = {(r["model"], r["batch"], r["seq_len"]): r for r in rows if r["bench"] == "torch_step"}
    if not sgemm or not strata:
        return
    print(f"BLAS: {sgemm['blas']}")
    print(f"sgemm 2048^3, {sgemm['threads']} threads: {sgemm['gflops']:.1f} GFLOP/s (median of 7)\n")
    print("Training step, one process, fp32 (FLOPs/token = 6N + 12LCT, N = parameters without the position table)")
    print(f"{'model':<10} {'B':>2} {'T':>4} | {'Strata ms':>10} {'tok/s':>8} | {'PyTorch ms':>10} {'tok/s':>8} | "
          f"{'Strata/PyTorch':>14} | {'Strata GFLOP/s':>14} {'of sgemm':>8}")
    for s in strata:
        t = torch.get((s["model"], s["batch"], s["seq_len"]))
        ratio = f"{s['tokens_per_s'] / t['tokens_per_s']:>13.2f}x" if t else f"{'-':>14}"
        tms = f"{t['median_ms']:>10.1f} {t['tokens_per_s']:>8.1f}" if t else f"{'-':>10} {'-':>8}"
        print(f"{s['model']:<10} {s['batch']:>2} {s['seq_len']:>4} | {s['median_ms']:>10.1f} {s['tokens_per_s']:>8.1f} | "
              f"{tms} | {ratio} | {s['model_gflops']:>14.1f} {s['model_gflops'] / sgemm['gflops']:>7.0%}")
    print("\nStrata per-operation profile, ms per step:")
    for s in strata:
        prof = s["profile_ms"]
        parts = ", ".join(f"{k} {v:.1f}" for k, v in sorted(prof.items(), key=lambda kv: -kv[1]) if v >= 0.05)
        print(f"  {s['model']}: {parts}")


def plans(rows):
    runs = [r for r in rows if r["bench"] == "plans"]
    if not runs:
        return
    for model in dict.fromkeys(r["model"] for r in runs):
        group = [r for r in runs if r["model"] == model]
        first = group[0]
        levels = [t["level"] for t in first["traffic"]]
        outer = levels[-1]
        print(f"\nSharded training, {model}: {first['world_size']} ranks x 1 thread, virtual topology "
              f"{first['topology']}, {first['weight_dtype']} weights and gradients, "
              f"{first['batch_per_rank']} x {first['seq_len']} tokens per rank per micro-batch, "
              f"{first['grad_accum']} micro-batches per step")
        print("bytes sent per rank (measured by the traffic meter; each equals the schedule's count):")
        head = f"{'plan':<7} {'ms/step':>8} |" + "".join(f" {l + '/step':>12}" for l in levels)
        head += f" | {outer + '/micro':>12} {outer + ' boundary':>14} | {'state bytes/rank':>16}"
        print(head)
        by_plan = {}
        for r in group:
            t = {x["level"]: x for x in r["traffic"]}
            per_step = [t[l]["measured_step_micro_sent"] + t[l]["measured_step_boundary_sent"] for l in levels]
            micro = t[outer]["measured_step_micro_sent"] / r["grad_accum"]
            boundary = t[outer]["measured_step_boundary_sent"]
            state = sum(m["measured_bytes"] for m in r["memory"])
            by_plan[r["plan"]] = {"micro": micro, "step": per_step[-1]}
            print(f"{r['plan']:<7} {r['median_ms']:>8.1f} |" + "".join(f" {human(b):>12}" for b in per_step)
                  + f" | {human(micro):>12} {human(boundary):>14} | {human(state):>16}")
        if "hier3" in by_plan and "zero3" in by_plan and "zeropp" in by_plan:
            h, z3, zpp = by_plan["hier3"], by_plan["zero3"], by_plan["zeropp"]
            sharded = {k: v for k, v in by_plan.items() if k in ("zero2", "zero3", "zeropp", "hier3")}
            fewest = min(sharded, key=lambda k: sharded[k]["micro"])
            print(f"across '{outer}' per micro-batch: hier3 {human(h['micro'])}, zeropp {human(zpp['micro'])}, "
                  f"zero3 {human(z3['micro'])}; fewest among the plans that shard gradients: {fewest}")
            print(f"  zeropp / zero3 = {zpp['micro'] / z3['micro']:.3f};  hier3 / zero3 = {h['micro'] / z3['micro']:.3f} "
                  f"per micro-batch, {h['step'] / z3['step']:.3f} per step (boundary included)")


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    single_process(rows)
    plans(rows)


if __name__ == "__main__":
    main()

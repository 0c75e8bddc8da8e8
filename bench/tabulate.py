"""Prints scripts/bench's tables from its JSON-lines results (build/bench-results.jsonl); with a second
argument, also plots the virtual-cluster sweep to PREFIX.svg and PREFIX.png with gnuplot."""
import json
import sys


def human(b):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= scale:
            return f"{b / scale:.2f} {unit}"
    return f"{b:.0f} B"


MODE_NAMES = {("openblas", "fp32"): "fp32, OpenBLAS", ("onednn", "fp32"): "fp32, oneDNN",
              ("onednn", "bf16"): "bf16 compute, oneDNN", ("openblas", "bf16"): "bf16 compute, OpenBLAS",
              ("reference", "fp32"): "fp32, reference loops"}


def mode_name(r):
    return MODE_NAMES.get((r.get("matmul", "openblas"), r.get("compute_dtype", "fp32")),
                          f"{r.get('matmul')} {r.get('compute_dtype')}")


def single_process(rows):
    sgemm = [r for r in rows if r["bench"] == "sgemm"]
    strata = [r for r in rows if r["bench"] == "step"]
    torch = [r for r in rows if r["bench"] == "torch_step"]
    if not sgemm or not strata:
        return
    print(f"BLAS: {sgemm[0]['blas']}")
    for r in sgemm:
        if r["m"] == r["n"] == r["k"]:
            print(f"  {mode_name(r):<22} {r['m']}^3: {r['gflops']:7.1f} GFLOP/s  ({r['implementation']})")
    print()

    def kernel(s):  # the c_attn-shaped product of the step's own mode and shape
        m = s["batch"] * s["seq_len"]
        return next((r for r in sgemm if r["m"] == m and r["k"] != r["m"] and mode_name(r) == mode_name(s)
                     and r["n"] == 3 * r["k"]), None)

    print("Training step, one process (FLOPs/token = 6N + 12LCT, N = parameters without the position table);")
    print("'of kernel': model FLOP/s over the same mode's rate on the model's c_attn product (B*T x 3C x C)")
    header = (f"{'model':<10} {'B':>2} {'T':>4} | {'mode':<22} | {'ms/step':>8} {'tok/s':>8} | {'GFLOP/s':>8} "
              f"{'kernel':>7} {'of kernel':>9} | {'vs Strata fp32 OpenBLAS':>23} | {'vs PyTorch same dtype':>21}")
    print(header)
    for model, batch, seq_len in dict.fromkeys((s["model"], s["batch"], s["seq_len"]) for s in strata):
        same = [s for s in strata if (s["model"], s["batch"], s["seq_len"]) == (model, batch, seq_len)]
        peers = {t.get("compute_dtype", "fp32"): t for t in torch
                 if (t["model"], t["batch"], t["seq_len"]) == (model, batch, seq_len)}
        base = next((s for s in same if mode_name(s) == "fp32, OpenBLAS"), None)
        for s in same:
            k = kernel(s)
            peer = peers.get(s.get("compute_dtype", "fp32"))
            vs_base = f"{s['tokens_per_s'] / base['tokens_per_s']:>22.2f}x" if base else f"{'-':>23}"
            vs_peer = f"{s['tokens_per_s'] / peer['tokens_per_s']:>20.2f}x" if peer else f"{'-':>21}"
            kr = f"{k['gflops']:>7.0f} {s['model_gflops'] / k['gflops']:>8.0%}" if k else f"{'-':>7} {'-':>9}"
            print(f"{model:<10} {batch:>2} {seq_len:>4} | {'Strata ' + mode_name(s):<22.22} | {s['median_ms']:>8.1f} "
                  f"{s['tokens_per_s']:>8.1f} | {s['model_gflops']:>8.1f} {kr} | {vs_base} | {vs_peer}")
        for dtype, t in peers.items():
            label = "PyTorch fp32" if dtype == "fp32" else "PyTorch bf16 autocast"
            print(f"{model:<10} {batch:>2} {seq_len:>4} | {label:<22} | {t['median_ms']:>8.1f} {t['tokens_per_s']:>8.1f} | "
                  f"{'':>8} {'':>7} {'':>9} | {'':>23} | {'':>21}")
    samples = [r for r in rows if r["bench"] == "sample"]
    if samples:
        print("\nstrata sample (greedy, one-token prompt):")
        for r in samples:
            how = "key/value cache" if r["cache"] else "recomputing the context"
            print(f"  {r['model']}, {r['threads']} thread(s), {r['tokens']} tokens, {how}: {r['tokens_per_s']:.1f} tokens/s")
        cached = next((r for r in samples if r["cache"]), None)
        full = next((r for r in samples if not r["cache"]), None)
        if cached and full:
            print(f"  the cache: {cached['tokens_per_s'] / full['tokens_per_s']:.1f}x")
    print("\nStrata per-operation profile, per step (mean over the measured steps): bytes each operation must read")
    print("and write against the memory bandwidth of an in-place update b += a over 256 MB ('of memory'; a copy's")
    print("rate beside it), FLOPs of the products against the same mode's c_attn kernel rate ('of kernel')")
    for s in strata:
        if "profile" not in s:
            continue
        k = kernel(s)
        print(f"  {s['model']} B={s['batch']} T={s['seq_len']}, {mode_name(s)}: {s['median_ms']:.1f} ms, "
              f"memory {s['update_gbps']:.1f} GB/s (copy {s['copy_gbps']:.1f})")
        print(f"    {'operation':<14} {'ms':>7} {'share':>6} | {'bytes':>9} {'GB/s':>6} {'of memory':>9} | "
              f"{'GFLOP':>7} {'GFLOP/s':>7} {'of kernel':>9}")
        for name, row in sorted(s["profile"].items(), key=lambda kv: -kv[1]["ms"]):
            if row["ms"] < 0.05:
                continue
            sec = row["ms"] / 1e3
            gbps, rate = row["bytes"] / sec / 1e9, row["flops"] / sec / 1e9
            mem = f"{human(row['bytes']):>9} {gbps:>6.1f} {gbps / s['update_gbps']:>9.0%}" if row["bytes"] > 0 \
                else f"{'-':>9} {'-':>6} {'-':>9}"
            of_kernel = f"{rate / k['gflops']:>9.0%}" if k else f"{'-':>9}"
            arith = f"{row['flops'] / 1e9:>7.2f} {rate:>7.1f} {of_kernel}" if row["flops"] > 0 \
                else f"{'-':>7} {'-':>7} {'-':>9}"
            print(f"    {name:<14} {row['ms']:>7.1f} {row['ms'] / s['median_ms']:>6.1%} | {mem} | {arith}")


def beside(rows):
    jobs = [r for r in rows if r["bench"] == "beside"]
    if jobs:
        print("\ntwo jobs on the 2 cores (fair sharing: each about 2x slower beside the other):")
        for r in jobs:
            print(f"  {r['ranks']} rank(s) x {r['threads']} thread(s): alone {r['alone_ms']:.1f} ms/step, "
                  f"beside the other {r['beside_ms']:.1f} ms/step ({r['slowdown']:.2f}x)")


def attention(rows):
    attention = [r for r in rows if r["bench"] == "attention"]
    if attention:
        print("\ncausal attention, one layer's call (GFLOP/s of the causal products; fused over plain):")
        print(f"{'B':>2} {'T':>5} {'C':>4} {'NH':>3} {'dtype':<5} {'kernel':<6} | {'fwd ms':>8} {'GFLOP/s':>8} | "
              f"{'bwd ms':>8} {'GFLOP/s':>8} | fused/plain")
        for r in attention:
            plain = next((p for p in attention if p["kernel"] == "plain" and p["compute_dtype"] == r["compute_dtype"]
                          and (p["batch"], p["seq_len"]) == (r["batch"], r["seq_len"])), None)
            speedup = "-"
            if r["kernel"] == "fused" and plain:
                speedup = f"{(plain['forward_ms'] + plain['backward_ms']) / (r['forward_ms'] + r['backward_ms']):.2f}x"
            print(f"{r['batch']:>2} {r['seq_len']:>5} {r['channels']:>4} {r['heads']:>3} {r['compute_dtype']:<5} "
                  f"{r['kernel']:<6} | {r['forward_ms']:>8.1f} {r['forward_gflops']:>8.0f} | {r['backward_ms']:>8.1f} "
                  f"{r['backward_gflops']:>8.0f} | {speedup}")


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
        width = max(len(r["plan"]) for r in group)
        head = f"{'plan':<{width}} {'ms/step':>8} |" + "".join(f" {l + '/step':>12}" for l in levels)
        head += f" | {outer + '/micro':>12} {outer + ' boundary':>14} | {'state bytes/rank':>16}"
        print(head)
        by_plan = {}
        for r in group:
            t = {x["level"]: x for x in r["traffic"]}
            per_step = [t[l]["measured_step_micro_sent"] + t[l]["measured_step_boundary_sent"] for l in levels]
            micro = t[outer]["measured_step_micro_sent"] / r["grad_accum"]
            boundary = t[outer]["measured_step_boundary_sent"]
            state = sum(m["measured_bytes"] for m in r["memory"])
            by_plan[r["plan"]] = {"micro": micro, "step": per_step[-1], "ms": r["median_ms"],
                                  "cross": sum(per_step[1:])}
            print(f"{r['plan']:<{width}} {r['median_ms']:>8.1f} |" + "".join(f" {human(b):>12}" for b in per_step)
                  + f" | {human(micro):>12} {human(boundary):>14} | {human(state):>16}")
        if "hier3" in by_plan and "zero3" in by_plan and "zeropp" in by_plan:
            h, z3, zpp = by_plan["hier3"], by_plan["zero3"], by_plan["zeropp"]
            sharded = {k: v for k, v in by_plan.items() if k in ("zero2", "zero3", "zeropp", "hier3")}
            fewest = min(sharded, key=lambda k: sharded[k]["micro"])
            print(f"across '{outer}' per micro-batch: hier3 {human(h['micro'])}, zeropp {human(zpp['micro'])}, "
                  f"zero3 {human(z3['micro'])}; fewest among the plans that shard gradients: {fewest}")
            print(f"  zeropp / zero3 = {zpp['micro'] / z3['micro']:.3f};  hier3 / zero3 = {h['micro'] / z3['micro']:.3f} "
                  f"per micro-batch, {h['step'] / z3['step']:.3f} per step (boundary included)")
        # Quantized collectives: each plan beside its unquantized form. Cross-level bytes are
        # those above the innermost level (the links that are not the fastest).
        pairs = []
        for name in by_plan:
            if name.endswith(",quant=none") and name[: -len(",quant=none")] in by_plan:
                pairs.append((name[: -len(",quant=none")], name))  # zeropp quantizes by default
            elif "quant_" in name and name.split(",")[0] in by_plan:
                pairs.append((name, name.split(",")[0]))
        if pairs:
            print(f"quantized collectives (int8 weight gathers, int4 gradient reduction) against the same plan "
                  f"without: ms/step, and bytes per step above '{levels[0]}' and across '{outer}'")
            print(f"{'plan':<{width}} {'ms/step':>8} {'x plain':>8} | {'cross bytes':>12} {'plain / q':>9} | "
                  f"{outer + ' bytes':>12} {'plain / q':>9}")
            for name, plain in pairs:
                q, u = by_plan[name], by_plan[plain]
                print(f"{name:<{width}} {q['ms']:>8.1f} {q['ms'] / u['ms']:>8.3f} | {human(q['cross']):>12} "
                      f"{u['cross'] / q['cross']:>9.2f} | {human(q['step']):>12} {u['step'] / q['step']:>9.2f}")


def overlap(rows):
    runs = [r for r in rows if r["bench"] == "overlap"]
    if not runs:
        return
    first = runs[0]
    print(f"\nOverlap: {first['world_size']} ranks x {first['compute_threads']} compute thread (+ the communication "
          f"thread when on), {first['plan']}, {first['batch_per_rank']} x {first['seq_len']} tokens per rank; "
          f"per step: median ms, communication ms, exposed (compute waited) ms, hidden = 1 - exposed/communication")
    print(f"{'model':<10} {'overlap':>7} | {'ms/step':>9} {'comm ms':>9} {'exposed':>9} {'hidden':>7} | {'on/off':>7}")
    by_model = {}
    for r in runs:
        by_model.setdefault(r["model"], {})[r["overlap"]] = r
    for model, pair in by_model.items():
        for on in (False, True):
            r = pair.get(on)
            if r is None:
                continue
            ratio = f"{r['median_ms'] / pair[False]['median_ms']:>7.3f}" if on and False in pair else f"{'':>7}"
            print(f"{model:<10} {'on' if on else 'off':>7} | {r['median_ms']:>9.1f} {r['comm_ms_per_step']:>9.1f} "
                  f"{r['exposed_ms_per_step']:>9.1f} {100 * r['hidden_fraction']:>6.0f}% | {ratio}")


def overlap_presets(rows):
    runs = [r for r in rows if r["bench"] == "overlap_presets"]
    if not runs:
        return
    import statistics
    first = runs[0]
    print(f"\nOverlap off, on and auto (the default) for every preset, as a user runs it: strata train, "
          f"{first['model']} {first['batch']} x {first['seq_len']} per rank, --threads 1, no OMP_* variable; "
          f"median ms/step of each run's steps past its first {first.get('skip', 20)}, median over "
          f"{max(r['repeat'] for r in runs) + 1} repeats; ratios are medians of the ratios of runs made back to back")
    print(f"{'ranks':>5} {'topology':<20} {'plan':<7} | {'off':>7} {'on':>7} {'auto':>7} | {'on/off':>7} {'auto/off':>8}")
    groups = {}
    for r in runs:
        groups.setdefault((r["ranks"], r["topology"], r["plan"]), {}).setdefault(r["repeat"], {})[r["overlap"]] = r["median_ms"]
    worst = {"on": 0.0, "auto": 0.0}
    for (ranks, topology, plan), repeats in groups.items():
        ms = {m: statistics.median([rep[m] for rep in repeats.values() if m in rep]) for m in ("off", "on", "auto")}
        ratio = {m: statistics.median([rep[m] / rep["off"] for rep in repeats.values() if m in rep and "off" in rep])
                 for m in ("on", "auto")}
        for m in worst:
            worst[m] = max(worst[m], ratio[m])
        print(f"{ranks:>5} {topology:<20} {plan:<7} | {ms['off']:>7.2f} {ms['on']:>7.2f} {ms['auto']:>7.2f} | "
              f"{ratio['on']:>7.3f} {ratio['auto']:>8.3f}")
    print(f"worst auto/off {worst['auto']:.3f} (goal: at most 1.05), worst on/off {worst['on']:.3f} (the thread forced "
          f"where no core is free for it)")


def quant(rows):
    memcpy = next((r for r in rows if r["bench"] == "quant_memcpy"), None)
    kernels = [r for r in rows if r["bench"] == "quant"]
    if not memcpy or not kernels:
        return
    isas = list(dict.fromkeys(r["isa"] for r in kernels))
    best = next((r["isa"] for r in kernels if r["best"]), isas[-1])
    print(f"\nQuantization kernels, 1 thread, {memcpy['bytes'] / 2**20:.0f} MiB of fp32 (or as many bf16) per call, "
          f"int8 in blocks of {next(r['block'] for r in kernels if 'int8' in (r['from'], r['to']))}, int4 in blocks "
          f"of {next(r['block'] for r in kernels if 'int4' in (r['from'], r['to']))} (the defaults); median GB/s of the input bytes (quantize) or of the output bytes "
          f"(dequantize, dequantize_add), and that as a fraction of memcpy ({memcpy['gb_per_s']:.2f} GB/s, "
          f"bytes copied); collectives use {best}")
    print(f"{'kernel':<26} {'counts':>6} |" + "".join(f" {isa + ' GB/s':>12} {'of memcpy':>9} |" for isa in isas))
    by_kernel = {}
    for r in kernels:
        by_kernel.setdefault((r["op"], r["from"], r["to"], r["counted"]), {})[r["isa"]] = r
    for (op, src, dst, counted), per_isa in by_kernel.items():
        cells = ""
        for isa in isas:
            r = per_isa.get(isa)
            cells += f" {r['gb_per_s']:>12.2f} {r['of_memcpy']:>8.0%} |" if r else f" {'-':>12} {'-':>9} |"
        print(f"{op + ' ' + src + '->' + dst:<26} {counted:>6} |" + cells)
    sweep = [r for r in rows if r["bench"] == "quant_block"]
    if not sweep:
        return
    print(f"\nQuantization block size ({sweep[0]['isa']}, 1 thread, Gaussian data): throughput (GB/s of fp32) "
          f"and the rms round-trip error relative to the rms value")
    print(f"{'bits':<5} {'block':>6} {'bytes/elem':>10} | {'quantize':>9} {'of memcpy':>9} | {'dequantize':>10} | "
          f"{'rms rel error':>13}")
    for r in sweep:
        print(f"{r['bits']:<5} {r['block']:>6} {r['bytes_per_element']:>10.4f} | {r['quantize_gb_per_s']:>9.2f} "
              f"{r['quantize_of_memcpy']:>8.0%} | {r['dequantize_gb_per_s']:>10.2f} | {r['rms_rel_error']:>13.5f}")


def print_ratio_summary(ratios, bound, what):
    worst = max(ratios, key=lambda x: abs(x - 1))
    print(f"worst ratio {worst:.3f}; {sum(abs(x - 1) <= bound for x in ratios)} of {len(ratios)} {what} within "
          f"{bound:.0%}")


def simulate(rows):
    runs = [r for r in rows if r["bench"] == "simulate"]
    if not runs:
        return
    first = runs[0]
    print(f"\nSimulated against measured, {first['model']}: {first['world_size']} ranks x 1 thread, virtual topology "
          f"{first['topology']}, {first['weight_dtype']}, {first['batch_per_rank']} x {first['seq_len']} tokens per "
          f"rank per micro-batch, {first['grad_accum']} micro-batches per step; the simulator replays each run's own "
          f"schedule on the cluster file {first['cluster']} (strata calibrate, efficiency fitted on ddp)")
    width = max(len(r["plan"]) for r in runs)
    print(f"{'plan':<{width}} {'measured ms':>12} {'simulated ms':>13} {'sim/measured':>13} {'within 20%':>11}")
    ratios = []
    for r in runs:
        ratio = r["simulated_ms"] / r["median_ms"]
        ratios.append(ratio)
        print(f"{r['plan']:<{width}} {r['median_ms']:>12.1f} {r['simulated_ms']:>13.1f} {ratio:>13.3f} "
              f"{'yes' if abs(ratio - 1) <= 0.2 else 'NO':>11}")
    print_ratio_summary(ratios, 0.2, "plans")


def generalise(rows):
    runs = [r for r in rows if r["bench"] == "generalise"]
    if not runs:
        return
    print("\nSimulated against measured where the calibration never ran: calibrated once per rank count (small, "
          "1 x 64, plan ddp, 2 micro-batches, inline), then other models, shapes, accumulations and plans, with "
          "--overlap off and auto (the default; the mode it chose is the simulator's); fp32, 1 thread per rank")
    print(f"{'ranks':>5} {'model':<6} {'B x T':>7} {'accum':>5} {'overlap':>7} {'plan':<6} | {'measured ms':>11} "
          f"{'simulated':>9} {'sim/meas':>8} {'within 20%':>10}  mode")
    ratios = {}
    for r in runs:
        ratio = r["simulated_ms"] / r["median_ms"]
        ratios.setdefault(str(r["overlap"]), []).append(ratio)
        print(f"{r['world_size']:>5} {r['model']:<6} {str(r['batch_per_rank']) + ' x ' + str(r['seq_len']):>7} "
              f"{r['grad_accum']:>5} {str(r['overlap']):>7} {r['plan']:<6} | {r['median_ms']:>11.1f} "
              f"{r['simulated_ms']:>9.1f} {ratio:>8.3f} {'yes' if abs(ratio - 1) <= 0.2 else 'NO':>10}  "
              f"{r.get('overlap_mode', '').split(':')[0].split(' (')[0]}")
    for mode, rs in ratios.items():
        print_ratio_summary(rs, 0.2, f"runs with --overlap {mode}")


RATE_BITS = {"gbit": 1e9, "mbit": 1e6, "kbit": 1e3}


def rate_bits(rate):
    for unit, scale in RATE_BITS.items():
        if rate.endswith(unit):
            return float(rate[: -len(unit)]) * scale
    raise ValueError(f"not a tc rate: {rate}")


def cluster(rows, plot_prefix):
    runs = [r for r in rows if r["bench"] == "cluster"]
    if not runs:
        return
    first = runs[0]
    rates = sorted({r["link_rate"] for r in runs}, key=rate_bits, reverse=True)
    plans = list(dict.fromkeys(r["plan"] for r in runs))
    by = {(r["link_rate"], r["plan"]): r for r in runs}
    print(f"\nVirtual cluster (scripts/cluster): 2 hosts x {first['world_size'] // 2} ranks over TCP, topology "
          f"{first['topology']}, {first['model']}, {first['weight_dtype']}, {first['batch_per_rank']} x "
          f"{first['seq_len']} tokens per rank per micro-batch, {first['grad_accum']} micro-batches per step; each "
          f"host's link shaped with tc tbf. Simulated: the run's own schedule replayed on the cluster file strata "
          f"calibrate wrote on the virtual cluster at that rate (device fitted at {rates[0]}, links measured at each rate)")
    width = max(len(p) for p in plans)
    print(f"{'link':>8} {'plan':<{width}} {'measured ms':>12} {'vs zero3':>9} {'link MB/step':>13} "
          f"{'simulated ms':>13} {'sim/measured':>13} {'within 25%':>11}")
    ratios = []
    for rate in rates:
        base = by.get((rate, "zero3"))
        for plan in plans:
            r = by.get((rate, plan))
            if not r:
                continue
            outer = r["traffic"][-1]
            link = (outer.get("measured_step_micro_sent", 0) + outer.get("measured_step_boundary_sent", 0)) * (
                r["world_size"] // 2) / 1e6
            speedup = f"{base['median_ms'] / r['median_ms']:>8.2f}x" if base else f"{'-':>9}"
            ratio = r["simulated_ms"] / r["median_ms"]
            ratios.append(ratio)
            print(f"{rate:>8} {plan:<{width}} {r['median_ms']:>12.1f} {speedup} {link:>13.2f} {r['simulated_ms']:>13.1f} "
                  f"{ratio:>13.3f} {'yes' if abs(ratio - 1) <= 0.25 else 'NO':>11}")
    print_ratio_summary(ratios, 0.25, "runs")
    if not plot_prefix:
        return
    data = plot_prefix + ".dat"
    with open(data, "w") as f:
        f.write("# link_Mbit_per_s " + " ".join(f"measured:{p} simulated:{p}" for p in plans) + "\n")
        for rate in sorted(rates, key=rate_bits):
            cells = []
            for p in plans:
                r = by.get((rate, p))
                cells += [f"{r['median_ms']:.1f}", f"{r['simulated_ms']:.1f}"] if r else ["NaN", "NaN"]
            f.write(f"{rate_bits(rate) / 1e6:g} " + " ".join(cells) + "\n")
    def label(plan):
        return plan.replace(",quant_weights=int8,quant_grads=int4", " int8/int4")
    curves = []
    for i, p in enumerate(plans):
        curves.append(f"'{data}' using 1:{2 + 2 * i} with linespoints lw 2 lc {i + 1} pt 7 title '{label(p)}'")
        curves.append(f"'{data}' using 1:{3 + 2 * i} with linespoints dt 2 lw 1 lc {i + 1} pt 6 notitle")
    script = "\n".join([
        "set termoption noenhanced", "set logscale xy", "set xlabel 'inter-host link, Mbit/s (tc tbf)'",
        "set ylabel 'ms per step'", "set format y '%g'",
        "set title 'Step time against inter-host bandwidth: measured (filled), simulated (open, dashed)'",
        "set key top right", "set grid",
        "plot " + ", ".join(curves)])
    import subprocess
    for term, ext in (("svg size 900,560", "svg"), ("pngcairo size 900,560", "png")):
        subprocess.run(["gnuplot"], input=f"set terminal {term}\nset output '{plot_prefix}.{ext}'\n{script}\n",
                       text=True, check=True)
    print(f"plot: {plot_prefix}.svg and {plot_prefix}.png (data {data})")


def cluster_overlap(rows):
    runs = [r for r in rows if r["bench"] == "cluster_overlap"]
    if not runs:
        return
    first = runs[0]
    print(f"\nVirtual cluster with overlap on: 2 hosts x {first['world_size'] // 2} ranks over TCP, "
          f"{first['topology']}, {first['model']}, {first['weight_dtype']}, {first['batch_per_rank']} x "
          f"{first['seq_len']} per rank per micro-batch, {first['grad_accum']} micro-batches; the communication thread "
          f"forced on; the step boundary overlapped (on) or not (off); exposed = compute waiting on collectives, "
          f"rank 0; simulated on that rate's calibrated cluster file")
    print(f"{'link':<8} {'plan':<16} {'boundary':>8} | {'ms/step':>8} {'exposed':>8} {'vs zero3':>8} | {'sim ms':>8} "
          f"{'sim exp':>8} {'sim/meas':>8}")
    ratios = []
    for rate in sorted({r["link_rate"] for r in runs}, key=rate_bits, reverse=True):
        for bo in (True, False):
            group = [r for r in runs if r["link_rate"] == rate and bool(r["boundary_overlap"]) == bo]
            base = next((r for r in group if r["plan"] == "zero3"), None)
            for r in group:
                ratio = r["simulated_ms"] / r["median_ms"]
                ratios.append(ratio)
                name = r["plan"].replace(",quant_weights=int8,quant_grads=int4", " int8/int4")
                speed = f"{base['median_ms'] / r['median_ms']:>7.2f}x" if base else f"{'':>8}"
                print(f"{rate:<8} {name:<16} {'on' if bo else 'off':>8} | {r['median_ms']:>8.1f} {r['exposed_ms']:>8.1f} "
                      f"{speed} | {r['simulated_ms']:>8.1f} {r['simulated_exposed_ms']:>8.1f} {ratio:>8.3f}")
    print_ratio_summary(ratios, 0.25, "runs")


def frontier(path):
    """The Frontier tables of `strata simulate` (one per accumulation, both engine profiles) summed up:
    TFLOP/s per GCD at 48 nodes, the ratios hier3/zeropp and zeropp/zero3, and each plan's scaling
    efficiency from the smallest node count where it fits to the largest."""
    import os
    if not path or not os.path.exists(path):
        return
    rows = []
    for line in open(path):
        f = line.split()
        if len(f) == 12 and f[0] in ("strata", "deepspeed") and f[2].isdigit():
            rows.append({"engine": f[0], "plan": f[1], "nodes": int(f[2]), "accum": int(f[4]),
                         "tflops": float(f[8]), "fits": f[11] == "yes"})
    if not rows:
        return
    short = {"hier3,quant_weights=int8,quant_grads=int4": "hier3 q"}
    plans = list(dict.fromkeys(r["plan"] for r in rows))
    top = max(r["nodes"] for r in rows)
    print(f"\nFrontier (simulated, gpt-20b, micro-batch 1, bf16, activation checkpointing): TFLOP/s per GCD at {top} "
          f"nodes, and scaling efficiency from the smallest node count where the plan fits to {top} nodes")
    print(f"{'engine':<9} {'accum':>5} | " + " ".join(f"{short.get(p, p):>9}" for p in plans) +
          f" | {'hier3q/zeropp':>13} {'zeropp/zero3':>12} | " + " ".join(f"{'scal ' + short.get(p, p):>12}" for p in plans))
    for engine in ("strata", "deepspeed"):
        for accum in sorted({r["accum"] for r in rows}):
            at = {p: next((r for r in rows if (r["engine"], r["accum"], r["plan"], r["nodes"]) == (engine, accum, p, top)), None)
                  for p in plans}
            if not any(at.values()):
                continue
            scaling = {}
            for p in plans:
                fit = sorted((r for r in rows if (r["engine"], r["accum"], r["plan"]) == (engine, accum, p) and r["fits"]),
                             key=lambda r: r["nodes"])
                scaling[p] = fit[-1]["tflops"] / fit[0]["tflops"] if fit and fit[-1]["nodes"] == top else float("nan")
            t = {p: at[p]["tflops"] if at[p] else float("nan") for p in plans}
            hq = t.get("hier3,quant_weights=int8,quant_grads=int4", float("nan"))
            print(f"{engine:<9} {accum:>5} | " + " ".join(f"{t[p]:>9.1f}" for p in plans) +
                  f" | {hq / t.get('zeropp', float('nan')):>13.2f} {t.get('zeropp', float('nan')) / t.get('zero3', float('nan')):>12.2f} | "
                  + " ".join(f"{scaling[p]:>12.2f}" for p in plans))


def quality(rows):
    runs = [r for r in rows if r["bench"] == "quality"]
    if not runs:
        return
    print("\nbf16 compute against fp32: final validation loss after 300 steps (B=8, T=64, built-in corpus)")
    print(f"{'model':<8} {'seed':>5} | {'fp32':>7} {'bf16':>7} | {'bf16/fp32 - 1':>13}")
    means = {}
    for model, seed in dict.fromkeys((r["model"], r["seed"]) for r in runs):
        loss = {r["compute_dtype"]: r["val_loss"] for r in runs if (r["model"], r["seed"]) == (model, seed)}
        if "fp32" not in loss or "bf16" not in loss:
            continue
        for dtype in ("fp32", "bf16"):
            means.setdefault(model, {}).setdefault(dtype, []).append(loss[dtype])
        print(f"{model:<8} {seed:>5} | {loss['fp32']:>7.4f} {loss['bf16']:>7.4f} | "
              f"{loss['bf16'] / loss['fp32'] - 1:>+13.2%}")
    for model, m in means.items():
        fp32, bf16 = (sum(m[d]) / len(m[d]) for d in ("fp32", "bf16"))
        print(f"{model:<8} {'mean':>5} | {fp32:>7.4f} {bf16:>7.4f} | {bf16 / fp32 - 1:>+13.2%}  (goal: within 1%)")


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    single_process(rows)
    attention(rows)
    beside(rows)
    quant(rows)
    plans(rows)
    overlap(rows)
    overlap_presets(rows)
    simulate(rows)
    generalise(rows)
    cluster(rows, sys.argv[2] if len(sys.argv) > 2 else "")
    cluster_overlap(rows)
    quality(rows)
    frontier(sys.argv[3] if len(sys.argv) > 3 else "")


if __name__ == "__main__":
    main()

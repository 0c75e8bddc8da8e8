"""The PyTorch peer for scripts/bench: the same GPT-2 (tests/reference/gpt_reference.py's torch.nn
model), the same batch shape, fp32, AdamW, the same thread count; prints one JSON line with the
median time of a full training step (forward, backward, optimizer).

Run with Debian's /usr/bin/python3 and LD_LIBRARY_PATH pointing at OpenBLAS's OpenMP build
(Debian's torch does its fp32 matmuls through libblas.so.3).
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from gpt_reference import Gpt  # noqa: E402

PRESETS = {  # L, C, heads, vocab, context (as src/model/gpt_config.cpp)
    "tiny": (2, 64, 4, 256, 64),
    "small": (4, 256, 4, 8192, 128),
    "gpt2-124m": (12, 768, 12, 50257, 1024),
}


def main():
    parser = argparse.ArgumentParser(description="PyTorch training-step benchmark")
    parser.add_argument("--model", default="tiny", choices=sorted(PRESETS))
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--compute-dtype", default="fp32", choices=["fp32", "bf16"])
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    layers, c, heads, vocab, context = PRESETS[args.model]
    model = Gpt(layers, c, heads, vocab, context)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
    times = []
    for step in range(args.warmup + args.steps):
        tokens = torch.randint(0, vocab, (args.batch, args.seq_len + 1))
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.compute_dtype == "bf16"):
            _, loss = model(tokens[:, :-1], tokens[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    median = statistics.median(times)
    print(json.dumps({"bench": "torch_step", "model": args.model, "batch": args.batch, "seq_len": args.seq_len,
                      "threads": torch.get_num_threads(), "compute_dtype": args.compute_dtype, "torch": torch.__version__, "median_ms": median * 1e3,
                      "tokens_per_s": args.batch * args.seq_len / median, "steps": args.steps}))


if __name__ == "__main__":
    main()

"""Greedy decoding with the PyTorch reference model (tests/reference/gpt_reference.py) from the
weights `strata export` wrote, recomputing the whole context for every token: the independent
check of `strata sample --top-k 1`. Prints the prompt's and the generated token ids, each followed
by a space, then a newline (as `strata sample --ids` does).
usage: greedy_reference.py MODEL.safetensors --prompt TEXT --tokens N
"""
import argparse

import torch

from gpt_reference import Gpt
from safetensors_check import read_safetensors


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--tokens", type=int, required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    tensors, meta = read_safetensors(args.model)
    model = Gpt(int(meta["n_layer"]), int(meta["n_embd"]), int(meta["n_head"]), int(meta["vocab_size"]),
                int(meta["context_length"]))
    model.load_state_dict({name.removeprefix("transformer."): torch.from_numpy(v.copy()) for name, v in tensors.items()})
    ids = list(args.prompt.encode("utf-8"))
    with torch.no_grad():
        for _ in range(args.tokens):
            context = torch.tensor([ids], dtype=torch.int64)
            logits, _ = model(context, context)
            ids.append(int(torch.argmax(logits[0, -1])))
    print("".join(f"{t} " for t in ids))


if __name__ == "__main__":
    main()

"""Loads a safetensors file written by `strata export` into the PyTorch reference model and
compares its logits with Strata's for the same tokens.

The header is parsed here from the format's definition (8-byte little-endian length, a JSON
header of dtype, shape and byte offsets, raw little-endian data), not with a safetensors library,
so the check is of the bytes. Exits non-zero with a sentence on any mismatch.
usage: safetensors_check.py MODEL.safetensors STRATA_LOGITS.archive
"""
import json
import struct
import sys

import numpy as np
import torch

import tensor_archive
from gpt_reference import Gpt


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8 : 8 + length])
    meta = header.pop("__metadata__", {})
    base = 8 + length
    tensors = {}
    for name, t in header.items():
        assert t["dtype"] == "F32", f"{name}: dtype {t['dtype']}"
        begin, end = t["data_offsets"]
        values = np.frombuffer(data[base + begin : base + end], dtype="<f4")
        tensors[name] = values.reshape(t["shape"])
    return tensors, meta


def main():
    tensors, meta = read_safetensors(sys.argv[1])
    strata = tensor_archive.read(sys.argv[2])
    layers, c, heads = int(meta["n_layer"]), int(meta["n_embd"]), int(meta["n_head"])
    vocab, context = int(meta["vocab_size"]), int(meta["context_length"])
    model = Gpt(layers, c, heads, vocab, context)
    state = {name.removeprefix("transformer."): torch.from_numpy(v.copy()) for name, v in tensors.items()}
    missing = set(model.state_dict()) - set(state)
    extra = set(state) - set(model.state_dict())
    if missing or extra:
        sys.exit(f"FAIL: tensor names differ: missing {sorted(missing)}, unexpected {sorted(extra)}")
    model.load_state_dict(state)
    tokens = torch.from_numpy(strata["tokens"].astype(np.int64))
    with torch.no_grad():
        logits, _ = model(tokens, tokens)
    ours = logits.reshape(-1, vocab).numpy()
    theirs = strata["logits"]
    err = float(np.abs(ours - theirs).max() / np.abs(ours).max())
    if err > 1e-4:
        sys.exit(f"FAIL: logits differ from PyTorch's by {err:.2e} of their scale")
    print(f"ok: {len(tensors)} tensors; logits match PyTorch within {err:.1e} of their scale")


if __name__ == "__main__":
    main()

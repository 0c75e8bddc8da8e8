"""Writes the safetensors files --init-from is tested on, from a randomised PyTorch reference
model (gpt_reference.Gpt, nn.Linear weights), in the layouts found in the wild, plus the model's
logits for a fixed batch (a Strata tensor archive). The files are written here from the format's
definition (8-byte little-endian header length, JSON header, raw little-endian data), not with a
safetensors library, so the reader is checked against the bytes.

  hf/model.safetensors      Hugging Face GPT2Model: no prefix, Conv1D weights (in, out), the
                            attn.bias mask and attn.masked_bias buffers; n_head in hf/config.json
  hf-lm/model.safetensors   GPT2LMHeadModel: "transformer." prefix, lm_head.weight equal to the
                            token table, BF16 weights (the logits file has their fp32 values'
                            logits too); n_head in hf-lm/config.json
  nanogpt.safetensors       nanoGPT: "transformer." prefix, Linear weights (out, in), n_head in
                            the metadata, as `strata export` writes
  untied.safetensors        an lm_head.weight that is not the token table
  wrong-shape.safetensors   h.1.mlp.c_fc.weight one column short
  extra.safetensors         a tensor no GPT-2 has (h.0.mlp.c_gate.weight)
  logits.archive            tokens, logits (fp32 weights) and logits_bf16 (the BF16 file's weights)

usage: pretrained_files.py OUT_DIR
"""
import json
import os
import struct
import sys

import numpy as np
import torch

import tensor_archive
from gpt_reference import Gpt, randomise

LAYERS, C, HEADS, VOCAB, CONTEXT = 2, 48, 6, 203, 32  # a width GPT-2 never had: n_head must be read
CONV1D = (".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight")


def bf16_bytes(a):
    """fp32 -> bf16 by rounding to nearest even, as raw little-endian uint16."""
    bits = np.ascontiguousarray(a, dtype="<f4").view("<u4").astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")
    return rounded.tobytes()


def from_bf16(a):
    return np.frombuffer(bf16_bytes(a), dtype="<u2").astype(np.uint32).__lshift__(16).view(np.float32).reshape(a.shape)


def write(path, tensors, metadata, dtype="F32"):
    """tensors: list of (name, numpy array); every array written in `dtype` (F32 or BF16)."""
    header, blobs, offset = {}, [], 0
    for name, a in tensors:
        raw = bf16_bytes(a) if dtype == "BF16" else np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def hugging_face(state, prefix, with_buffers):
    out = []
    for name, a in state.items():
        out.append((prefix + name, a.T.copy() if name.endswith(CONV1D) else a))
    if with_buffers:
        for layer in range(LAYERS):
            mask = np.tril(np.ones((CONTEXT, CONTEXT), dtype=np.float32)).reshape(1, 1, CONTEXT, CONTEXT)
            out.append((f"{prefix}h.{layer}.attn.bias", mask))
            out.append((f"{prefix}h.{layer}.attn.masked_bias", np.array(-1e4, dtype=np.float32)))
    return out


def logits_of(model, state, tokens):
    model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in state.items()})
    with torch.no_grad():
        logits, _ = model(tokens, tokens)
    return logits.reshape(-1, VOCAB).numpy().astype(np.float32)


def main():
    out = sys.argv[1]
    os.makedirs(os.path.join(out, "hf"), exist_ok=True)
    os.makedirs(os.path.join(out, "hf-lm"), exist_ok=True)
    torch.manual_seed(0)
    model = Gpt(LAYERS, C, HEADS, VOCAB, CONTEXT)
    randomise(model, torch.Generator().manual_seed(77))
    state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    config = {"model_type": "gpt2", "n_layer": LAYERS, "n_embd": C, "n_head": HEADS, "vocab_size": VOCAB,
              "n_positions": CONTEXT}
    for d in ("hf", "hf-lm"):
        with open(os.path.join(out, d, "config.json"), "w") as f:
            json.dump(config, f)
    write(os.path.join(out, "hf", "model.safetensors"), hugging_face(state, "", True), {"format": "pt"})
    lm = hugging_face(state, "transformer.", True) + [("lm_head.weight", state["wte.weight"])]
    write(os.path.join(out, "hf-lm", "model.safetensors"), lm, {"format": "pt"}, dtype="BF16")
    meta = {"format": "pt", "n_layer": str(LAYERS), "n_embd": str(C), "n_head": str(HEADS),
            "vocab_size": str(VOCAB), "context_length": str(CONTEXT)}
    nano = [("transformer." + k, v) for k, v in state.items()]
    write(os.path.join(out, "nanogpt.safetensors"), nano, meta)
    untied = nano + [("lm_head.weight", state["wte.weight"] * 1.5)]
    write(os.path.join(out, "untied.safetensors"), untied, meta)
    wrong = [(k, v[:, :-1].copy() if k.endswith("h.1.mlp.c_fc.weight") else v) for k, v in nano]
    write(os.path.join(out, "wrong-shape.safetensors"), wrong, meta)
    extra = nano + [("transformer.h.0.mlp.c_gate.weight", state["h.0.mlp.c_fc.weight"])]
    write(os.path.join(out, "extra.safetensors"), extra, meta)

    tokens = torch.tensor([[(i * 37 + 11 + 5 * b) % VOCAB for i in range(CONTEXT)] for b in range(2)],
                          dtype=torch.int64)
    rounded = {k: from_bf16(v) for k, v in state.items()}
    tensor_archive.write(os.path.join(out, "logits.archive"), {
        "tokens": tokens.numpy().astype(np.int32),
        "logits": logits_of(model, state, tokens),
        "logits_bf16": logits_of(model, rounded, tokens),
    })


if __name__ == "__main__":
    main()

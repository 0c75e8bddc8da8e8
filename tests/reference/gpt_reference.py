"""Independent PyTorch reference for Strata's GPT-2: builds the model with torch.nn and autograd,
and writes one case file (a Strata tensor archive) per configuration holding the weights, the
batches, the loss, logits and every parameter gradient of one micro-batch (in fp32, and under
with bf16 products, as torch.autocast specifies them), and the losses and
final weights of 5 AdamW steps with gradient accumulation, clipping, weight-decay groups and the
warmup + cosine schedule. The C++ test tests/unit/test_gpt_vs_torch.cpp loads these files.

Run with Debian's system python3 (python3-torch): /usr/bin/python3 gpt_reference.py --out-dir DIR
"""
import argparse
import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import tensor_archive

# name, L, C, heads, vocab, context, vocab_pad, batch, seq_len, grad_accum
CASES = [
    ("small-aligned", 2, 64, 4, 256, 64, 128, 3, 32, 2),
    ("odd-shapes", 2, 72, 3, 300, 48, 128, 2, 37, 2),
]
STEPS = 5
LR, WARMUP, MIN_LR_RATIO = 3e-3, 2, 0.1
BETA1, BETA2, EPS, WEIGHT_DECAY = 0.9, 0.95, 1e-8, 0.1


# The bf16 pass: every product (the linear layers, attention's two, the tied head) takes its inputs
# rounded to bf16 and rounds its output, as torch.autocast("cpu", bfloat16) specifies, but computes
# in fp32 on the rounded values. autocast itself does not do that on every CPU: PyTorch 1.13's bf16
# products go to oneDNN where the CPU has AVX-512, and elsewhere (AVX2) to ATen's own bf16 loops,
# which round partial sums too (measured 4-8e-2 of max|grad| from Strata, against 1.1-1.3e-2 with
# oneDNN). Written out, the reference is the same on every CPU up to fp32 reassociation.
BF16 = False


def bf16_round(x):
    return x.bfloat16().float()


def product(a, b):
    return bf16_round(bf16_round(a) @ bf16_round(b)) if BF16 else a @ b


def linear(layer, x):
    if not BF16:
        return layer(x)
    return bf16_round(bf16_round(x) @ bf16_round(layer.weight).T + bf16_round(layer.bias))


class Attention(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(c, 3 * c)
        self.c_proj = nn.Linear(c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = linear(self.c_attn, x).split(c, dim=2)
        hs = c // self.heads
        q, k, v = (z.view(b, t, self.heads, hs).transpose(1, 2) for z in (q, k, v))
        att = product(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = product(att, v).transpose(1, 2).contiguous().view(b, t, c)
        return linear(self.c_proj, y)


class Mlp(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c, 4 * c)
        self.c_proj = nn.Linear(4 * c, c)

    def forward(self, x):
        return linear(self.c_proj, F.gelu(linear(self.c_fc, x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c)
        self.attn = Attention(c, heads)
        self.ln_2 = nn.LayerNorm(c)
        self.mlp = Mlp(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    def __init__(self, layers, c, heads, vocab, context):
        super().__init__()
        self.wte = nn.Embedding(vocab, c)
        self.wpe = nn.Embedding(context, c)
        self.h = nn.ModuleList([Block(c, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(c)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t))
        for block in self.h:
            x = block(x)
        logits = product(self.ln_f(x), self.wte.weight.T)  # tied LM head
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        return logits, loss


def strata_name(torch_name):
    # torch "h.3.attn.c_attn.weight" -> Strata "h3.attn.c_attn.weight"; embeddings drop ".weight".
    if torch_name in ("wte.weight", "wpe.weight"):
        return torch_name.split(".")[0]
    if torch_name.startswith("h."):
        _, layer, rest = torch_name.split(".", 2)
        return f"h{layer}.{rest}"
    return torch_name


def randomise(model, generator):
    # Random norms and biases too, so no gradient is trivially structured.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=generator))
            elif p.dim() == 1:
                p.copy_(0.05 * torch.randn(p.shape, generator=generator))
            else:
                p.copy_(0.05 * torch.randn(p.shape, generator=generator))


def lr_at(step, total):
    if step < WARMUP:
        return LR * (step + 1) / WARMUP
    min_lr = LR * MIN_LR_RATIO
    progress = min(1.0, max(0.0, (step - WARMUP) / max(1, total - WARMUP)))
    return min_lr + 0.5 * (LR - min_lr) * (1.0 + math.cos(math.pi * progress))


def build_case(case, out_dir):
    name, layers, c, heads, vocab, context, vocab_pad, batch, seq_len, accum = case
    generator = torch.Generator().manual_seed(1234 + layers * 7 + c)
    model = Gpt(layers, c, heads, vocab, context)
    randomise(model, generator)
    tokens = torch.randint(0, vocab, (STEPS * accum, batch, seq_len + 1), generator=generator)
    inputs, targets = tokens[:, :, :-1].contiguous(), tokens[:, :, 1:].contiguous()

    out = {}
    for key, value in dict(n_layer=layers, n_embd=c, n_head=heads, vocab_size=vocab, context_length=context,
                           vocab_pad_multiple=vocab_pad, batch=batch, seq_len=seq_len, grad_accum=accum, steps=STEPS,
                           lr=LR, warmup_steps=WARMUP, min_lr_ratio=MIN_LR_RATIO, beta1=BETA1, beta2=BETA2, eps=EPS,
                           weight_decay=WEIGHT_DECAY).items():
        out[f"config.{key}"] = np.array(value, dtype=np.float64)
    for pname, p in model.named_parameters():
        out[f"init.{strata_name(pname)}"] = p.detach().numpy().copy()
    out["inputs"] = inputs.numpy().astype(np.int32)
    out["targets"] = targets.numpy().astype(np.int32)

    # One micro-batch: loss, logits, every gradient.
    logits, loss = model(inputs[0], targets[0])
    loss.backward()
    out["loss"] = np.array(loss.item(), dtype=np.float64)
    out["logits"] = logits.detach().numpy().copy()
    for pname, p in model.named_parameters():
        out[f"grad.{strata_name(pname)}"] = p.grad.numpy().copy()
    model.zero_grad(set_to_none=True)

    # The same micro-batch with bf16 products (inputs in bf16, as Strata's --compute-dtype bf16;
    # the reference also rounds each product's output to bf16, as autocast does and Strata does not).
    global BF16
    BF16 = True
    logits, loss = model(inputs[0], targets[0])
    BF16 = False
    loss.float().backward()
    out["bf16.loss"] = np.array(loss.item(), dtype=np.float64)
    out["bf16.logits"] = logits.detach().float().numpy().copy()
    for pname, p in model.named_parameters():
        out[f"bf16.grad.{strata_name(pname)}"] = p.grad.float().numpy().copy()
    model.zero_grad(set_to_none=True)

    # 5 AdamW steps: accumulation, clipping (max norm below the observed norms, so it acts),
    # decay on matrices and embeddings only.
    clip = 0.5
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=LR, betas=(BETA1, BETA2), eps=EPS, foreach=False)
    step_losses, step_norms = [], []
    for step in range(STEPS):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, STEPS)
        total = 0.0
        for micro in range(accum):
            k = step * accum + micro
            _, loss = model(inputs[k], targets[k])
            (loss / accum).backward()
            total += loss.item() / accum
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        step_losses.append(total)
        step_norms.append(norm.item())
    out["config.grad_clip"] = np.array(clip, dtype=np.float64)
    out["step_losses"] = np.array(step_losses, dtype=np.float64)
    out["step_grad_norms"] = np.array(step_norms, dtype=np.float64)
    for pname, p in model.named_parameters():
        out[f"final.{strata_name(pname)}"] = p.detach().numpy().copy()

    path = os.path.join(out_dir, f"{name}.stt")
    tensor_archive.write(path, out)
    print(f"wrote {path}: loss {out['loss']:.6f}, step losses {', '.join(f'{x:.5f}' for x in step_losses)}")


# Attention cases for tests/unit/test_attention.cpp: batch, seq_len, channels, heads. Lengths not a
# multiple of the fused kernel's 64-query tile, past its 256-key chunk, T = 1, heads of 16-128.
ATTENTION_CASES = [(1, 1, 64, 4), (2, 77, 128, 2), (1, 300, 256, 2), (3, 130, 96, 3)]


def build_attention_case(batch, seq_len, channels, heads, out_dir):
    """Causal attention over a fused qkv (B, T, 3C) by PyTorch autograd in float64 (softmax of
    the masked scaled scores times v; Debian's torch 1.13 predates scaled_dot_product_attention),
    with the gradient of qkv for a random output gradient."""
    gen = torch.Generator().manual_seed(1000 + seq_len)
    qkv = torch.randn(batch, seq_len, 3 * channels, generator=gen, dtype=torch.float64)
    dout = torch.randn(batch, seq_len, channels, generator=gen, dtype=torch.float64)
    x = qkv.clone().requires_grad_(True)
    q, k, v = x.split(channels, dim=2)
    hs = channels // heads
    q, k, v = (y.view(batch, seq_len, heads, hs).transpose(1, 2) for y in (q, k, v))
    mask = torch.tril(torch.ones(seq_len, seq_len, dtype=torch.bool))
    att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
    y = att.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v
    out = y.transpose(1, 2).reshape(batch, seq_len, channels)
    out.backward(dout)
    tensors = {
        "shape": np.array([batch, seq_len, channels, heads], dtype=np.int32),
        "qkv": qkv.float().numpy(),
        "dout": dout.float().numpy(),
        "out": out.detach().float().numpy(),
        "dqkv": x.grad.float().numpy(),
    }
    path = os.path.join(out_dir, f"attention-{batch}x{seq_len}x{channels}x{heads}.stt")
    tensor_archive.write(path, tensors)
    print(f"wrote {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out-dir", required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    os.makedirs(args.out_dir, exist_ok=True)
    for case in CASES:
        build_case(case, args.out_dir)
    for case in ATTENTION_CASES:
        build_attention_case(*case, args.out_dir)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The PyTorch side of scripts/bench.sh: GPT-2 training steps on the CPU.

    torch_gpt2.py --batch B --seq T [--vocab V --dim C --layers L --heads H
                  --steps S --warmup W --threads N --device cpu|cuda]

A faithful GPT-2 (the shapes of configs/gpt2_124m.yaml): learned token and
position embeddings, pre-LayerNorm blocks of causal self-attention (one
c_attn projection to q, k, v, with biases) and a GELU (tanh) MLP of 4·dim,
a final LayerNorm and the head tied to the token embedding; fp32; AdamW
(lr 6e-4, betas 0.9/0.95, weight decay 0.1 on matrices and embeddings) and
gradient clipping at 1.0, as the recipe. Tokens are random ids below the
vocabulary. Prints two lines: tokens/s over the steps after the warm-up
(forward, backward, clip, optimizer step) and the parameter count, then
the tokens/s of the fastest of those steps (other work on a shared
machine only ever slows a step); the caller measures peak resident
memory around the process.
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(dim, eps=1e-5)
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.attn_proj = nn.Linear(dim, dim)
        self.ln_2 = nn.LayerNorm(dim, eps=1e-5)
        self.c_fc = nn.Linear(dim, 4 * dim)
        self.mlp_proj = nn.Linear(4 * dim, dim)

    def forward(self, x, mask):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.heads))
        att = F.softmax(att.masked_fill(mask[:T, :T], float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.attn_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, vocab, dim, layers, heads, max_seq):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(max_seq, dim)
        self.h = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim, eps=1e-5)
        self.register_buffer("mask", torch.triu(torch.ones(max_seq, max_seq, dtype=torch.bool), 1))
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for block in self.h:
            x = block(x, self.mask)
        logits = self.ln_f(x) @ self.wte.weight.t()  # the head tied to wte
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="cuda: on the GPU, fp32 with TF32 off (scripts/gpu_check.sh)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    model = GPT2(a.vocab, a.dim, a.layers, a.heads, a.seq).to(a.device)
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8)
    tokens = torch.randint(0, a.vocab, (a.warmup + a.steps, a.batch, a.seq + 1)).to(a.device)
    sync = torch.cuda.synchronize if a.device.startswith("cuda") else (lambda: None)
    elapsed, fastest = 0.0, float("inf")
    for step in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(tokens[step, :, :-1], tokens[step, :, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sync()
        if step >= a.warmup:
            elapsed += time.perf_counter() - t0
            fastest = min(fastest, time.perf_counter() - t0)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"torch tokens/s {a.batch * a.seq * a.steps / elapsed:.2f} params {n_params} loss {loss.item():.4f}")
    print(f"torch fastest step tokens/s {a.batch * a.seq / fastest:.2f}")


if __name__ == "__main__":
    main()

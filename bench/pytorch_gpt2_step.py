#!/usr/bin/python3
"""The PyTorch reference for bench/train_bench: one GPT-2 training step
(forward, backward, global-norm clip, AdamW) on random tokens, timed: fp32, or
with PRECISION bf16 the forward under torch.autocast("cpu", dtype=torch.bfloat16)
(PyTorch's CPU mixed precision: bf16 matmuls, fp32 weights and optimizer).
Prints one JSON line: {"tokens_per_s": [...per step...], "median": x, ...}.
Usage: pytorch_gpt2_step.py LAYERS HIDDEN HEADS VOCAB SEQ BATCH STEPS WARMUP THREADS [PRECISION]

make_gpt, make_adamw and train_step are also the GPU reference of
scripts/device_check_torch.py (SDPA attention, autocast on cuda)."""
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def make_gpt(L, C, H, V, T, sdpa=False):
    """GPT-2 (tied embeddings, pre-LayerNorm, tanh GELU). Attention is either
    written out with a causal mask (the CPU reference) or SDPA (flash on GPUs)."""

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(C)
            self.c_attn = nn.Linear(C, 3 * C)
            self.c_proj = nn.Linear(C, C)
            self.ln_2 = nn.LayerNorm(C)
            self.c_fc = nn.Linear(C, 4 * C)
            self.mlp_proj = nn.Linear(4 * C, C)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q = q.view(b, t, H, C // H).transpose(1, 2)
            k = k.view(b, t, H, C // H).transpose(1, 2)
            v = v.view(b, t, H, C // H).transpose(1, 2)
            if sdpa:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // H))
                mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
                y = att.masked_fill(mask, float("-inf")).softmax(dim=-1) @ v
            x = x + self.c_proj(y.transpose(1, 2).reshape(b, t, C))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, C)
            self.wpe = nn.Embedding(T, C)
            self.h = nn.ModuleList([Block() for _ in range(L)])
            self.ln_f = nn.LayerNorm(C)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
            for blk in self.h:
                x = blk(x)
            logits = self.ln_f(x) @ self.wte.weight.T
            return F.cross_entropy(logits.view(-1, V), targets.view(-1))

    return GPT()


def make_adamw(model, fused=False):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    extra = {"fused": True} if fused else {}
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                             lr=3e-4, betas=(0.9, 0.95), eps=1e-8, **extra)


def train_step(model, opt, idx, tgt, bf16):
    """Forward (under autocast to bf16 when asked), backward, clip to 1.0, AdamW."""
    opt.zero_grad(set_to_none=True)
    if bf16:
        with torch.autocast(idx.device.type, dtype=torch.bfloat16):
            loss = model(idx, tgt)
    else:
        loss = model(idx, tgt)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss


def main():
    L, C, H, V, T, B, STEPS, WARMUP, THREADS = map(int, sys.argv[1:10])
    precision = sys.argv[10] if len(sys.argv) > 10 else "fp32"
    torch.set_num_threads(THREADS)
    torch.manual_seed(0)
    model = make_gpt(L, C, H, V, T)
    opt = make_adamw(model)
    rates = []
    for step in range(WARMUP + STEPS):
        idx = torch.randint(0, V, (B, T))
        tgt = torch.randint(0, V, (B, T))
        t0 = time.perf_counter()
        train_step(model, opt, idx, tgt, precision == "bf16")
        dt = time.perf_counter() - t0
        if step >= WARMUP:
            rates.append(B * T / dt)
    print(json.dumps({"tokens_per_s": rates, "median": statistics.median(rates), "torch": torch.__version__,
                      "threads": torch.get_num_threads(), "precision": precision}))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""PyTorch parity for tera's GPT-2 (run with Debian's /usr/bin/python3 + python3-torch).

Reads the dump written by tera_parity_dump, rebuilds the same GPT-2 in PyTorch
in float64 from tera's initial weights, and checks:
  * logits, the mean loss and every parameter gradient of the first global batch
    (relative error <= 1e-4 of the largest reference entry), and
  * the loss, pre-clip gradient norm and learning rate of each training step
    with AdamW, global-norm clipping and warmup + cosine decay (<= 1e-4 relative).
Exits non-zero on any mismatch.
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from safetensors_torch import read_safetensors  # noqa: E402

torch.set_default_dtype(torch.float64)
torch.manual_seed(0)


def gpt2_forward(P, tokens, L, H):
    """tokens [B,T] -> logits [B,T,V]; pre-LN GPT-2 with tied LM head."""
    B, T = tokens.shape
    C = P["wte.weight"].shape[1]
    hs = C // H
    x = P["wte.weight"][tokens.long()] + P["wpe.weight"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(L):
        p = f"h.{l}."
        h = F.layer_norm(x, (C,), P[p + "ln_1.weight"], P[p + "ln_1.bias"], 1e-5)
        qkv = h @ P[p + "attn.c_attn.weight"].T + P[p + "attn.c_attn.bias"]
        q, k, v = qkv.split(C, dim=2)
        q = q.view(B, T, H, hs).transpose(1, 2)
        k = k.view(B, T, H, hs).transpose(1, 2)
        v = v.view(B, T, H, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ P[p + "attn.c_proj.weight"].T + P[p + "attn.c_proj.bias"]
        h = F.layer_norm(x, (C,), P[p + "ln_2.weight"], P[p + "ln_2.bias"], 1e-5)
        h = F.gelu(h @ P[p + "mlp.c_fc.weight"].T + P[p + "mlp.c_fc.bias"], approximate="tanh")
        x = x + h @ P[p + "mlp.c_proj.weight"].T + P[p + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (C,), P["ln_f.weight"], P["ln_f.bias"], 1e-5)
    return x @ P["wte.weight"].T


def lr_at(step, lr, min_lr, warmup, total):
    """The schedule documented in src/optim/lr_schedule.h, written independently."""
    if step < warmup:
        return lr * (step + 1) / warmup
    span = max(1, total - 1 - warmup)
    p = min(1.0, (step - warmup) / span)
    return min_lr + (lr - min_lr) * 0.5 * (1 + math.cos(math.pi * p))


failures = []


def check(name, got, ref, tol=1e-4):
    got = got.double()
    ref = ref.double()
    scale = ref.abs().max().item()
    err = (got - ref).abs().max().item()
    rel = err / scale if scale > 0 else err
    status = "ok" if rel <= tol else "FAIL"
    if status == "FAIL" or VERBOSE:
        print(f"{status:4s} {name:32s} max|err| {err:.3e}  max|ref| {scale:.3e}  rel {rel:.2e}")
    if rel > tol:
        failures.append(name)
    return rel


VERBOSE = "-v" in sys.argv
path = [a for a in sys.argv[1:] if a != "-v"][0]
D, meta = read_safetensors(path)
L, H = int(meta["layers"]), int(meta["heads"])
V, T = int(meta["vocab"]), int(meta["seq_len"])
mb, G, steps = int(meta["micro_batch"]), int(meta["global_batch"]), int(meta["steps"])
hp = {k: float(meta[k]) for k in ["lr", "min_lr", "clip", "weight_decay", "beta1", "beta2", "eps"]}
warmup = int(meta["warmup"])

names = [k[len("param.") :] for k in D if k.startswith("param.")]
P = {n: D["param." + n].double().requires_grad_(True) for n in names}
print(f"parity: {len(names)} tensors, L={L} H={H} C={P['wte.weight'].shape[1]} V={V} T={T} G={G} mb={mb}")

# 1. First global batch: logits (first micro-batch), loss and every gradient.
tok, tgt = D["tokens.0"], D["targets.0"]
logits = gpt2_forward(P, tok, L, H)
check("logits", D["logits"], logits[:mb].detach())
loss = F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1).long())
check("loss", D["loss0"], loss.detach().reshape(1), tol=1e-5)
loss.backward()
for n in names:
    check("grad " + n, D["grad." + n], P[n].grad)

# 2. Training: AdamW (decay on matrices/embeddings only), clipping, LR schedule.
P = {n: D["param." + n].double().requires_grad_(True) for n in names}
decay = [P[n] for n in names if P[n].dim() >= 2]
no_decay = [P[n] for n in names if P[n].dim() < 2]
opt = torch.optim.AdamW(
    [{"params": decay, "weight_decay": hp["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}],
    lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"])
clipped = 0
for s in range(steps):
    lr = lr_at(s, hp["lr"], hp["min_lr"], warmup, steps)
    for g in opt.param_groups:
        g["lr"] = lr
    opt.zero_grad()
    logits = gpt2_forward(P, D[f"tokens.{s}"], L, H)
    loss = F.cross_entropy(logits.reshape(-1, V), D[f"targets.{s}"].reshape(-1).long())
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(list(P.values()), hp["clip"])
    clipped += int(norm.item() > hp["clip"])
    check(f"step {s + 1} loss", D["losses"][s : s + 1], loss.detach().reshape(1))
    check(f"step {s + 1} grad norm", D["grad_norms"][s : s + 1], norm.detach().reshape(1))
    check(f"step {s + 1} lr", D["lrs"][s : s + 1], torch.tensor([lr]), tol=1e-6)
    opt.step()

print(f"parity: {steps} steps, clipping active on {clipped} of them; final loss tera {D['losses'][-1].item():.6f}")
if clipped == 0 or clipped == steps:
    failures.append("clipping must be active on some steps and not others for this test to mean something")
if failures:
    print("parity FAILED: " + ", ".join(failures))
    sys.exit(1)
print("parity OK")

#!/usr/bin/python3
"""Hugging Face export parity (run with Debian's /usr/bin/python3 + python3-torch).

usage: export_parity.py EXPORTED.safetensors TERA_LOGITS.safetensors

Reads the file `tera ckpt export` wrote (Hugging Face GPT-2 names, Conv1D
weights stored (in, out)) and config.json beside it, runs GPT2LMHeadModel's
forward written out in PyTorch (float64) on tera's tokens and compares the
logits with tera's: max |difference| <= 1e-4 * max |tera logit|.
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from safetensors_torch import read_safetensors  # noqa: E402

torch.set_default_dtype(torch.float64)


def gpt2_lm_head_forward(P, cfg, tokens):
    """transformers' GPT2LMHeadModel forward (eval mode), Conv1D: y = x @ W + b."""
    B, T = tokens.shape
    C, H, L = cfg["n_embd"], cfg["n_head"], cfg["n_layer"]
    eps = cfg["layer_norm_epsilon"]
    hs = C // H
    g = lambda n: P["transformer." + n].double()
    x = g("wte.weight")[tokens.long()] + g("wpe.weight")[:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(L):
        p = f"h.{l}."
        h = F.layer_norm(x, (C,), g(p + "ln_1.weight"), g(p + "ln_1.bias"), eps)
        qkv = h @ g(p + "attn.c_attn.weight") + g(p + "attn.c_attn.bias")
        q, k, v = qkv.split(C, dim=2)
        q, k, v = (t.view(B, T, H, hs).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ g(p + "attn.c_proj.weight") + g(p + "attn.c_proj.bias")
        h = F.layer_norm(x, (C,), g(p + "ln_2.weight"), g(p + "ln_2.bias"), eps)
        assert cfg["activation_function"] == "gelu_new"
        h = F.gelu(h @ g(p + "mlp.c_fc.weight") + g(p + "mlp.c_fc.bias"), approximate="tanh")
        x = x + h @ g(p + "mlp.c_proj.weight") + g(p + "mlp.c_proj.bias")
    x = F.layer_norm(x, (C,), g("ln_f.weight"), g("ln_f.bias"), eps)
    assert cfg.get("tie_word_embeddings", True)
    return x @ g("wte.weight").T  # lm_head tied to wte


def main():
    exported, dump = sys.argv[1], sys.argv[2]
    P, _ = read_safetensors(exported)
    cfg = json.load(open(os.path.join(os.path.dirname(os.path.abspath(exported)), "config.json")))
    assert cfg["model_type"] == "gpt2" and cfg["architectures"] == ["GPT2LMHeadModel"], cfg
    expected = {"transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight", "transformer.ln_f.bias"}
    missing = expected - set(P)
    assert not missing, f"missing tensors {missing}"
    C = cfg["n_embd"]
    w = P["transformer.h.0.attn.c_attn.weight"]
    assert list(w.shape) == [C, 3 * C], f"c_attn must be Conv1D (in, out) = [{C}, {3*C}], got {list(w.shape)}"
    D, _ = read_safetensors(dump)
    ref = D["logits"].double()
    got = gpt2_lm_head_forward(P, cfg, D["tokens"])
    err = (got - ref).abs().max().item() / ref.abs().max().item()
    print(f"logits {list(ref.shape)}: max |torch - tera| / max |tera| = {err:.2e} (tolerance 1e-4)")
    sys.exit(0 if err <= 1e-4 else 1)


if __name__ == "__main__":
    main()

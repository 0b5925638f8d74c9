#!/usr/bin/python3
"""Hugging Face export parity (run with Debian's /usr/bin/python3 + python3-torch).

usage: export_parity.py EXPORTED.safetensors|model.safetensors.index.json TERA_LOGITS.safetensors

Reads the file (or the shards of the index) `tera ckpt export` wrote, F32 or
BF16 (widened exactly to float64), and config.json beside it, runs the
forward of the model config.json names, written out in PyTorch (float64), on
tera's tokens and compares the logits with tera's: max |difference| <= 1e-4 *
max |tera logit|. Two families:
  gpt2   GPT2LMHeadModel: Conv1D weights stored (in, out), the head tied to
         wte unless tie_word_embeddings = false (then lm_head.weight);
  llama  LlamaForCausalLM: RMSNorm, rotary embeddings (rotate-half, base
         rope_theta, Llama 3.1's rope_scaling "llama3" as transformers'
         _compute_llama3_parameters), grouped-query attention (query head h reads key/value
         head h // (heads / kv_heads), transformers' repeat_kv), SwiGLU MLP,
         Linear weights (out, in), lm_head.weight unless tie_word_embeddings.
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
    # As transformers reads it: tied unless tie_word_embeddings = false, then its own lm_head.weight.
    tied = cfg.get("tie_word_embeddings", True)
    assert ("lm_head.weight" in P) != tied, "lm_head.weight must be stored iff the head is untied"
    return x @ (g("wte.weight") if tied else P["lm_head.weight"].double()).T


def llama_inv_freq(cfg, hs):
    """transformers' rotary frequencies: the default ones, or with rope_scaling
    {"rope_type": "llama3", ...} _compute_llama3_parameters (float64 here)."""
    inv_freq = 1.0 / cfg["rope_theta"] ** (torch.arange(0, hs, 2, dtype=torch.float64) / hs)
    scaling = cfg.get("rope_scaling")
    if scaling is None:
        return inv_freq
    assert scaling.get("rope_type", scaling.get("type")) == "llama3", scaling
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    low_freq_wavelen, high_freq_wavelen = old / low, old / high
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, inv_freq_llama)


def llama_forward(P, cfg, tokens):
    """transformers' LlamaForCausalLM forward (eval mode, no cache), Linear: y = x @ W.T."""
    B, T = tokens.shape
    C, H, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    KV = cfg.get("num_key_value_heads") or H
    eps = cfg["rms_norm_eps"]
    hs = C // H
    g = lambda n: P[n].double()

    def rms_norm(x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

    inv_freq = llama_inv_freq(cfg, hs)
    ang = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)  # [T, hs/2]
    cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()

    def rope(x):  # x [B, heads, T, hs]
        half = torch.cat([-x[..., hs // 2:], x[..., : hs // 2]], -1)
        return x * cos + half * sin

    x = g("model.embed_tokens.weight")[tokens.long()]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(L):
        p = f"model.layers.{l}."
        h = rms_norm(x, g(p + "input_layernorm.weight"))
        q = (h @ g(p + "self_attn.q_proj.weight").T).view(B, T, H, hs).transpose(1, 2)
        k = (h @ g(p + "self_attn.k_proj.weight").T).view(B, T, KV, hs).transpose(1, 2)
        v = (h @ g(p + "self_attn.v_proj.weight").T).view(B, T, KV, hs).transpose(1, 2)
        q, k = rope(q), rope(k)
        k, v = k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ g(p + "self_attn.o_proj.weight").T
        h = rms_norm(x, g(p + "post_attention_layernorm.weight"))
        assert cfg.get("hidden_act", "silu") == "silu"
        m = F.silu(h @ g(p + "mlp.gate_proj.weight").T) * (h @ g(p + "mlp.up_proj.weight").T)
        x = x + m @ g(p + "mlp.down_proj.weight").T
    x = rms_norm(x, g("model.norm.weight"))
    head = g("model.embed_tokens.weight") if cfg.get("tie_word_embeddings", False) else g("lm_head.weight")
    return x @ head.T


def check_llama(P, cfg):
    assert cfg["architectures"] == ["LlamaForCausalLM"], cfg
    for key in ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "num_hidden_layers",
                "rms_norm_eps", "rope_theta", "vocab_size", "max_position_embeddings", "tie_word_embeddings"):
        assert key in cfg, f"config.json lacks LlamaConfig's {key}"
    C, H, KV = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hs = C // H
    shapes = {"model.layers.0.self_attn.q_proj.weight": [H * hs, C], "model.layers.0.self_attn.k_proj.weight": [KV * hs, C],
              "model.layers.0.mlp.gate_proj.weight": [cfg["intermediate_size"], C], "model.norm.weight": [C]}
    for name, shape in shapes.items():
        assert name in P and list(P[name].shape) == shape, f"{name}: expected {shape}"
    assert ("lm_head.weight" in P) != cfg["tie_word_embeddings"], "lm_head.weight must be stored iff the head is untied"


def main():
    exported, dump = sys.argv[1], sys.argv[2]
    P, _ = read_safetensors(exported)
    cfg = json.load(open(os.path.join(os.path.dirname(os.path.abspath(exported)), "config.json")))
    D, _ = read_safetensors(dump)
    ref = D["logits"].double()
    if cfg["model_type"] == "llama":
        check_llama(P, cfg)
        got = llama_forward(P, cfg, D["tokens"])
        report(ref, got)
    assert cfg["model_type"] == "gpt2" and cfg["architectures"] == ["GPT2LMHeadModel"], cfg
    expected = {"transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight", "transformer.ln_f.bias"}
    missing = expected - set(P)
    assert not missing, f"missing tensors {missing}"
    C = cfg["n_embd"]
    w = P["transformer.h.0.attn.c_attn.weight"]
    assert list(w.shape) == [C, 3 * C], f"c_attn must be Conv1D (in, out) = [{C}, {3*C}], got {list(w.shape)}"
    report(ref, gpt2_lm_head_forward(P, cfg, D["tokens"]))


def report(ref, got):
    err = (got - ref).abs().max().item() / ref.abs().max().item()
    print(f"logits {list(ref.shape)}: max |torch - tera| / max |tera| = {err:.2e} (tolerance 1e-4)")
    sys.exit(0 if err <= 1e-4 else 1)


if __name__ == "__main__":
    main()

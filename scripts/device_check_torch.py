#!/usr/bin/env python3
"""PyTorch on the shapes tera-device-check benchmarks (scripts/device-check):
bf16 linear forward and backward (F.linear, fp32 accumulation in cuBLAS),
LayerNorm forward and backward in fp32, causal SDPA (flash) attention forward
and backward in bf16, and a fused AdamW step, timed with
CUDA events after a warm-up. Then, for each shape of TRAIN_SHAPES (the
environment, set by scripts/device-check for tera's train_bench too:
"name:layers:hidden:heads:batch ...", vocab 50257, seq 1024), bf16 training
steps of the same GPT (bench/pytorch_gpt2_step.py: autocast bf16, SDPA flash
attention, clip, fused AdamW) in eager mode and, while the time budget
(DEADLINE, seconds since the epoch) allows, under torch.compile. Writes one
JSON with the same fields as tera's bench entries."""
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from pytorch_gpt2_step import make_adamw, make_gpt, train_step  # noqa: E402


def time_ms(fn, iters):
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def train_rate(dev, L, C, H, B, compiled, steps, warmup, V=50257, T=1024):
    """Median tokens/s of bf16 training steps of the GPT on random tokens."""
    torch.manual_seed(0)
    model = make_gpt(L, C, H, V, T, sdpa=True).to(dev)
    opt = make_adamw(model, fused=True)
    run = torch.compile(model) if compiled else model
    rates = []
    for step in range(warmup + steps):
        idx = torch.randint(0, V, (B, T), device=dev)
        tgt = torch.randint(0, V, (B, T), device=dev)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        train_step(run, opt, idx, tgt, bf16=True)
        torch.cuda.synchronize()
        if step >= warmup:
            rates.append(B * T / (time.perf_counter() - t0))
    del model, opt, run
    torch.cuda.empty_cache()
    return statistics.median(rates)


def train_steps(dev, out):
    deadline = float(os.environ.get("DEADLINE", time.time() + 600))
    shapes = os.environ.get("TRAIN_SHAPES", "").split()
    out["train"] = []
    for compiled in (False, True):
        for shape in shapes:
            name, L, C, H, B = shape.split(":")
            L, C, H, B = int(L), int(C), int(H), int(B)
            left = deadline - time.time()
            if left < (150 if compiled else 30):
                print(f"  torch train {name} {'compile' if compiled else 'eager'}: skipped ({left:.0f} s left)")
                continue
            try:
                rate = train_rate(dev, L, C, H, B, compiled, steps=10, warmup=3 if compiled else 2)
                entry = {"name": name, "mode": "compile" if compiled else "eager", "tokens_per_s": rate}
            except Exception as e:  # torch.compile may not work on the node: say so, go on
                entry = {"name": name, "mode": "compile" if compiled else "eager", "error": f"{type(e).__name__}: {e}"}
                torch.cuda.empty_cache()
            out["train"].append(entry)
            print(f"  torch train {name} {entry['mode']}: " +
                  (f"{entry['tokens_per_s']:.0f} tokens/s" if "tokens_per_s" in entry else entry["error"][:200]),
                  flush=True)


def main(path):
    dev = torch.device("cuda")
    out = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0), "bench": []}
    bench = out["bench"]
    for N, I, O in [(8192, 2048, 8192), (4096, 768, 3072)]:
        shape = f"{N}x{I}x{O}"
        x = torch.full((N, I), 0.01, device=dev, dtype=torch.bfloat16, requires_grad=True)
        W = torch.full((O, I), 0.02, device=dev, dtype=torch.bfloat16, requires_grad=True)
        b = torch.zeros(O, device=dev, dtype=torch.bfloat16, requires_grad=True)
        flop = 2.0 * N * I * O
        ms = time_ms(lambda: F.linear(x, W, b), 20)
        bench.append({"name": f"linear_forward_bf16 {shape}", "ms": ms, "rate": flop / ms / 1e9, "unit": "TFLOP/s"})
        y = F.linear(x, W, b)
        dy = torch.full_like(y, 0.01)
        ms = time_ms(lambda: torch.autograd.grad(y, (x, W, b), dy, retain_graph=True), 20)
        bench.append({"name": f"linear_backward_bf16 {shape}", "ms": ms, "rate": 2 * flop / ms / 1e9,
                      "unit": "TFLOP/s"})
    N, C = 8192, 2048
    x = torch.full((N, C), 0.5, device=dev, requires_grad=True)
    g = torch.ones(C, device=dev, requires_grad=True)
    bb = torch.zeros(C, device=dev, requires_grad=True)
    ms = time_ms(lambda: F.layer_norm(x, (C,), g, bb), 50)
    bench.append({"name": "layernorm_forward 8192x2048", "ms": ms, "rate": 2.0 * N * C * 4 / ms / 1e6, "unit": "GB/s"})
    y = F.layer_norm(x, (C,), g, bb)
    dy = torch.full_like(y, 0.01)
    ms = time_ms(lambda: torch.autograd.grad(y, (x, g, bb), dy, retain_graph=True), 50)
    bench.append({"name": "layernorm_backward 8192x2048", "ms": ms, "rate": 4.0 * N * C * 4 / ms / 1e6, "unit": "GB/s"})
    del x, y, dy
    # Causal attention forward + backward in bf16 (SDPA's flash kernel), the
    # FLOP convention of tera's entry: forward 2 B H T^2 hs, backward 2.5x.
    for B, T, H, hs in [(8, 1024, 12, 64), (8, 1024, 16, 128)]:
        q, k, v = (torch.full((B, H, T, hs), 0.01, device=dev, dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        dy = torch.full((B, H, T, hs), 0.01, device=dev, dtype=torch.bfloat16)

        def fwd_bwd():
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            torch.autograd.grad(y, (q, k, v), dy)

        ms = time_ms(fwd_bwd, 10)
        fwd = 2.0 * B * H * T * T * hs
        bench.append({"name": f"flash_attention_fwd_bwd_bf16 {B}x{T}x{H}x{hs}", "ms": ms, "rate": 3.5 * fwd / ms / 1e9,
                      "unit": "TFLOP/s"})
        del q, k, v, dy
    n = 1 << 28
    p = torch.zeros(n, device=dev, requires_grad=True)
    p.grad = torch.zeros(n, device=dev)
    opt = torch.optim.AdamW([p], lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    ms = time_ms(opt.step, 10)
    bench.append({"name": "adamw 2^28 params", "ms": ms, "rate": 7.0 * n * 4 / ms / 1e6, "unit": "GB/s"})
    del p, opt
    torch.cuda.empty_cache()
    for e in bench:
        print(f"  torch {e['name']:<44} {e['ms']:9.3f} ms  {e['rate']:9.1f} {e['unit']}")
    with open(path, "w") as f:  # the kernel benchmarks even if a training run fails below
        json.dump(out, f, indent=1)
    train_steps(dev, out)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "torch.json")

#!/usr/bin/env python3
"""PyTorch on the shapes tera-device-check benchmarks (scripts/device-check):
bf16 linear forward and backward (F.linear, fp32 accumulation in cuBLAS),
LayerNorm forward and backward in fp32, causal SDPA (flash) attention forward
and backward in bf16, and a fused AdamW step, timed with
CUDA events after a warm-up. Writes one JSON with the same fields as tera's
bench entries."""
import json
import sys

import torch
import torch.nn.functional as F


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
    for e in bench:
        print(f"  torch {e['name']:<44} {e['ms']:9.3f} ms  {e['rate']:9.1f} {e['unit']}")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "torch.json")

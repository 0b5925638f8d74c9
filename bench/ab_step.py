#!/usr/bin/python3
"""Side-by-side training-step speed of two tera binaries (A/B), for "no
slower than the previous commit" claims: both train the same GPT-2 shape
(default GPT-2 124M, micro-batch 4, seq 64, fp32, one process) on the same
data; the runs alternate A, B, A, B, ... so that machine noise falls on both
alike. Each run's figure is its median ms/step over the steps after the
first (page faults and one-time setup); the report is every round's B/A
ratio and their median, with the CPU model and ISA flags. Prints JSON last.

usage: ab_step.py TERA_A TERA_B [--rounds 7] [--steps 12] [--micro-batch 4]
                  [--seq 64] [--set KEY=VALUE ...] [--set-b KEY=VALUE ...] [--corpus FILE]
Example: bench/ab_step.py /tmp/old/build/tera build/tera
Never used with a threshold in a test: machines are noisy.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def cpu_model():
    model, flags = "unknown", []
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name") and model == "unknown":
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = [f for f in line.split(":", 1)[1].split() if f.startswith(("avx512", "amx", "avx2"))]
    except OSError:
        pass
    return model, flags


def one_run(tera, cfg, corpus, sets, work, name):
    metrics = os.path.join(work, name + ".jsonl")
    args = [tera, "train", "-q", "-c", cfg, "--metrics", metrics, "--set", f"data.train={corpus}",
            "--set", f"out.dir={os.path.join(work, name)}"]
    for s in sets:
        args += ["--set", s]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(args)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
    ms = [json.loads(line)["ms"] for line in open(metrics)]
    return statistics.median(ms[1:])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--corpus", default=os.path.join(HERE, "..", "tests", "data", "tiny_corpus.txt"))
    ap.add_argument("--set", action="append", default=[], help="extra config overrides for both binaries")
    ap.add_argument("--set-b", action="append", default=[], help="extra config overrides for B only "
                    "(a key the older binary does not have, say)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        cfg = os.path.join(work, "gpt2.toml")
        with open(cfg, "w") as f:
            f.write(f"""[model]
layers = 12
hidden = 768
heads = 12
seq_len = {args.seq}
vocab = 50257

[train]
steps = {args.steps}
micro_batch = {args.micro_batch}
global_batch = {args.micro_batch}
lr = 3e-4
warmup = 2
eval_every = 0
eval_sequences = 1
""")
        a_ms, b_ms, ratios = [], [], []
        for r in range(args.rounds):
            a = one_run(args.a, cfg, args.corpus, args.set, work, f"a{r}")
            b = one_run(args.b, cfg, args.corpus, args.set + args.set_b, work, f"b{r}")
            a_ms.append(a)
            b_ms.append(b)
            ratios.append(b / a)
            print(f"round {r + 1}: A {a:.1f} ms/step, B {b:.1f} ms/step, B/A {b / a:.4f}", flush=True)
    model, flags = cpu_model()
    out = {"cpu": model, "isa": flags, "threads": os.environ.get("OMP_NUM_THREADS", "all"),
           "shape": f"GPT-2 124M, micro-batch {args.micro_batch}, seq {args.seq}, fp32",
           "a": args.a, "b": args.b, "set_b": args.set_b, "a_ms_median": statistics.median(a_ms), "b_ms_median": statistics.median(b_ms),
           "ratio_median": statistics.median(ratios), "ratios": ratios}
    print(f"{model} ({' '.join(flags)}): median B/A {out['ratio_median']:.4f} over {args.rounds} alternating rounds "
          f"(A {out['a_ms_median']:.1f} ms/step, B {out['b_ms_median']:.1f} ms/step)")
    print(json.dumps(out))


if __name__ == "__main__":
    main()

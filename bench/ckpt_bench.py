#!/usr/bin/env python3
"""Checkpoint save and load throughput of `tera train` for GPT-2 124M.

usage: bench/ckpt_bench.py [--tera build/tera] [--corpus FILE] [--ranks 1,4]

For each rank count: trains one step of GPT-2 small (12 layers, hidden 768,
vocab 50257, 124M parameters: checkpoint = fp32 weights + both Adam moments,
~1.5 GB) writing a checkpoint, then resumes from it, and prints tera's own
timings of both (checkpoint: ... MB/s, resumed from ... MB/s). Layouts: 1
rank; 4 ranks as tp=2 x pp=2 (4 files written in parallel). Save time
includes gathering ZeRO shards, writing, fsync and the rename; load time
includes rank 0's CRC check of every file and every rank's reading. The page
cache is warm for the load (the checkpoint was just written).
"""
import argparse
import os
import re
import subprocess
import tempfile

CONFIG = """
[model]
layers = 12
hidden = 768
heads = 12
seq_len = 64
vocab = 50257
[train]
steps = 1
micro_batch = 1
global_batch = 1
eval_sequences = 1
[data]
train = "{corpus}"
[out]
dir = "{work}/out"
[ckpt]
dir = "{work}/ckpt"
"""
LAYOUTS = {1: [], 4: ["parallel.tp=2", "parallel.pp=2"]}


def run(tera, cfg, ranks, sets, resume=None):
    args = [tera, "train", "-c", cfg, "-q"] + [a for s in sets for a in ("--set", s)]
    if resume:
        args += ["--resume", resume, "--set", "train.steps=1"]
    if ranks > 1:
        args = ["mpirun", "--oversubscribe", "--bind-to", "none", "-n", str(ranks)] + args
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = subprocess.run(args, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{r.stdout}\n{r.stderr}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tera", default="build/tera")
    ap.add_argument("--corpus", default="tests/data/tiny_corpus.txt")
    ap.add_argument("--ranks", default="1,4")
    a = ap.parse_args()
    print(f"{'ranks':>5} {'layout':>10} {'size':>10} {'save s':>8} {'save MB/s':>10} {'load s':>8} {'load MB/s':>10}")
    for ranks in map(int, a.ranks.split(",")):
        with tempfile.TemporaryDirectory(dir=".") as work:
            work = os.path.abspath(work)
            cfg = os.path.join(work, "gpt2.toml")
            open(cfg, "w").write(CONFIG.format(corpus=os.path.abspath(a.corpus), work=work))
            out = run(a.tera, cfg, ranks, LAYOUTS[ranks])
            m = re.search(r"checkpoint: \S+ \(([\d.]+ \w+), ([\d.]+) s, (\d+) MB/s\)", out)
            out2 = run(a.tera, cfg, ranks, LAYOUTS[ranks], resume="auto")
            n = re.search(r"resumed from \S+ at step 1 \(([\d.]+ \w+), ([\d.]+) s, (\d+) MB/s\)", out2)
            if not m or not n:
                raise SystemExit(f"could not find the timings in:\n{out}\n{out2}")
            layout = "tp2 x pp2" if ranks == 4 else "1 rank"
            print(f"{ranks:>5} {layout:>10} {m.group(1):>10} {m.group(2):>8} {m.group(3):>10} {n.group(2):>8} {n.group(3):>10}",
                  flush=True)


if __name__ == "__main__":
    main()

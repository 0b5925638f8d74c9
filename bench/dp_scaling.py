#!/usr/bin/python3
"""Data-parallel weak scaling on this machine: the same per-rank batch at dp=1
and dp=2 (one thread per rank), for every ZeRO stage. Prints per-rank
throughput, the weak-scaling efficiency (tokens/s per rank at dp=2 over dp=1)
and the communication share of the step (time blocked in communication / step
time, max over ranks). Medians over the steps after the first two.

Also the machine's own ceiling: two unrelated single-rank runs at once, each
pinned to its own core, against one alone. Ranks that share a node share its
memory bandwidth and caches, so dp=2 cannot beat this ratio on this machine.
The machine is noisy over tens of seconds (other tenants on the host), so
each stage runs dp=1 and dp=2 alternately --repeat times (default 3) and
reports the median of the per-pair efficiencies.
usage: dp_scaling.py [TERA] [--steps N] [--repeat R]"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
tera = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else os.path.join(root, "build", "tera")
steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 10
repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 3

# 6 layers x hidden 384: 10.7M parameters (byte vocabulary), seq 128, 8 sequences per rank.
MODEL = ["model.layers=6", "model.hidden=384", "model.heads=6", "model.seq_len=128", "model.vocab=256",
         "train.micro_batch=4", "train.eval_sequences=4", f"train.steps={steps}", "train.lr=1e-3"]
CORPUS = "/usr/share/common-licenses/GPL-3"


def run(dp, zero, work):
    metrics = os.path.join(work, f"dp{dp}_z{zero}.jsonl")
    cfg = os.path.join(work, "cfg.toml")
    with open(cfg, "w") as f:
        f.write("[model]\nlayers = 1\nhidden = 8\nheads = 1\nseq_len = 8\n[data]\ntrain = \"x\"\n")
    sets = MODEL + [f"train.global_batch={8 * dp}", f"parallel.dp={dp}", f"parallel.zero={zero}",
                    f"data.train={CORPUS}", f"out.dir={work}/out{dp}{zero}"]
    cmd = ["mpirun", "--oversubscribe", "--bind-to", "core", "-n", str(dp), tera, "train", "-c", cfg, "-q",
           "--metrics", metrics]
    for s in sets:
        cmd += ["--set", s]
    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    rows = [json.loads(l) for l in open(metrics)][2:]
    tps_per_rank = statistics.median(row["tokens_per_s"] for row in rows) / dp
    share = statistics.median(row["comm_ms"] / row["ms"] for row in rows)
    return tps_per_rank, share


def concurrent_ceiling(work):
    """Tokens/s of two independent single-rank runs side by side (cores 0 and 1) over one alone."""
    cfg = os.path.join(work, "cfg.toml")
    env = dict(os.environ, OMP_NUM_THREADS="1")

    def cmd(core, name):
        c = ["taskset", "-c", str(core), tera, "train", "-c", cfg, "-q", "--metrics", os.path.join(work, name)]
        for s in MODEL + ["train.global_batch=8", f"data.train={CORPUS}", f"out.dir={work}/{name}.out"]:
            c += ["--set", s]
        return c

    def tps(name):
        rows = [json.loads(l) for l in open(os.path.join(work, name))][2:]
        return statistics.median(row["tokens_per_s"] for row in rows)

    subprocess.run(cmd(0, "solo.jsonl"), check=True, capture_output=True, env=env)
    pair = [subprocess.Popen(cmd(core, f"pair{core}.jsonl"), stdout=subprocess.DEVNULL, env=env) for core in (0, 1)]
    if any(p.wait() != 0 for p in pair):
        sys.exit("concurrent single-rank runs failed")
    return min(tps("pair0.jsonl"), tps("pair1.jsonl")) / tps("solo.jsonl")


with tempfile.TemporaryDirectory() as work:
    print(f"model: 6 layers, hidden 384 (10.7M parameters), seq 128, 8 sequences per rank, {steps} steps, "
          f"median of {repeat} alternating pairs")
    print(f"{'zero':>4} {'dp=1 tok/s':>12} {'dp=2 tok/s/rank':>16} {'efficiency':>11} {'comm share dp=2':>16}")
    for zero in (0, 1, 2, 3):
        pairs = []
        for _ in range(repeat):
            t1, _ = run(1, zero, work)
            t2, share = run(2, zero, work)
            pairs.append((t2 / t1, t1, t2, share))
        eff, t1, t2, share = sorted(pairs)[len(pairs) // 2]
        print(f"{zero:>4} {t1:>12.0f} {t2:>16.0f} {100 * eff:>10.1f}% {100 * share:>15.1f}%")
    if (os.cpu_count() or 1) >= 2:
        print(f"machine ceiling: two independent single-rank runs at once keep {100 * concurrent_ceiling(work):.1f}% "
              "of one alone (the slower of the two)")

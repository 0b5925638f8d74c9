#!/usr/bin/python3
"""Tensor parallelism on this machine: the same model and batch at tp=1 and
tp=2 (one thread per rank), with and without sequence parallelism. Prints
step time, the tensor-parallel communication share of the step, activation
memory per rank, and the tp bytes per step measured against the closed form.
usage: tp_scaling.py [BUILD_DIR]"""
import json
import os
import subprocess
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "build")
bench = os.path.join(build, "bench", "tp_bench")
env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
rows = []
for tp, sp in ((1, False), (2, False), (2, True)):
    cmd = ["mpirun", "--oversubscribe", "--bind-to", "core", "-n", str(tp), bench] + (["--sp"] if sp else [])
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    rows.append(json.loads(out.strip().splitlines()[-1]))
base = rows[0]["step_ms"]
print(f"model: {rows[0]['params'] / 1e6:.1f}M parameters, 8 x 128 tokens per step, one thread per rank")
print(f"{'layout':>10} {'step ms':>9} {'speedup':>8} {'tp comm':>8} {'act/rank':>10} {'tp MB/step':>11} {'formula MB':>11} {'equal':>6}")
for r in rows:
    name = f"tp={r['tp']}" + (" sp" if r["sp"] else "")
    print(f"{name:>10} {r['step_ms']:>9.0f} {base / r['step_ms']:>7.2f}x {100 * r['tp_comm_share']:>7.1f}% "
          f"{r['activations_bytes_per_rank'] / 2**20:>8.1f}Mi {r['tp_bytes_measured'] / 1e6:>11.2f} "
          f"{r['tp_bytes_formula'] / 1e6:>11.2f} {str(r['tp_bytes_measured'] == r['tp_bytes_formula']):>6}")

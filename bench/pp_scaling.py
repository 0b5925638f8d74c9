#!/usr/bin/python3
"""Pipeline parallelism on this machine: pp = 2 and pp = 4 (one thread per
rank) with m = 4, 8 and 16 micro-batches under 1F1B; prints each stage's
measured bubble (time blocked in pipeline receives / step time, median over
steps) against (p-1)/(m+p-1), and the activation memory per stage with and
without full recomputation against ModelSpec's formula. With more ranks than
cores (pp = 4 on 2 cores) stages share CPUs, so their wall-clock waits include
CPU contention, not only the schedule's bubble.
usage: pp_scaling.py [BUILD_DIR]"""
import json
import os
import subprocess
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "build")
bench = os.path.join(build, "bench", "pp_bench")
env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def run(m, recompute=False, pp=4):
    cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "--mca", "mpi_yield_when_idle", "1", "-n", str(pp), bench,
           "-m", str(m)] + (["--recompute"] if recompute else [])
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


cores = os.cpu_count()
for pp in (2, 4):
    print(f"pp = {pp}, 1F1B, 8 layers x hidden 256, micro-batch 2 x seq 64, one thread per rank"
          + (f" ({pp} ranks on {cores} cores: oversubscribed)" if pp > cores else ""))
    print(f"{'m':>3} {'theory':>7}  measured bubble per stage      mean   mean/theory")
    for m in (4, 8, 16):
        r = run(m, pp=pp)
        b = [s["bubble"] for s in r["stages"]]
        mean = sum(b) / len(b)
        print(f"{m:>3} {100 * r['theoretical_bubble']:>6.1f}%  " + " ".join(f"{100 * x:>5.1f}%" for x in b) +
              f"  {100 * mean:>5.1f}%  {mean / r['theoretical_bubble']:>6.2f}")
    print()
print()
print("activation memory per stage (m = 8): allocated / formula, without and with full recompute")
for rc in (False, True):
    r = run(8, rc)
    cells = [f"{s['activation_bytes'] / 2**20:.2f}/{s['activation_bytes_formula'] / 2**20:.2f} MiB" for s in r["stages"]]
    print(f"  recompute={'full' if rc else 'none':4}: " + "  ".join(cells))

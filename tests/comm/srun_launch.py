#!/usr/bin/python3
"""`srun -n N build/tera train` under Slurm (PMIx): the same losses as the
single-process run for dp=2 ZeRO-1 and tp=2; SIGUSR1 to srun (forwarded) and
SIGTERM from Slurm to the tasks (`scancel -s TERM`, what a time limit sends)
reach the ranks, which checkpoint and exit 0; and a rank killed mid-run ends
the job non-zero with Slurm naming the task. Needs a reachable Slurm with an
idle node (scripts/slurm-local makes one on this machine); without one it
exits 77, which ctest reports as skipped.
Usage: srun_launch.py TERA_BINARY"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TERA = os.path.abspath(sys.argv[1])
ENV = dict(os.environ, OMP_NUM_THREADS="1")
CONFIG = """[model]
layers = 2
hidden = 64
heads = 2
seq_len = 32
vocab = 256
[train]
steps = {steps}
micro_batch = 2
global_batch = 8
eval_sequences = 2
[data]
train = "{corpus}"
[out]
dir = "{out}"
"""


def slurm_ready():
    if not shutil.which("srun") or not shutil.which("sinfo"):
        return False
    r = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=30)
    return r.returncode == 0 and any(s.strip() in ("idle", "mix") for s in r.stdout.split())


def losses(path):
    with open(path) as f:
        return [json.loads(line)["loss"] for line in f if line.strip()]


def main():
    if not slurm_ready():
        print("no Slurm with an idle node (scripts/slurm-local starts one): skipped")
        return 77
    with tempfile.TemporaryDirectory() as d:
        corpus = os.path.join(d, "corpus.txt")
        with open(corpus, "w") as f:
            f.write("the quick brown fox jumps over the lazy dog. " * 4000)
        cfg = os.path.join(d, "run.toml")
        with open(cfg, "w") as f:
            f.write(CONFIG.format(steps=6, corpus=corpus, out=os.path.join(d, "out")))
        ref = os.path.join(d, "single.jsonl")
        subprocess.run([TERA, "train", "-c", cfg, "-q", "--metrics", ref], check=True, env=ENV, timeout=300)
        for layout in (["--set", "parallel.zero=1"], ["--set", "parallel.tp=2"]):
            m = os.path.join(d, "srun.jsonl")
            # Every run trains afresh into the same out.dir: --start-over replaces the earlier final.
            r = subprocess.run(["srun", "-n", "2", TERA, "train", "-c", cfg, "-q", "--start-over", "--metrics", m, *layout],
                               capture_output=True, text=True, env=ENV, timeout=300)
            if r.returncode != 0:
                print(f"srun {layout} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
                return 1
            a, b = losses(ref), losses(m)
            if len(a) != len(b) or any(abs(x - y) > 1e-5 * abs(x) for x, y in zip(a, b)):
                print(f"srun {layout}: losses {b} differ from the single-process {a}")
                return 1
            print(f"srun -n 2 {' '.join(layout)}: {len(b)} losses match the single process")
        # Stop signals under Slurm 22.05: srun forwards SIGUSR1 to the tasks;
        # SIGTERM reaches them from slurmstepd (scancel -s TERM; a time limit
        # sends it before SIGKILL). SIGTERM to srun itself cancels the step.
        with open(cfg, "w") as f:
            f.write(CONFIG.format(steps=1000000, corpus=corpus, out=os.path.join(d, "out")))
        for sig, via_scancel in ((signal.SIGUSR1, False), (signal.SIGTERM, True)):
            ck = os.path.join(d, f"ck{int(sig)}")
            job = subprocess.Popen(["srun", "-n", "2", TERA, "train", "-c", cfg, "-q", "--start-over", "--set", f"ckpt.dir={ck}",
                                    "--set", "ckpt.every=20"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, env=ENV)
            for _ in range(300):
                if os.path.exists(os.path.join(ck, "latest")):
                    break
                time.sleep(0.1)
            if via_scancel:
                ids = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout.split()
                subprocess.run(["scancel", "-s", "TERM", *ids], check=True)
            else:
                job.send_signal(sig)
            try:
                out, _ = job.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                job.kill()
                print(f"srun did not end after {signal.Signals(sig).name}")
                return 1
            name = signal.Signals(sig).name
            if f"{name} received" not in out or "continue with --resume auto" not in out or job.returncode != 0:
                print(f"{name}: exit {job.returncode}, output:\n{out[-3000:]}")
                return 1
            print(f"{name} {'from scancel' if via_scancel else 'to srun'}: the ranks checkpointed and exited 0")
        # A rank killed mid-run: the job ends, non-zero, and Slurm names the task.
        with open(cfg, "w") as f:
            f.write(CONFIG.format(steps=1000000, corpus=corpus, out=os.path.join(d, "out")))
        job = subprocess.Popen(["srun", "-n", "2", TERA, "train", "-c", cfg, "-q", "--start-over"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=ENV)
        victim = None
        for _ in range(100):
            time.sleep(0.2)
            r = subprocess.run(["pgrep", "-f", f"{TERA} train -c {cfg}"], capture_output=True, text=True)
            pids = [int(p) for p in r.stdout.split() if int(p) != job.pid]
            if len(pids) >= 2:
                victim = pids[-1]
                break
        if victim is None:
            job.kill()
            print("the two ranks never appeared")
            return 1
        time.sleep(1.0)
        os.kill(victim, signal.SIGKILL)
        try:
            out, _ = job.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            job.kill()
            print("the job hung after a rank was killed")
            return 1
        if job.returncode == 0 or "task" not in out:
            print(f"after a rank was killed: exit {job.returncode}, output:\n{out}")
            return 1
        print(f"a killed rank ended the job with exit {job.returncode}: "
              f"{[l for l in out.splitlines() if 'task' in l][:1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

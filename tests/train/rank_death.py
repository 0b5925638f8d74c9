#!/usr/bin/python3
"""A rank that dies makes the job exit non-zero promptly with a message naming
the rank, instead of hanging. Starts a long 2-rank run, SIGKILLs rank 1 once
training is under way, and checks mpirun's exit code, timing and output.
usage: rank_death.py TERA CONFIG CORPUS"""
import os
import signal
import subprocess
import sys
import time

tera, config, corpus = sys.argv[1:4]
env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
out_dir = f"/tmp/tera_rank_death_{os.getpid()}"
cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-n", "2", tera, "train", "-c", config,
       "--set", f"data.train={corpus}", "--set", "train.steps=100000", "--set", "parallel.dp=2",
       "--set", f"out.dir={out_dir}"]
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def parent(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def rank_pid(rank, launcher):
    """The pid of the tera process of *this* job (a descendant of our mpirun,
    not of another job running at the same time) whose rank is `rank`."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0")[0]
        except OSError:
            continue
        if not argv0.endswith(b"tera") or f"OMPI_COMM_WORLD_RANK={rank}".encode() not in environ:
            continue
        p, hops = int(pid), 0
        while p > 1 and hops < 16:
            p, hops = parent(p), hops + 1
            if p == launcher:
                return int(pid)
    return None


lines = []
for line in p.stdout:
    lines.append(line)
    if line.startswith("step "):
        break
victim = rank_pid(1, p.pid)
if victim is None:
    p.kill()
    print("FAIL: could not find rank 1\n" + "".join(lines))
    sys.exit(1)
os.kill(victim, signal.SIGKILL)
t0 = time.time()
try:
    rest, _ = p.communicate(timeout=60)
except subprocess.TimeoutExpired:
    p.kill()
    print("FAIL: the job hung for 60 s after rank 1 died")
    sys.exit(1)
elapsed = time.time() - t0
output = "".join(lines) + rest
print(output[-1500:])
if p.returncode == 0:
    print("FAIL: mpirun exited 0 after a rank was killed")
    sys.exit(1)
if "rank 1" not in output:
    print("FAIL: the output does not name rank 1")
    sys.exit(1)
print(f"ok: exit {p.returncode} {elapsed:.1f} s after rank 1 was killed, and the message names it")

#!/usr/bin/python3
"""Simulator fidelity on this machine: trains a tiny GPT under several real
layouts on local MPI ranks (`mpirun -n K tera train`), reads each run's
measured step time (the fastest --metrics "ms" after three warm-up steps),
simulates the same layout with `tera simulate` on a `local` preset measured by
`mpirun -n K tera calibrate` (one rank = one "GPU", MPI latency and bandwidth
from a ping-pong), and prints measured vs predicted step time and both rank
orders. Target (issue 9): every layout within 15%, the same order.

This is a benchmark, never a test: on a small shared machine the measurements
move with whatever else runs. Exit 1 only with --fail-above PCT.

Each layout is measured --repeat times (default 2), in passes over all
layouts, keeping its fastest step overall: a slow minute on the machine then
spoils one pass, not a layout's figure.

usage: sim_fidelity.py [--tera build/tera] [--ranks 2] [--steps 12] [--repeat 2] [--cluster FILE]
                       [--fail-above PCT] [--json]
  --cluster FILE   use this preset instead of calibrating first"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
ENV.pop("OMP_NUM_THREADS", None)  # tera train and calibrate share the cores evenly among ranks

# The tiny model: big enough that GEMMs, not launch overheads, dominate a step.
MODEL = {"layers": 4, "hidden": 128, "heads": 4, "seq_len": 64, "vocab": 256}

# (name, tp, pp, dp, vpp, micro_batch, global_batch, zero, sp, schedule); tp*pp*dp = ranks.
LAYOUTS_2 = [
    ("tp2 mb2 m8", 2, 1, 1, 1, 2, 16, 0, 0, "1f1b"),
    ("tp2 sp mb4 m4", 2, 1, 1, 1, 4, 16, 0, 1, "1f1b"),
    ("pp2 1f1b mb2 m8", 1, 2, 1, 1, 2, 16, 0, 0, "1f1b"),
    ("pp2 1f1b mb1 m4", 1, 2, 1, 1, 1, 4, 0, 0, "1f1b"),
    ("pp2 gpipe mb4 m4", 1, 2, 1, 1, 4, 16, 0, 0, "gpipe"),
    ("pp2 interleaved v2 mb2 m8", 1, 2, 1, 2, 2, 16, 0, 0, "interleaved"),
    ("dp2 zero0 mb2 m4", 1, 1, 2, 1, 2, 16, 0, 0, "1f1b"),
    ("dp2 zero1 mb1 m8", 1, 1, 2, 1, 1, 16, 1, 0, "1f1b"),
]


def config_text(tp, pp, dp, vpp, mb, gb, zero, sp, schedule, steps, out_dir):
    m = "\n".join(f"{k} = {v}" for k, v in MODEL.items())
    return f"""[model]
{m}

[train]
steps = {steps}
micro_batch = {mb}
global_batch = {gb}
lr = 1e-3
min_lr = 1e-4
warmup = 2
eval_every = 0
eval_sequences = 4

[parallel]
tp = {tp}
pp = {pp}
dp = {dp}
vpp = {vpp}
zero = {zero}
sequence_parallel = {"true" if sp else "false"}
schedule = "{schedule}"

[data]
train = "/usr/share/common-licenses/GPL-3"

[out]
dir = "{out_dir}"
"""


def mpirun(ranks, args):
    return ["mpirun", "--oversubscribe", "--bind-to", "none", "-n", str(ranks), *args]


def measure(tera, ranks, layout, steps, tmp):
    name, tp, pp, dp, vpp, mb, gb, zero, sp, schedule = layout
    tag = name.replace(" ", "_")
    cfg = os.path.join(tmp, tag + ".toml")
    with open(cfg, "w") as f:
        f.write(config_text(tp, pp, dp, vpp, mb, gb, zero, sp, schedule, steps, os.path.join(tmp, tag)))
    metrics = os.path.join(tmp, tag + ".jsonl")
    r = subprocess.run(mpirun(ranks, [tera, "train", "-c", cfg, "--metrics", metrics, "-q"]), capture_output=True,
                       text=True, env=ENV, timeout=900)
    if r.returncode != 0:
        sys.exit(f"sim_fidelity: {name}: tera train failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    with open(metrics) as f:
        ms = [json.loads(line)["ms"] for line in f if line.strip()]
    warm = min(3, len(ms) - 1)  # the first steps fault pages in and warm caches
    # The fastest step, as `tera calibrate` keeps the fastest repeat: other load
    # on the machine only ever slows a step down. The median is kept for the record.
    return min(ms[warm:]) / 1e3, statistics.median(ms[warm:]) / 1e3, cfg


def predict(tera, cluster, cfg, layout):
    name, tp, pp, dp, vpp, mb, gb, zero, sp, schedule = layout
    lay = f"tp={tp},pp={pp},dp={dp},vpp={vpp},mb={mb},zero={zero},sp={sp},schedule={schedule}"
    r = subprocess.run([tera, "simulate", "--model", cfg, "--cluster", cluster, "--layout", lay, "--global-batch",
                        str(gb), "--precision", "fp32", "--json", "--no-memory-check"],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        sys.exit(f"sim_fidelity: {name}: tera simulate failed:\n{r.stderr}")
    return json.loads(r.stdout)["step_time_s"]


def ranks_of(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    rank = [0] * len(values)
    for pos, i in enumerate(order):
        rank[i] = pos + 1
    return rank


# Two layouts whose measured times differ by less than this are a tie on this
# machine: repeated runs of one layout move their fastest step by a few percent.
SEPARATION = 0.05


def separated_pairs(meas, pred, sep):
    """Pairs (i, j) with measured times more than `sep` apart, and how many of them the prediction orders alike."""
    total = agree = 0
    for i in range(len(meas)):
        for j in range(i + 1, len(meas)):
            lo, hi = sorted((meas[i], meas[j]))
            if hi <= lo * (1 + sep):
                continue
            total += 1
            agree += (meas[i] < meas[j]) == (pred[i] < pred[j])
    return total, agree


def spearman(a, b):
    n = len(a)
    ra, rb = ranks_of(a), ranks_of(b)
    return 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb)) / (n * (n * n - 1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tera", default=os.path.join(ROOT, "build", "tera"))
    ap.add_argument("--ranks", type=int, default=2, choices=[2])
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--cluster", default="")
    ap.add_argument("--fail-above", type=float, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    tera = os.path.abspath(a.tera)
    with tempfile.TemporaryDirectory() as tmp:
        cluster = a.cluster
        if not cluster:
            cluster = os.path.join(tmp, "local.toml")
            r = subprocess.run(mpirun(a.ranks, [tera, "calibrate", "--out", cluster]), capture_output=True, text=True,
                               env=ENV, timeout=600)
            if r.returncode != 0:
                sys.exit(f"sim_fidelity: calibrate failed:\n{r.stdout}\n{r.stderr}")
            if not a.json:
                print("calibrated (mpirun -n %d tera calibrate):" % a.ranks)
                for line in r.stdout.splitlines():
                    if "fit" in line or "MPI" in line or "triad" in line:
                        print("  " + line.strip())
        best = {}
        for _ in range(a.repeat):
            for lay in LAYOUTS_2:
                fastest, median, cfg = measure(tera, a.ranks, lay, a.steps, tmp)
                if lay[0] not in best or fastest < best[lay[0]][0]:
                    best[lay[0]] = (fastest, median, cfg)
        rows = []
        for lay in LAYOUTS_2:
            measured, median, cfg = best[lay[0]]
            predicted = predict(tera, cluster, cfg, lay)
            rows.append({"layout": lay[0], "measured_s": measured, "measured_median_s": median,
                         "predicted_s": predicted, "error": predicted / measured - 1})
            if not a.json:
                print(f"  {lay[0]:<28} measured {1e3 * measured:8.1f} ms (median {1e3 * median:8.1f})  predicted "
                      f"{1e3 * predicted:8.1f} ms  {100 * rows[-1]['error']:+6.1f}%", flush=True)
    meas = [r["measured_s"] for r in rows]
    pred = [r["predicted_s"] for r in rows]
    rm, rp = ranks_of(meas), ranks_of(pred)
    for r, x, y in zip(rows, rm, rp):
        r["rank_measured"], r["rank_predicted"] = x, y
    worst = max(abs(r["error"]) for r in rows)
    rho = spearman(meas, pred)
    if a.json:
        sep, agree = separated_pairs(meas, pred, SEPARATION)
        print(json.dumps({"rows": rows, "max_abs_error": worst, "spearman": rho, "separated_pairs": sep,
                          "separated_pairs_agreeing": agree}, indent=2))
    else:
        print(f"\n{'layout':<28} {'measured':>10} {'predicted':>10} {'error':>7}  {'rank meas/pred':>14}")
        for r in rows:
            print(f"{r['layout']:<28} {1e3 * r['measured_s']:>8.1f}ms {1e3 * r['predicted_s']:>8.1f}ms "
                  f"{100 * r['error']:>+6.1f}%  {r['rank_measured']:>7}/{r['rank_predicted']}")
        within = sum(abs(r["error"]) <= 0.15 for r in rows)
        print(f"\n{within}/{len(rows)} layouts within 15%; max |error| {100 * worst:.1f}%; "
              f"rank order {'identical' if rm == rp else 'differs'} (Spearman {rho:.3f})")
        sep, agree = separated_pairs(meas, pred, SEPARATION)
        print(f"pairs whose measured step times differ by more than {100 * SEPARATION:.0f}% (beyond this machine's "
              f"step-to-step noise): {agree}/{sep} ordered the same by the simulator")
    if a.fail_above > 0 and 100 * worst > a.fail_above:
        sys.exit(1)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Layout-equivalence harness (DESIGN.md invariant 1): the single-process run
is the control; every layout must reproduce its per-step losses and validation
losses within a relative 1e-5, same data, same seed. Gradient norms are
checked too, within 1e-4: a sum of squares dominated by a few entries, the
norm carries reduction-order noise further than the loss does.

usage: layout_equivalence.py [--all KEY=VALUE ...] [--tol loss=X,grad_norm=Y] [--show-output] TERA CONFIG CORPUS
                             LAYOUT [LAYOUT ...]
--all settings apply to the control and every layout (train.precision=bf16:
the bf16 matrix, each layout against the single-process bf16 run); --tol
replaces the default bounds (a bf16 run's bound is derived in
docs/precision.md).
With TERA_TEST_BACKEND set (cpu-guarded in CI), every layout runs on that
kernel backend against the control on the cpu backend. With
TERA_TEST_NO_MPIRUN=1 (a GPU node without MPI) one-rank layouts run without
mpirun; --show-output prints every run's own output (its start-up lines: the
device communicator, the GEMM paths).
A LAYOUT is comma-separated settings: the short keys tp, pp, dp, cp, zero, sp,
schedule, vpp, recompute, mb (micro-batch) or any section.key=value. The rank
count is tp * pp * dp * cp. Exits non-zero on any mismatch; prints a table.
"""
import json
import os
import subprocess
import sys
import tempfile

SHORT = {"tp": "parallel.tp", "pp": "parallel.pp", "dp": "parallel.dp", "cp": "parallel.cp", "zero": "parallel.zero",
         "sp": "parallel.sequence_parallel", "schedule": "parallel.schedule", "vpp": "parallel.vpp",
         "recompute": "train.recompute", "mb": "train.micro_batch"}
TOL = {"loss": 1e-5, "val_loss": 1e-5, "grad_norm": 1e-4}


def parse_layout(text):
    sets, ranks = [], {"tp": 1, "pp": 1, "dp": 1, "cp": 1}
    for item in filter(None, text.split(",")):
        key, value = item.split("=", 1)
        if key in ranks:
            ranks[key] = int(value)
        sets.append(f"{SHORT.get(key, key)}={value}")
    return sets, ranks["tp"] * ranks["pp"] * ranks["dp"] * ranks["cp"]


SHOW_OUTPUT = False


def run(tera, config, corpus, sets, nranks, workdir, name):
    if name != "control" and os.environ.get("TERA_TEST_BACKEND"):
        sets = sets + ["train.backend=" + os.environ["TERA_TEST_BACKEND"]]
    metrics = os.path.join(workdir, name + ".jsonl")
    args = [tera, "train", "-c", config] + ([] if SHOW_OUTPUT else ["-q"]) + [
        "--metrics", metrics, "--set", f"data.train={corpus}", "--set", f"out.dir={os.path.join(workdir, name)}"]
    for s in sets:
        args += ["--set", s]
    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if nranks == 1 and os.environ.get("TERA_TEST_NO_MPIRUN") == "1":
        nranks = 0
    if nranks > 0:
        args = ["mpirun", "--oversubscribe", "--bind-to", "none", "--mca", "btl_vader_single_copy_mechanism", "none",
                "-n", str(nranks)] + args
    r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    if SHOW_OUTPUT:
        print(f"--- {name}\n{r.stdout}{r.stderr}", end="", flush=True)
    if r.returncode != 0:
        raise RuntimeError(f"{name}: exit {r.returncode}\n{' '.join(args)}\n{r.stdout}\n{r.stderr}")
    return [json.loads(line) for line in open(metrics)]


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def main():
    global SHOW_OUTPUT
    argv, common = sys.argv[1:], []
    while argv and argv[0] in ("--all", "--tol", "--show-output"):
        if argv[0] == "--show-output":
            SHOW_OUTPUT, argv = True, argv[1:]
            continue
        flag, value, argv = argv[0], argv[1], argv[2:]
        if flag == "--all":
            common.append(value)
        else:
            for item in value.split(","):
                key, bound = item.split("=")
                TOL[key] = float(bound)
                if key == "loss":
                    TOL["val_loss"] = float(bound)
    tera, config, corpus, layouts = argv[0], argv[1], argv[2], argv[3:]
    failures = []
    with tempfile.TemporaryDirectory() as work:
        control = run(tera, config, corpus, common, 0, work, "control")
        if common:
            print("every run with " + " ".join(common))
        print(f"control: {len(control)} steps, loss {control[0]['loss']:.6f} -> {control[-1]['loss']:.6f}")
        for i, layout in enumerate(layouts):
            sets, n = parse_layout(layout)
            sets = common + sets
            try:
                got = run(tera, config, corpus, sets, n, work, f"layout{i}")
            except RuntimeError as e:
                print(f"FAIL {layout}: {e}")
                failures.append(layout)
                continue
            worst = {key: 0.0 for key in TOL}
            ok = len(got) == len(control)
            for c, g in zip(control, got):
                for key in TOL:
                    if key in c:
                        if key not in g:
                            ok = False
                            continue
                        worst[key] = max(worst[key], rel(g[key], c[key]))
            ok = ok and all(worst[k] <= TOL[k] for k in TOL)
            print(f"{'ok  ' if ok else 'FAIL'} {layout:50s} ranks {n}  worst relative difference: loss "
                  f"{max(worst['loss'], worst['val_loss']):.1e}, grad norm {worst['grad_norm']:.1e}")
            if not ok:
                failures.append(layout)
    if failures:
        print(f"{len(failures)} layout(s) differ from the single-process run: {failures}")
        sys.exit(1)
    print(f"all {len(layouts)} layouts match the single-process run (loss within {TOL['loss']:g}, grad norm within "
          f"{TOL['grad_norm']:g})")


if __name__ == "__main__":
    main()

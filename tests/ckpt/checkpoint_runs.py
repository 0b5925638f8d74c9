#!/usr/bin/python3
"""End-to-end checkpoint tests over real `tera train` runs (mpirun for >1 rank).

usage: checkpoint_runs.py TERA CONFIG CORPUS CASE
CASE:
  resume     same layout, continue from step k: bit-identical losses (1 rank,
             and 4 ranks tp2 x dp2 ZeRO-2)
  corrupt    a flipped byte / truncated file / half-written meta is detected
             (ckpt inspect, --resume DIR) and --resume auto falls back to the
             previous good checkpoint with a warning; other-model and
             other-version checkpoints get clear messages
  reshard    save in 4 layouts, resume in 4 others (online) and via
             `tera ckpt reshard` (offline): losses match the uninterrupted
             single-process run within the equivalence tolerance
  kill       kill -9 one rank of a 4-rank run: the job exits non-zero
             promptly; --resume auto finishes the run with matching losses
  preempt    SIGTERM to every rank (Slurm) and SIGUSR1 to mpirun: exit 0
             with a checkpoint; --resume auto finishes with matching losses
  nonfinite  an injected NaN gradient skips the step (named group); too
             many in a row stop the run with a checkpoint
  init       ckpt.init from a checkpoint, a final/ directory and an exported
             Hugging Face file start from the same weights
  device     on gpu-emu (device memory, staged collectives): a 2-rank run
             saves, resumes bit-identically in its layout and, resharded,
             in another, against the single-process cpu run
With TERA_TEST_BACKEND set (cpu-guarded in CI), every run trains on that
kernel backend. Exits non-zero on any failure.
"""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "train"))
# Layout strings (short keys tp, pp, dp, zero, sp, ...) and tolerances as the layout-equivalence harness.
from layout_equivalence import TOL, parse_layout as layout_sets  # noqa: E402
ENV = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def command(tera, config, corpus, work, name, layout="", extra=(), resume=None, flags=(), env=None):
    sets, n = layout_sets(layout)
    args = [tera, "train", "-c", config, "-q", "--metrics", os.path.join(work, name + ".jsonl"),
            "--set", f"data.train={corpus}", "--set", f"out.dir={os.path.join(work, name)}"]
    for s in sets + list(extra):
        args += ["--set", s]
    backend = (env or os.environ).get("TERA_TEST_BACKEND")
    if backend:
        args += ["--set", "train.backend=" + backend]
    if resume:
        args += ["--resume", resume]
    args += list(flags)
    if n > 1:
        args = ["mpirun", "--oversubscribe", "--bind-to", "none", "--mca", "btl_vader_single_copy_mechanism", "none",
                "-n", str(n)] + args
    return args


def train(tera, config, corpus, work, name, layout="", extra=(), resume=None, expect=0, env=None, flags=()):
    args = command(tera, config, corpus, work, name, layout, extra, resume, flags, env)
    r = subprocess.run(args, capture_output=True, text=True, env=env or ENV, timeout=600)
    if r.returncode != expect:
        raise RuntimeError(f"{name}: exit {r.returncode} (expected {expect})\n{' '.join(args)}\n{r.stdout}\n{r.stderr}")
    return r


def metrics(work, name):
    path = os.path.join(work, name + ".jsonl")
    return {m["step"]: m for m in map(json.loads, open(path))} if os.path.exists(path) else {}


def same(a, b, exact):
    """Every step of b equals a's (bit-identical or within TOL)."""
    if not b:
        return False, "no steps"
    worst, ok = 0.0, True
    for step, m in b.items():
        for key, tol in TOL.items():
            if key in m:
                if key not in a[step]:
                    return False, f"step {step} lacks {key}"
                if exact and m[key] != a[step][key]:
                    return False, f"step {step} {key} {m[key]!r} != {a[step][key]!r}"
                d = abs(m[key] - a[step][key]) / max(abs(a[step][key]), 1e-30)
                worst = max(worst, d)
                ok = ok and d <= tol
    return ok, f"worst relative difference {worst:.1e}"


def ckpt(work, name):
    return ["ckpt.dir=" + os.path.join(work, name)]


def case_resume(tera, config, corpus, work):
    for layout in ["", "tp=2,dp=2,zero=2"]:
        tag = layout or "1 rank"
        sfx = "-" + layout.replace(",", "-").replace("=", "") if layout else ""  # each layout's runs their own out.dir
        train(tera, config, corpus, work, "full" + sfx, layout, ckpt(work, "c") + ["ckpt.every=5", "ckpt.keep=10"])
        full = metrics(work, "full" + sfx)
        for k in (5, 10):
            d = os.path.join(work, "c", f"step-{k:08d}")
            train(tera, config, corpus, work, f"from{k}{sfx}", layout, resume=d)
            got = metrics(work, f"from{k}{sfx}")
            ok, why = same(full, got, exact=True)
            check(ok and min(got) == k + 1, f"resume {tag} from step {k}: bit-identical ({why})")
        # auto picks the newest (the end): nothing left to run, still exit 0.
        r = train(tera, config, corpus, work, "auto" + sfx, layout, ckpt(work, "c"), resume="auto")
        check("at step 20" in r.stdout, f"resume {tag} auto finds step 20")
        shutil.rmtree(os.path.join(work, "c"))
    # Retention: keep = 2 leaves the newest two.
    train(tera, config, corpus, work, "keep", "", ckpt(work, "k") + ["ckpt.every=4", "ckpt.keep=2"])
    left = sorted(n for n in os.listdir(os.path.join(work, "k")) if n != ".tera.lock")  # the run lock stays
    check(left == ["latest", "step-00000016", "step-00000020"], f"ckpt.keep = 2 keeps the newest two: {left}")
    check(open(os.path.join(work, "k", "latest")).read().strip() == "step-00000020", "latest points at the newest")


def case_corrupt(tera, config, corpus, work):
    train(tera, config, corpus, work, "full", "", ckpt(work, "c") + ["ckpt.every=5"])
    full = metrics(work, "full")
    root = os.path.join(work, "c")
    s20, s15, s10 = (os.path.join(root, f"step-{k:08d}") for k in (20, 15, 10))
    # Flip one byte in the middle of the newest tensor file.
    f20 = glob.glob(os.path.join(s20, "*.safetensors"))[0]
    data = bytearray(open(f20, "rb").read())
    data[len(data) // 2] ^= 0x40
    open(f20, "wb").write(data)
    r = subprocess.run([tera, "ckpt", "inspect", s20], capture_output=True, text=True)
    check(r.returncode != 0 and "checksum mismatch" in r.stdout, "ckpt inspect reports the flipped byte")
    r = train(tera, config, corpus, work, "bad", "", resume=s20, expect=2)
    check("checksum mismatch" in r.stderr and os.path.basename(f20) in r.stderr, "--resume DIR refuses a corrupt file, naming it")
    # Truncate the next one; auto falls back to step 10 with warnings for both.
    f15 = glob.glob(os.path.join(s15, "*.safetensors"))[0]
    os.truncate(f15, os.path.getsize(f15) // 2)
    r = train(tera, config, corpus, work, "fallback", "", ckpt(work, "c"), resume="auto")
    check(r.stdout.count("warning: skipping invalid checkpoint") == 2 and "at step 10" in r.stdout,
          "--resume auto skips the corrupt and truncated checkpoints with warnings")
    ok, why = same(full, metrics(work, "fallback"), exact=True)
    check(ok, f"fallback run continues bit-identically from step 10 ({why})")
    # Half-written meta.json.
    meta = os.path.join(s10, "meta.json")
    text = open(meta).read()
    open(meta, "w").write(text[: len(text) // 2])
    r = subprocess.run([tera, "ckpt", "inspect", s10], capture_output=True, text=True)
    check(r.returncode != 0 and "not valid JSON" in r.stderr, "a half-written meta.json is reported")
    open(meta, "w").write(text.replace('"version": 1', '"version": 99'))
    r = train(tera, config, corpus, work, "ver", "", resume=s10, expect=2)
    check("format version 99" in r.stderr, "another format version gets a clear message")
    open(meta, "w").write(text)
    r = train(tera, config, corpus, work, "shape", "", ["model.layers=2"], resume=s10, expect=2)
    check("model.layers: 4 in the checkpoint, 2 in the config" in r.stderr, "another model shape gets a clear message")
    r = train(tera, config, corpus, work, "gb", "", ["train.global_batch=8"], resume=s10, expect=2)
    check("global batch" in r.stderr, "another global batch gets a clear message")


SAVE = ["", "tp=2,dp=2,zero=1", "pp=2,dp=2,zero=3", "tp=2,pp=2,sp=true"]
LOAD = ["dp=4,zero=2", "tp=4", "pp=2,vpp=2,schedule=interleaved,dp=2,zero=0", "tp=2,pp=2,dp=2,zero=1"]


def case_reshard(tera, config, corpus, work):
    train(tera, config, corpus, work, "control")
    control = metrics(work, "control")
    for i, save in enumerate(SAVE):
        name = f"save{i}"
        train(tera, config, corpus, work, name, save, ckpt(work, name) + ["ckpt.every=10"])
        ok, why = same(control, metrics(work, name), exact=False)
        check(ok, f"saving run {save or '1 rank'} matches the control ({why})")
        d = os.path.join(work, name, "step-00000010")
        for j, load in enumerate(LOAD):
            got = f"load{i}_{j}"
            train(tera, config, corpus, work, got, load, resume=d)
            ok, why = same(control, metrics(work, got), exact=False)
            check(ok and min(metrics(work, got)) == 11, f"save {save or '1 rank':22s} -> load {load:45s} ({why})")
    # Offline: tera ckpt reshard, then a resume whose layout matches the files.
    src = os.path.join(work, "save1", "step-00000010")
    out = os.path.join(work, "resharded")
    r = subprocess.run([tera, "ckpt", "reshard", src, "--layout", "tp=1,pp=2,dp=1", "--out", out],
                       capture_output=True, text=True)
    check(r.returncode == 0 and sorted(os.listdir(os.path.join(out, "step-00000010"))) ==
          ["meta.json", "pp000-tp000.safetensors", "pp001-tp000.safetensors"], "ckpt reshard writes the pp=2 files")
    train(tera, config, corpus, work, "offline", "pp=2", ["ckpt.dir=" + out], resume="auto")
    ok, why = same(control, metrics(work, "offline"), exact=False)
    check(ok, f"resume from the offline-resharded checkpoint ({why})")
    # An uneven split (parallel.stage_layers) through the same layout check.
    out2 = os.path.join(work, "resharded-uneven")
    r = subprocess.run([tera, "ckpt", "reshard", src, "--layout", "tp=1,pp=2,dp=1,stage_layers=1/3", "--out", out2],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"ckpt reshard to stage_layers=1/3 ({r.stderr.strip()})")
    train(tera, config, corpus, work, "offline_uneven", "pp=2", ["ckpt.dir=" + out2, "parallel.stage_layers=[1, 3]"],
          resume="auto")
    ok, why = same(control, metrics(work, "offline_uneven"), exact=False)
    check(ok, f"resume from the checkpoint resharded to uneven stages ({why})")
    r = subprocess.run([tera, "ckpt", "reshard", src, "--layout", "tp=1,pp=2,stage_layers=2/1", "--out",
                        os.path.join(work, "bad")], capture_output=True, text=True)
    check(r.returncode == 2 and "parallel.stage_layers sums to 3 but model.layers = 4" in r.stderr,
          f"ckpt reshard refuses stage layers that do not add up, naming them ({r.stderr.strip()})")


def case_device(tera, config, corpus, work):
    steps = ["train.steps=6", "train.eval_every=3"]
    train(tera, config, corpus, work, "control", "", steps, env=dict(ENV, TERA_TEST_BACKEND=""))
    control = metrics(work, "control")
    emu = dict(ENV, TERA_TEST_BACKEND="gpu-emu")
    train(tera, config, corpus, work, "saved", "tp=2", steps + ckpt(work, "c") + ["ckpt.every=3"], env=emu)
    saved = metrics(work, "saved")
    ok, why = same(control, saved, exact=False)
    check(ok, f"gpu-emu tp=2 matches the cpu run ({why})")
    d = os.path.join(work, "c", "step-00000003")
    train(tera, config, corpus, work, "resumed", "tp=2", steps, resume=d, env=emu)
    ok, why = same(saved, metrics(work, "resumed"), exact=True)
    check(ok and min(metrics(work, "resumed")) == 4, f"gpu-emu resume in its layout: bit-identical ({why})")
    train(tera, config, corpus, work, "resharded", "dp=2,zero=3", steps, resume=d, env=emu)
    ok, why = same(control, metrics(work, "resharded"), exact=False)
    check(ok and min(metrics(work, "resharded")) == 4, f"gpu-emu tp=2 checkpoint resumed at dp=2 ZeRO-3 ({why})")


def rank_pids(root_pid):
    """Descendants of root_pid running tera."""
    out = subprocess.run(["ps", "-eo", "pid,ppid,comm"], capture_output=True, text=True).stdout.split("\n")[1:]
    children = {}
    for line in filter(None, out):
        pid, ppid, comm = line.split(None, 2)
        children.setdefault(int(ppid), []).append((int(pid), comm))
    found, stack = [], [root_pid]
    while stack:
        for pid, comm in children.get(stack.pop(), []):
            stack.append(pid)
            if comm.strip() == "tera":
                found.append(pid)
    return found


def wait_for_checkpoint(root, proc, min_step, timeout=300):
    t0 = time.time()
    while time.time() - t0 < timeout and proc.poll() is None:
        latest = os.path.join(root, "latest")
        if os.path.exists(latest) and int(open(latest).read().strip()[5:]) >= min_step:
            return True
        time.sleep(0.02)
    return False


# kill and preempt: long enough that the signal surely lands mid-run.
LONG = 200


# kill and preempt compare with an uninterrupted run of the same layout, which
# a resumed run reproduces bit for bit (over many steps float reduction order
# makes different layouts drift apart beyond the 20-step harness tolerance).
def case_kill(tera, config, corpus, work):
    layout = "tp=2,dp=2,zero=1"
    train(tera, config, corpus, work, "control", layout, [f"train.steps={LONG}"])
    control = metrics(work, "control")
    extra = ckpt(work, "c") + ["ckpt.every=5", f"train.steps={LONG}"]
    proc = subprocess.Popen(command(tera, config, corpus, work, "run", layout, extra), env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reached = wait_for_checkpoint(os.path.join(work, "c"), proc, 10)
    check(reached, "the 4-rank run wrote a checkpoint before the kill")
    pids = rank_pids(proc.pid)
    check(len(pids) == 4, f"found the 4 rank processes: {pids}")
    t0 = time.time()
    os.kill(pids[1], signal.SIGKILL)
    try:
        proc.communicate(timeout=60)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = None
    check(rc not in (0, None), f"the job exits non-zero after kill -9 (rc {rc}, {time.time() - t0:.1f} s)")
    train(tera, config, corpus, work, "resumed", layout, extra, resume="auto")
    got = metrics(work, "resumed")
    ok, why = same(control, got, exact=True)
    check(ok and max(got) == LONG, f"--resume auto finishes the run from step {min(got) - 1} ({why})")


def case_preempt(tera, config, corpus, work):
    layout = "pp=2,dp=2,zero=2"
    train(tera, config, corpus, work, "control", layout, [f"train.steps={LONG}"])
    control = metrics(work, "control")
    for how in ("sigterm-ranks", "sigusr1-mpirun"):
        root = os.path.join(work, how)
        extra = ["ckpt.dir=" + root, "ckpt.every=5", f"train.steps={LONG}"]
        proc = subprocess.Popen(command(tera, config, corpus, work, how, layout, extra), env=ENV,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        check(wait_for_checkpoint(root, proc, 5), f"{how}: the run is under way")
        if how == "sigterm-ranks":
            for pid in rank_pids(proc.pid):  # what Slurm does at a time limit
                os.kill(pid, signal.SIGTERM)
        else:
            os.kill(proc.pid, signal.SIGUSR1)  # mpirun forwards SIGUSR1 to every rank
        out, err = proc.communicate(timeout=120)
        stopped = int(open(os.path.join(root, "latest")).read().strip()[5:])
        check(proc.returncode == 0 and "preempted at step" in out and stopped < LONG,
              f"{how}: exit 0 with a checkpoint at step {stopped} (rc {proc.returncode}) {err[-3000:]}")
        train(tera, config, corpus, work, how + "-resumed", layout, extra, resume="auto")
        got = metrics(work, how + "-resumed")
        ok, why = same(control, got, exact=True)
        check(ok and min(got) == stopped + 1 and max(got) == LONG, f"{how}: resume finishes from step {stopped} ({why})")


def case_nonfinite(tera, config, corpus, work):
    train(tera, config, corpus, work, "control")
    control = metrics(work, "control")
    r = train(tera, config, corpus, work, "one", "tp=2,dp=2,zero=3", flags=["--test-nonfinite-steps", "3"])
    got = metrics(work, "one")
    check("step 3: non-finite loss or gradient (in wte)" in r.stdout and got[3]["skipped"],
          "a NaN gradient skips step 3 and names the parameter group")
    check(all(not got[s]["skipped"] for s in got if s != 3) and len(got) == 20, "training continues after one bad step")
    check(got[2]["loss"] == got[2]["loss"] and abs(got[2]["loss"] - control[2]["loss"]) < 1e-5 * control[2]["loss"],
          "steps before the bad one match the control")
    r = train(tera, config, corpus, work, "many", "", ckpt(work, "c") + ["train.max_bad_steps=3"],
              flags=["--test-nonfinite-steps", "4,5,6"], expect=1)
    check("3 consecutive steps had non-finite" in r.stdout and os.path.isdir(os.path.join(work, "c", "step-00000006")),
          "train.max_bad_steps consecutive bad steps stop the run with a checkpoint")
    # The checkpoint holds the last good parameters: resuming without the fault
    # gives step 7 the loss of a run whose steps 4-6 never updated.
    train(tera, config, corpus, work, "after", "", resume=os.path.join(work, "c", "step-00000006"))
    after = metrics(work, "after")
    check(min(after) == 7 and all(m["loss"] == m["loss"] for m in after.values()), "the run resumes from that checkpoint")


def case_init(tera, config, corpus, work):
    train(tera, config, corpus, work, "trained", "", ckpt(work, "c"))
    fresh = metrics(work, "trained")
    src = os.path.join(work, "c", "step-00000020")
    hf = os.path.join(work, "hf", "model.safetensors")
    r = subprocess.run([tera, "ckpt", "export", src, "--out", hf], capture_output=True, text=True)
    check(r.returncode == 0, "ckpt export " + r.stderr)
    first = {}
    for name, init in [("from_ckpt", src), ("from_final", os.path.join(work, "trained", "final")), ("from_hf", hf)]:
        train(tera, config, corpus, work, name, "tp=2,dp=2", ["ckpt.init=" + init, "train.steps=2"])
        first[name] = metrics(work, name)[1]["loss"]
    same_start = max(first.values()) - min(first.values()) <= 1e-6 * first["from_ckpt"]
    check(same_start, f"the three ckpt.init sources give the same first loss: {first}")
    check(first["from_ckpt"] < 0.8 * fresh[1]["loss"], f"and it is the trained model's ({first['from_ckpt']:.4f} vs "
          f"{fresh[1]['loss']:.4f} from scratch)")
    r = train(tera, config, corpus, work, "bad", "", ["ckpt.init=" + src, "model.hidden=64"], expect=2)
    check("another model" in r.stderr, "ckpt.init of another model shape is refused")


def main():
    tera, config, corpus, case = sys.argv[1:5]
    with tempfile.TemporaryDirectory() as work:
        globals()["case_" + case](tera, config, corpus, work)
    if failures:
        print(f"{len(failures)} failures")
        sys.exit(1)


if __name__ == "__main__":
    main()

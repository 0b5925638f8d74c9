#!/usr/bin/python3
"""Every subcommand that reads a model accepts the same sources (issue 15,
item 4): a training checkpoint ckpt.dir/step-N, a ckpt.dir (its latest valid
checkpoint), a tera-model directory (out.dir/final) and a safetensors file,
as a positional SOURCE (and --ckpt SOURCE where that flag existed).

One short run writes step-3 and step-6 checkpoints and final/ (the same
weights as step-6); ckpt export writes the safetensors file. Then, for each
source: generate and eval give the output final/ gives, ckpt export writes
the same bytes, ckpt import then generate gives the same text, ckpt inspect
names the kind, ckpt reshard takes the training checkpoints and refuses the
weights-only sources, and ckpt.init starts from the same loss.
With TERA_TEST_BACKEND set (cpu-guarded in CI), every train, generate and
eval runs on that kernel backend, and generate must print what the cpu
backend prints.
Usage: model_sources.py TERA CONFIG CORPUS"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

TERA, CONFIG, CORPUS = (os.path.abspath(a) for a in sys.argv[1:4])
ENV = dict(os.environ, OMP_NUM_THREADS="1")
BACKEND = os.environ.get("TERA_TEST_BACKEND", "")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def with_backend(args):
    """The arguments with the test backend chosen (train: its config key; generate, eval: --backend)."""
    if not BACKEND or not args:
        return list(args)
    if args[0] == "train":
        return list(args) + ["--set", f"train.backend={BACKEND}"]
    if args[0] in ("generate", "eval"):
        return list(args) + ["--backend", BACKEND]
    return list(args)


def tera(*args, expect=0, cwd=None, backend=True):
    if backend:
        args = tuple(with_backend(args))
    r = subprocess.run([TERA, *args], capture_output=True, text=True, errors="replace", env=ENV, cwd=cwd, timeout=300)
    check(r.returncode == expect, f"tera {' '.join(args)}: exit {r.returncode} (expected {expect})" +
          ("" if r.returncode == expect else "\n" + r.stdout + r.stderr))
    check("internal error" not in r.stderr, f"tera {args[0]}: no internal error")
    return r


def train(work, name, *sets):
    args = ["train", "-q", "-c", CONFIG, "--set", f"data.train={CORPUS}", "--set", f"out.dir={work}/{name}",
            "--metrics", f"{work}/{name}.jsonl"]
    for s in sets:
        args += ["--set", s]
    tera(*args)
    return [json.loads(l) for l in open(f"{work}/{name}.jsonl")]


def main():
    work = tempfile.mkdtemp(prefix="tera-sources-")
    try:
        run(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"{len(failures)} check(s) failed", flush=True)
        sys.exit(1)


def run(work):
    root = f"{work}/ckpt"
    train(work, "trained", f"ckpt.dir={root}", "ckpt.every=3", "ckpt.keep=5", "train.steps=6")
    step3, step6, final = f"{root}/step-00000003", f"{root}/step-00000006", f"{work}/trained/final"
    check(os.path.isdir(step3) and os.path.isdir(step6) and os.path.isdir(final), "the run wrote step-3, step-6, final/")
    st = f"{work}/hf/model.safetensors"
    tera("ckpt", "export", final, "--out", st)
    sources = {"step-N": step6, "ckpt.dir": root, "final/": final, "safetensors": st}

    # generate: positional and --ckpt, greedy and sampled; every source as final/.
    gen = ["--prompt", "The ", "-n", "16", "--seed", "5", "--ids"]
    greedy = ["--prompt", "a", "-n", "16", "-t", "0", "--ids"]
    want_gen, want_greedy = tera("generate", final, *gen).stdout, tera("generate", "--ckpt", final, *greedy).stdout
    if BACKEND:
        check(tera("generate", final, *gen, backend=False).stdout == want_gen,
              f"generate on {BACKEND} prints what the cpu backend prints")
    check(len(want_gen.strip().splitlines()[-1].split()) == 16, "generate printed 16 ids")
    for kind, src in sources.items():
        check(tera("generate", src, *gen).stdout == want_gen, f"generate {kind}: the text final/ gives")
        check(tera("generate", "--ckpt", src, *greedy).stdout == want_greedy, f"generate --ckpt {kind}: greedy as final/")
    other = tera("generate", step3, *gen).stdout
    check(other != want_gen, "generate step-3 differs from step-6 (the checkpoint is really read)")

    # eval over the whole file: the same val_loss (the micro-batch the run
    # recorded; a safetensors file records none, so its windows are batched
    # differently and the fp32 sums agree to a relative 1e-5).
    def loss(r):
        last = r.stdout.strip().splitlines()[-1]
        return float(last.split("=")[1]) if last.startswith("val_loss=") else float("nan")
    want = loss(tera("eval", final, "--data", CORPUS))
    check(0 < want < 6, f"eval final/: val_loss {want}")
    for kind, src in sources.items():
        got = loss(tera("eval", src, "--data", CORPUS))
        if kind == "safetensors":
            check(abs(got - want) <= 1e-5 * want, f"eval {kind}: val_loss {got} ~ {want}")
        else:
            check(got == want, f"eval {kind}: val_loss {got} == {want}")
        got = loss(tera("eval", "--ckpt", src, "--data", CORPUS))
        check(abs(got - want) <= 1e-5 * want, f"eval --ckpt {kind}: val_loss {got}")
    check(loss(tera("eval", step3, "--data", CORPUS)) != want, "eval step-3 differs from step-6")

    # ckpt export: the same file from every source; import then generate.
    want_bytes = open(st, "rb").read()
    for i, (kind, src) in enumerate(sources.items()):
        out = f"{work}/export{i}/model.safetensors"
        tera("ckpt", "export", src, "--out", out)
        check(os.path.exists(out) and open(out, "rb").read() == want_bytes, f"ckpt export {kind}: the same bytes")
        imported = f"{work}/import{i}"
        tera("ckpt", "import", src, "--out", imported)
        check(os.path.isfile(f"{imported}/meta.json"), f"ckpt import {kind}: a tera-model directory")
        check(tera("generate", imported, *gen).stdout == want_gen, f"ckpt import {kind}, then generate: the same text")

    # ckpt inspect names the kind; a ckpt.dir lists its checkpoints.
    check("tera-checkpoint" in tera("ckpt", "inspect", step6).stdout, "ckpt inspect step-N")
    r = tera("ckpt", "inspect", root).stdout
    check("2 checkpoints" in r and "step-00000006  valid" in r, "ckpt inspect ckpt.dir lists its checkpoints")
    check("tera-model" in tera("ckpt", "inspect", final).stdout, "ckpt inspect final/")
    r = tera("ckpt", "inspect", st).stdout
    check("safetensors" in r and "Hugging Face" in r, "ckpt inspect safetensors")

    # ckpt reshard: training checkpoints (a ckpt.dir: its latest), not weights-only sources.
    for kind, src in (("step-N", step6), ("ckpt.dir", root)):
        out = f"{work}/re-{kind.replace('/', '')}"
        tera("ckpt", "reshard", src, "--layout", "tp=2", "--out", out)
        check(os.path.isdir(f"{out}/step-00000006"), f"ckpt reshard {kind}: step-6 written")
        check(tera("generate", f"{out}/step-00000006", *gen).stdout == want_gen, f"ckpt reshard {kind}: the same model")
    for kind in ("final/", "safetensors"):
        r = tera("ckpt", "reshard", sources[kind], "--layout", "tp=2", "--out", f"{work}/re-bad", expect=2)
        check("weights only" in r.stderr and "ckpt.init" in r.stderr, f"ckpt reshard {kind}: refused, naming ckpt.init")

    # ckpt.init: every source starts from the same loss.
    first = {}
    for kind, src in sources.items():
        rows = train(work, "init-" + kind.replace("/", "").replace(".", ""), f"ckpt.init={src}", "train.steps=1")
        first[kind] = rows[0]["loss"]
    check(len(set(first.values())) == 1, f"ckpt.init: the same first loss from every source {first}")

    # Not a source: every subcommand exits 2 naming the path and the kinds accepted.
    empty = f"{work}/empty"
    os.makedirs(empty)
    for bad in (f"{work}/missing", empty):
        for args in (["generate", bad, "--prompt", "a"], ["eval", bad, "--data", CORPUS],
                     ["ckpt", "export", bad, "--out", f"{work}/x/m.safetensors"],
                     ["ckpt", "import", bad, "--out", f"{work}/x/imp"], ["ckpt", "inspect", bad],
                     ["ckpt", "reshard", bad, "--layout", "tp=2", "--out", f"{work}/x/re"]):
            r = tera(*args, expect=2)
            check(bad in r.stderr and ("not a" in r.stderr or "neither" in r.stderr), f"{' '.join(args[:2])} {os.path.basename(bad)}: named")
    # A ckpt.dir whose newest checkpoint is corrupt means its newest valid one (step-3).
    shard = f"{step6}/pp000-tp000.safetensors"
    with open(shard, "r+b") as f:
        f.seek(-5, 2)
        byte = f.read(1)
        f.seek(-5, 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    check(tera("generate", root, *gen).stdout == other, "generate ckpt.dir with a corrupt step-6: step-3's text")
    tera("generate", step6, *gen, expect=2)

    r = tera("generate", "--prompt", "a", expect=2)
    check("SOURCE" in r.stderr, "generate without a source: exit 2, asks for SOURCE")
    r = tera("generate", final, "--ckpt", final, "--prompt", "a", expect=2)
    check("excludes" in r.stderr, "generate SOURCE and --ckpt together: refused")


if __name__ == "__main__":
    main()

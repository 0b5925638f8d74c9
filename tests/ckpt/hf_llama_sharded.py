#!/usr/bin/python3
"""Sharded bf16 Hugging Face Llama checkpoints with Llama 3.1's rope_scaling
(issue 38, part 5), end to end:

  1. a small Llama with model.rope_scaling = "llama3" trains 6 steps (the
     scaling's bands chosen so that its head size of 8 has a kept pair, a
     smoothed pair and two stretched ones);
  2. `tera ckpt export --dtype bf16 --max-shard-size 64KB` writes shards
     model-0000i-of-0000N.safetensors + model.safetensors.index.json (no
     single file), every shard within 64 KB of tensor bytes unless it holds
     one tensor, config.json with rope_scaling and torch_dtype bfloat16;
  3. PyTorch's Llama forward (export_parity.py, float64, transformers'
     llama3 frequencies) on the shards matches
       (a) tera's logits of the export's import (the same bf16 weights,
           widened exactly): within export_parity's fp32 bound, 1e-4 relative;
       (b) tera's logits of the fp32 checkpoint: within 1e-4 relative plus
           the first-order effect of the bf16 rounding, J (w_bf16 - w),
           computed by forward-mode differentiation of the PyTorch forward
           (the remainder is checked to be second order);
  4. the import is the bf16 weights exactly (generate from the index prints
     what the import prints), and ckpt.init from the index
     trains 3 steps and exports again (sharded, bf16), which imports;
     a run without the scaling is refused naming rope_scaling;
  5. an index naming a missing shard, or a tensor twice, or a shard outside
     its directory, exits 2 naming the index and both entries.
Usage: hf_llama_sharded.py TERA LOGITS_DUMP CONFIG CORPUS   (Debian's /usr/bin/python3 + python3-torch)"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
from safetensors_torch import read_safetensors, read_safetensors_file  # noqa: E402
from export_parity import llama_forward  # noqa: E402

TERA, DUMP, CONFIG, CORPUS = (os.path.abspath(a) for a in sys.argv[1:5])
BACKEND = os.environ.get("TERA_TEST_BACKEND", "")
SHARD = 64000  # --max-shard-size 64KB (10^3, as Hugging Face)
# Llama 3.1's scaling with a small original context: head size 8 has
# wavelengths 6.3, 63, 628 and 6283 positions; bands below 256 / 8 = 32 are
# kept, above 256 / 1 stretched by 8, between smoothed: each kind occurs.
ROPE = ["--set", "model.rope_scaling=llama3", "--set", "model.rope_factor=8", "--set", "model.rope_low_freq_factor=1",
        "--set", "model.rope_high_freq_factor=8", "--set", "model.rope_original_seq_len=256"]
from cli_checks import ENV, check, failures, finish, run  # noqa: E402,F401


def logits(path):
    D, _ = read_safetensors(path)
    return D["tokens"], D["logits"].double()


def main():
    work = tempfile.mkdtemp(prefix="tera_hf_sharded_")
    try:
        body(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    finish()


def check_export(d, what):
    """The sharded bf16 export in directory d: returns (index path, tensors, config)."""
    index = os.path.join(d, "model.safetensors.index.json")
    shards = sorted(glob.glob(os.path.join(d, "model-*-of-*.safetensors")))
    check(os.path.exists(index) and not os.path.exists(os.path.join(d, "model.safetensors")),
          f"{what}: model.safetensors.index.json, no single file")
    n = len(shards)
    check(n >= 3 and [os.path.basename(s) for s in shards] ==
          [f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)], f"{what}: {n} shards named as Hugging Face names them")
    total = 0
    for s in shards:
        T, _ = read_safetensors_file(s)
        b = sum(t.numel() * t.element_size() for t in T.values())
        total += b
        check(all(t.dtype == torch.bfloat16 for t in T.values()), f"  {os.path.basename(s)}: bf16 tensors")
        check(b <= SHARD or len(T) == 1, f"  {os.path.basename(s)}: {b} tensor bytes <= {SHARD} (or one tensor)")
    ix = json.load(open(index))
    check(ix["metadata"]["total_size"] == total, f"{what}: index total_size = the shards' tensor bytes ({total})")
    P, _ = read_safetensors(index)  # checks every tensor is where weight_map says, once
    cfg = json.load(open(os.path.join(d, "config.json")))
    check(cfg["torch_dtype"] == "bfloat16", f"{what}: config.json torch_dtype bfloat16")
    check(cfg["rope_scaling"] == {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 8.0,
                                  "original_max_position_embeddings": 256}, f"{what}: config.json rope_scaling llama3")
    return index, P, cfg


def body(work):
    backend = ["--set", f"train.backend={BACKEND}"] if BACKEND else []
    dump_args = [BACKEND] if BACKEND else []
    train = [TERA, "train", "-q", "-c", CONFIG, "--set", f"data.train={CORPUS}"] + backend
    run(train + ROPE + ["--set", f"out.dir={work}/run", "--set", f"ckpt.dir={work}/ckpt", "--set", "train.steps=6"])
    step = os.path.join(work, "ckpt", "step-00000006")
    run([TERA, "ckpt", "inspect", step], must_say=["rope_scaling llama3 (factor 8, low 1, high 8, original 256)"])
    r = run([TERA, "ckpt", "export", step, "--out", f"{work}/hf/model.safetensors", "--dtype", "bf16",
             "--max-shard-size", "64KB"], must_say=["shards", "model.safetensors.index.json", "bf16"])
    index, P, cfg = check_export(f"{work}/hf", "export")

    # (a) The export's weights as tera imports them: PyTorch on the shards
    # matches tera's logits within export_parity's fp32 bound.
    run([TERA, "ckpt", "import", index, "--out", f"{work}/imported"], must_say=["llama"])
    run([DUMP, f"{work}/imported", f"{work}/logits_imported.safetensors"] + dump_args)
    r = run(["/usr/bin/python3", os.path.join(HERE, "export_parity.py"), index, f"{work}/logits_imported.safetensors"])
    print("  (a) " + r.stdout.strip())
    run([DUMP, index, f"{work}/logits_index.safetensors"] + dump_args)
    check(torch.equal(logits(f"{work}/logits_index.safetensors")[1], logits(f"{work}/logits_imported.safetensors")[1]),
          "the index read directly gives its import's logits, bit for bit")

    # (b) Against the fp32 checkpoint: the bf16 rounding's first-order effect bounds the gap.
    run([DUMP, step, f"{work}/logits.safetensors"] + dump_args)
    tokens, tera32 = logits(f"{work}/logits.safetensors")
    run([TERA, "ckpt", "export", step, "--out", f"{work}/hf32/model.safetensors"])
    W32, _ = read_safetensors(f"{work}/hf32/model.safetensors")
    names = sorted(W32)
    w = tuple(W32[n].double() for n in names)
    dw = tuple(P[n].double() - W32[n].double() for n in names)
    rel = max((d.abs() / w_.abs().clamp_min(1e-30)).max().item() for d, w_ in zip(dw, w))
    check(rel <= 2.0 ** -8, f"every bf16 weight within half a bf16 ulp (relative {rel:.2e} <= 2^-8)")
    f = lambda *ws: llama_forward(dict(zip(names, ws)), cfg, tokens)
    z32, jdw = torch.autograd.functional.jvp(f, w, dw)
    zbf = llama_forward(P, cfg, tokens)
    scale = tera32.abs().max().item()
    first = jdw.abs().max().item()
    second = (zbf - z32 - jdw).abs().max().item()
    check(second <= 0.1 * first, f"bf16 rounding acts to first order: remainder {second:.2e} <= 0.1 x {first:.2e}")
    gap = (zbf - tera32).abs().max().item()
    bound = 1e-4 * scale + first + second
    print(f"  (b) logits {list(tera32.shape)}: max |torch(bf16 export) - tera(fp32 checkpoint)| = {gap:.3e}; bound "
          f"1e-4 x {scale:.3g} + |J dw| {first:.3e} + remainder {second:.1e} = {bound:.3e} (relative {gap / scale:.2e})")
    check(gap <= bound, "(b) PyTorch on the bf16 export vs tera's fp32 logits: within the derived bound")

    # The import holds the bf16 weights exactly (widened), and trains from the index.
    run([TERA, "ckpt", "export", f"{work}/imported", "--out", f"{work}/back/model.safetensors"])
    back, _ = read_safetensors(f"{work}/back/model.safetensors")
    check(set(back) == set(P) and all(torch.equal(back[n], P[n].float()) for n in P), "import: each weight is the bf16 value, exactly")
    run([TERA, "ckpt", "inspect", index], must_say=["Hugging Face Llama", "shards"])
    gen_backend = ["--backend", BACKEND] if BACKEND else []
    a = run([TERA, "generate", "--ckpt", index, "--prompt", "The ", "--tokens", "8", "--seed", "3"] + gen_backend)
    b = run([TERA, "generate", "--ckpt", f"{work}/imported", "--prompt", "The ", "--tokens", "8", "--seed", "3"] + gen_backend)
    check(a.stdout == b.stdout and a.stdout.strip() != "", "generate from the index prints what its import prints")
    run(train + ROPE + ["--set", f"out.dir={work}/init", "--set", f"ckpt.dir={work}/init_ckpt", "--set", "train.steps=3",
                        "--set", f"ckpt.init={index}"])
    run([TERA, "ckpt", "export", f"{work}/init/final", "--out", f"{work}/hf2/model.safetensors", "--dtype", "bf16",
         "--max-shard-size", "64KB"])
    index2, P2, _ = check_export(f"{work}/hf2", "re-export after training")
    check(any(not torch.equal(P2[n], P[n]) for n in P), "training moved the weights")
    run([TERA, "ckpt", "import", index2, "--out", f"{work}/imported2"])
    run(train + ["--set", f"out.dir={work}/init_plain", "--set", "train.steps=1", "--set", f"ckpt.init={index}"],
        expect=2, must_say=["ckpt.init", "rope_scaling"])
    run(train + ROPE + ["--set", "model.rope_factor=4", "--set", f"out.dir={work}/init_f4", "--set", "train.steps=1",
                        "--set", f"ckpt.init={index}"], expect=2, must_say=["rope_factor"])

    # Indexes that lie about their shards.
    bad = os.path.join(work, "bad")
    shutil.copytree(f"{work}/hf", bad)
    ix = json.load(open(f"{bad}/model.safetensors.index.json"))
    wm = ix["weight_map"]
    first_shard = wm["model.embed_tokens.weight"]
    cases = [
        ("missing_shard", json.dumps(dict(ix, weight_map=dict(wm, **{"model.norm.weight": "model-00099-of-00099.safetensors"}))),
         ["model.safetensors.index.json", "model-00099-of-00099.safetensors", "missing", "model.norm.weight"]),
        # A tensor named twice: JSON's duplicate key, text spliced in by hand.
        ("twice", json.dumps(ix).replace('"weight_map": {', '"weight_map": {"model.norm.weight": "' + first_shard + '", ', 1),
         ["model.safetensors.index.json", "model.norm.weight", "twice", first_shard, wm["model.norm.weight"]]),
        ("traversal", json.dumps(dict(ix, weight_map=dict(wm, **{"model.norm.weight": "../hf/" + wm["model.norm.weight"]}))),
         ["model.safetensors.index.json", "plain file name", "model.norm.weight"]),
    ]
    for name, text, says in cases:
        d = os.path.join(work, "bad_" + name)
        shutil.copytree(bad, d)
        open(f"{d}/model.safetensors.index.json", "w").write(text)
        print(f"case {name}:")
        run([TERA, "ckpt", "import", f"{d}/model.safetensors.index.json", "--out", f"{work}/out_{name}"], expect=2, must_say=says)
        check(not os.path.exists(f"{work}/out_{name}"), "  nothing written")
        run(train + ROPE + ["--set", f"out.dir={work}/tr_{name}", "--set", "train.steps=1",
                            "--set", f"ckpt.init={d}/model.safetensors.index.json"], expect=2, must_say=says[:2])


if __name__ == "__main__":
    main()

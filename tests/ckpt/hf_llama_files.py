#!/usr/bin/python3
"""Hugging Face Llama interoperability (issue 20, item 4), end to end.

A short run of a small grouped-query Llama writes a checkpoint; `tera ckpt
export` writes it with Hugging Face Llama names and config.json; then
  - export_parity.py runs the export through a Llama forward written in
    PyTorch (float64) and matches tera's logits within 1e-4 relative;
  - `tera ckpt import` of the export gives a tera-model whose logits equal the
    checkpoint's bit for bit, and ckpt.init from the file trains;
  - a bf16 copy of the file (what Hugging Face publishes) imports;
  - files whose tensors do not match their config.json are refused with exit 2
    and a message naming the field.
Usage: hf_llama_files.py TERA LOGITS_DUMP CONFIG CORPUS   (Debian's /usr/bin/python3 + python3-torch)"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from safetensors_torch import read_safetensors  # noqa: E402

TERA, DUMP, CONFIG, CORPUS = (os.path.abspath(a) for a in sys.argv[1:5])
BACKEND = os.environ.get("TERA_TEST_BACKEND", "")
from cli_checks import ENV, check, failures, finish, run  # noqa: E402,F401


def write_safetensors(path, tensors):
    """tensors: name -> torch tensor (float32 or bfloat16), written in safetensors layout."""
    header, blobs, off = {}, [], 0
    names = {torch.float32: "F32", torch.bfloat16: "BF16"}
    for name, t in tensors.items():
        t = t.contiguous()
        raw = t.view(torch.int16).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def variant(work, name, tensors, cfg):
    """A directory holding model.safetensors and config.json; returns the file's path."""
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    write_safetensors(os.path.join(d, "model.safetensors"), tensors)
    if cfg is not None:
        json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=2)
    return os.path.join(d, "model.safetensors")


def main():
    work = tempfile.mkdtemp(prefix="tera_hf_llama_")
    try:
        body(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    finish()


def body(work):
    backend = ["--set", f"train.backend={BACKEND}"] if BACKEND else []
    train = [TERA, "train", "-q", "-c", CONFIG, "--set", f"data.train={CORPUS}"] + backend
    run(train + ["--set", f"out.dir={work}/run", "--set", f"ckpt.dir={work}/ckpt", "--set", "train.steps=6"])
    step = os.path.join(work, "ckpt", "step-00000006")
    hf = os.path.join(work, "hf", "model.safetensors")
    run([TERA, "ckpt", "export", step, "--out", hf], must_say=["Hugging Face Llama names"])
    cfg = json.load(open(os.path.join(work, "hf", "config.json")))
    check(cfg["model_type"] == "llama" and cfg["architectures"] == ["LlamaForCausalLM"], "config.json is a LlamaConfig")
    P, _ = read_safetensors(hf)
    check("lm_head.weight" in P and not cfg["tie_word_embeddings"], "untied: lm_head.weight stored, tie_word_embeddings false")
    check(not any(".c_attn." in n or n.startswith("h.") for n in P), "no tera names in the export")

    dump_args = [BACKEND] if BACKEND else []
    run([DUMP, step, f"{work}/logits.safetensors"] + dump_args)
    r = run(["/usr/bin/python3", os.path.join(HERE, "export_parity.py"), hf, f"{work}/logits.safetensors"])
    print("  " + r.stdout.strip())

    # Import, and the imported model computes the same logits bit for bit.
    run([TERA, "ckpt", "import", hf, "--out", f"{work}/imported"], must_say=["llama", "kv)"])
    run([DUMP, f"{work}/imported", f"{work}/logits_imported.safetensors"] + dump_args)
    a, _ = read_safetensors(f"{work}/logits.safetensors")
    b, _ = read_safetensors(f"{work}/logits_imported.safetensors")
    check(torch.equal(a["logits"], b["logits"]), "imported export: the checkpoint's logits, bit for bit")
    run([TERA, "ckpt", "inspect", hf], must_say=["Hugging Face Llama", "llama"])
    gen_backend = ["--backend", BACKEND] if BACKEND else []
    a = run([TERA, "generate", "--ckpt", hf, "--prompt", "The ", "--tokens", "8", "--seed", "3"] + gen_backend)
    b = run([TERA, "generate", "--ckpt", step, "--prompt", "The ", "--tokens", "8", "--seed", "3"] + gen_backend)
    check(a.stdout == b.stdout and a.stdout.strip() != "", "generate from the export prints what the checkpoint prints")

    # ckpt.init from the Hugging Face file (run with another context length:
    # no Llama weight depends on it), and from its import.
    run(train + ["--set", f"out.dir={work}/init", "--set", "train.steps=2", "--set", f"ckpt.init={hf}",
                 "--set", "model.seq_len=24"])
    run(train + ["--set", f"out.dir={work}/init2", "--set", "train.steps=2", "--set", f"ckpt.init={work}/imported"])
    run(train + ["--set", f"out.dir={work}/init3", "--set", "train.steps=2", "--set", f"ckpt.init={hf}",
                 "--set", "model.norm_eps=1e-6"], expect=2, must_say=["ckpt.init", "norm_eps"])

    # A bf16 file, as Hugging Face publishes: imports (fp32 from bf16 exactly).
    bf = variant(work, "bf16", {n: t.to(torch.bfloat16) for n, t in P.items()}, cfg)
    run([TERA, "ckpt", "import", bf, "--out", f"{work}/imported_bf16"])
    run([TERA, "ckpt", "export", f"{work}/imported_bf16", "--out", f"{work}/bf16_back/model.safetensors"])
    back, _ = read_safetensors(f"{work}/bf16_back/model.safetensors")
    check(all(torch.equal(back[n], P[n].to(torch.bfloat16).float()) for n in P), "bf16 import: each weight is the bf16 value")

    # Files that do not match their config.json.
    L = cfg["num_hidden_layers"]
    bad = [
        ("no_config", P, None, ["config.json"]),
        ("kv_heads", P, dict(cfg, num_key_value_heads=cfg["num_attention_heads"]), ["num_key_value_heads", "k_proj"]),
        ("fewer_layers", P, dict(cfg, num_hidden_layers=L - 1), ["num_hidden_layers", f"model.layers.{L - 1}."]),
        ("more_layers", P, dict(cfg, num_hidden_layers=L + 1), [f"model.layers.{L}."]),
        ("hidden", P, dict(cfg, hidden_size=cfg["hidden_size"] + cfg["num_attention_heads"] * 2, head_dim=None),
         ["config.json", "disagree"]),
        ("head_dim", P, dict(cfg, head_dim=cfg["head_dim"] * 2), ["head_dim", "hidden_size / num_attention_heads"]),
        ("ffn", P, dict(cfg, intermediate_size=cfg["intermediate_size"] + 1), ["up_proj", "disagree"]),
        ("rope_scaling", P, dict(cfg, rope_scaling={"rope_type": "yarn", "factor": 8.0}), ["rope_scaling", "yarn", "llama3"]),
        ("rope_scaling_partial", P, dict(cfg, rope_scaling={"rope_type": "llama3", "factor": 8.0}),
         ["rope_scaling", "low_freq_factor"]),
        ("tied_but_differs", P, dict(cfg, tie_word_embeddings=True), ["lm_head.weight", "tie_word_embeddings"]),
        ("untied_no_head", {n: t for n, t in P.items() if n != "lm_head.weight"}, cfg, ["tie_word_embeddings", "lm_head.weight"]),
        ("heads_indivisible", P, dict(cfg, num_key_value_heads=4), ["num_key_value_heads", "num_attention_heads"]),
        ("bias", P, dict(cfg, attention_bias=True), ["attention_bias"]),
    ]
    for name, tensors, c, says in bad:
        f = variant(work, "bad_" + name, tensors, c)
        print(f"case {name}:")
        run([TERA, "ckpt", "import", f, "--out", f"{work}/out_{name}"], expect=2, must_say=says)
        check(not os.path.exists(f"{work}/out_{name}"), "  nothing written")


if __name__ == "__main__":
    main()

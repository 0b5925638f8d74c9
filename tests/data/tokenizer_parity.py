#!/usr/bin/python3
"""Tokenizer parity test driver. Installs the references (npm
@huggingface/tokenizers and js-tiktoken, pinned by package-lock.json) into
the build tree with `npm ci`, has reference.mjs write cl100k_base's ranks,
three tokenizer.json files (Llama 3, Qwen2 and GPT-2 style) and the corpus,
has tera convert the rank file into a fourth tokenizer.json (`tera tokenize
convert`, so Hugging Face reads what tera writes), has the references encode
the corpus with each, then runs test_tokenizer_parity, which compares tera's
ids with theirs. Fails, never skips, when node or npm is missing: scripts/setup
installs them.
Usage: tokenizer_parity.py TEST_BINARY TERA REFERENCE_SRC_DIR WORK_DIR [TEXT_FILE...]"""
import json
import os
import shutil
import subprocess
import sys

PACKAGES = ("@huggingface/tokenizers", "js-tiktoken")
SPECIALS = ["<|begin_of_text|>=100256", "<|endoftext|>=100257", "<|fim_prefix|>=100258", "<|fim_middle|>=100259",
            "<|fim_suffix|>=100260", "<|endofprompt|>=100276"]


def fail(msg):
    print("tokenizer_parity: FAILED: " + msg, file=sys.stderr)
    return 1


def installed(work, lock):
    for p in PACKAGES:
        path = os.path.join(work, "node_modules", p, "package.json")
        if not os.path.isfile(path) or json.load(open(path))["version"] != lock["node_modules/" + p]["version"]:
            return False
    return True


def main():
    binary, tera, src, work = (os.path.abspath(a) for a in sys.argv[1:5])
    files = [os.path.abspath(f) for f in sys.argv[5:]]
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        return fail("node and npm are required for the reference tokenizers; run scripts/setup")
    os.makedirs(work, exist_ok=True)
    for name in ("package.json", "package-lock.json", "reference.mjs"):
        shutil.copyfile(os.path.join(src, name), os.path.join(work, name))
    lock = json.load(open(os.path.join(src, "package-lock.json")))["packages"]
    if not installed(work, lock):
        r = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=work, timeout=600)
        if r.returncode != 0:
            return fail(f"npm ci in {work} exited {r.returncode}")
    out = os.path.join(work, "out")
    if subprocess.run([node, "reference.mjs", "make", out, *files], cwd=work, timeout=300).returncode != 0:
        return fail("reference.mjs make did not run")
    convert = [tera, "tokenize", "convert", "--tokenizer", os.path.join(out, "cl100k_base.tiktoken"),
               "--pattern", "cl100k", "--out", os.path.join(out, "tera_converted.json"), "--force"]
    for s in SPECIALS:
        convert += ["--special", s]
    r = subprocess.run(convert, timeout=300, capture_output=True, text=True)
    print(r.stdout, end="")
    if r.returncode != 0:
        return fail("tera tokenize convert exited %d: %s" % (r.returncode, r.stderr))
    names = ["llama3_style.json", "qwen2_style.json", "gpt2_style.json", "tera_converted.json"]
    if subprocess.run([node, "reference.mjs", "encode", out, *names], cwd=work, timeout=600).returncode != 0:
        return fail("reference.mjs encode did not run")
    return subprocess.run([binary, out], timeout=600).returncode


if __name__ == "__main__":
    sys.exit(main())

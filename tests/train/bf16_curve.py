#!/usr/bin/python3
"""bf16 tracks fp32 (issue 17): trains CONFIG for its steps in both
precisions on the same data and seed and compares the per-step training
losses after warmup. Fails if the largest relative gap exceeds 2%, if the two
curves are identical (then bf16 was not in effect), or if the loss did not
fall. Prints the largest and the mean gap.

usage: bf16_curve.py TERA CONFIG CORPUS
It trains on Debian's copy of the GPL (35 KB of text, in base-files) when
present, else on CORPUS.
"""
import json
import os
import subprocess
import sys
import tempfile

GPL = "/usr/share/common-licenses/GPL-3"


def run(tera, config, corpus, precision, work):
    metrics = os.path.join(work, precision + ".jsonl")
    args = [tera, "train", "-c", config, "-q", "--metrics", metrics, "--set", f"data.train={corpus}",
            "--set", f"out.dir={os.path.join(work, precision)}", "--set", f"train.precision={precision}"]
    r = subprocess.run(args, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="2"), timeout=800)
    if r.returncode != 0:
        sys.exit(f"{precision}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
    rows = [json.loads(line) for line in open(metrics)]
    return [row for row in rows if "loss" in row]


def main():
    tera, config = sys.argv[1], sys.argv[2]
    corpus = GPL if os.path.exists(GPL) else sys.argv[3]
    warmup = 20
    with tempfile.TemporaryDirectory() as work:
        fp32 = run(tera, config, corpus, "fp32", work)
        bf16 = run(tera, config, corpus, "bf16", work)
    assert len(fp32) == len(bf16) and len(fp32) > warmup, "both runs log every step"
    gaps = [abs(b["loss"] - f["loss"]) / f["loss"] for f, b in zip(fp32, bf16) if f["step"] > warmup]
    worst = max(range(len(gaps)), key=lambda i: gaps[i])
    print(f"corpus {corpus}; {len(fp32)} steps; loss fp32 {fp32[0]['loss']:.4f} -> {fp32[-1]['loss']:.4f}, "
          f"bf16 {bf16[0]['loss']:.4f} -> {bf16[-1]['loss']:.4f}")
    print(f"after warmup: largest relative gap {gaps[worst]:.2e} (step {worst + warmup + 1}), "
          f"mean {sum(gaps) / len(gaps):.2e}")
    val = [(f.get("val_loss"), b.get("val_loss")) for f, b in zip(fp32, bf16) if "val_loss" in f]
    for f, b in val:
        print(f"val_loss fp32 {f:.4f} bf16 {b:.4f} (gap {abs(b - f) / f:.2e})")
    if gaps[worst] > 0.02:
        sys.exit("FAIL: bf16 leaves the fp32 curve by more than 2%")
    if max(gaps) == 0:
        sys.exit("FAIL: the curves are identical: bf16 was not in effect")
    if not fp32[-1]["loss"] < 0.7 * fp32[0]["loss"]:
        sys.exit("FAIL: the loss did not fall; the comparison says nothing")
    print("ok: bf16 tracks fp32 within 2%")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""End-to-end tests of the tera command line: exit codes, messages, train ->
checkpoint -> eval / generate. Usage: test_cli.py TERA_BINARY CORPUS_FILE"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

TERA = os.path.abspath(sys.argv[1])
CORPUS = os.path.abspath(sys.argv[2])

TINY = f"""
[model]
layers = 1
hidden = 16
heads = 2
seq_len = 16
vocab = 256

[train]
steps = 6
micro_batch = 2
global_batch = 4
lr = 3e-3
warmup = 2
eval_every = 3
eval_sequences = 4

[data]
train = "{CORPUS}"
"""


def run(*args, cwd=None):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([TERA, *args], capture_output=True, text=True, errors="replace", cwd=cwd, env=env,
                          timeout=120)


class Cli(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def expect_bad_input(self, args, needle):
        r = run(*args, cwd=self.dir)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn(needle, r.stderr)
        self.assertNotIn("internal error", r.stderr)
        return r

    def test_help_and_version(self):
        r = run("--help")
        self.assertEqual(r.returncode, 0)
        for sub in ("train", "generate", "eval", "version"):
            self.assertIn(sub, r.stdout)
        r = run("version")
        self.assertEqual(r.returncode, 0)
        self.assertIn("tera ", r.stdout)
        self.assertIn("oneDNN", r.stdout)

    def test_usage_errors_exit_2(self):
        self.expect_bad_input(["train"], "--config is required")
        self.expect_bad_input(["frobnicate"], "unknown command 'frobnicate'")
        self.expect_bad_input(["generate", "--ckpt", "x"], "--prompt is required")

    def test_config_errors_exit_2_with_the_key(self):
        cfg = self.write("cfg.toml", TINY)
        self.expect_bad_input(["train", "-c", "missing.toml"], "missing.toml: config file not found")
        self.expect_bad_input(["train", "-c", cfg, "--set", "train.stpes=3"], "did you mean 'train.steps'")
        self.expect_bad_input(["train", "-c", cfg, "--set", "model.heads=3"], "model.heads = 3 does not divide model.hidden = 16")
        self.expect_bad_input(["train", "-c", cfg, "--set", "train.global_batch=3"], "not a multiple of train.micro_batch")
        self.expect_bad_input(["train", "-c", cfg, "--set", "data.train=nope.txt"], 'data.train = "nope.txt": no such file')
        self.expect_bad_input(["train", "-c", cfg, "--set", "model.vocab=100"], "model.vocab = 100 is smaller")
        self.expect_bad_input(["train", "-c", cfg, "--set", "model.seq_len=100000"], "fewer than model.seq_len + 1")
        self.expect_bad_input(["train", "-c", cfg, "--set", "parallel.tp=4"], "parallel.tp = 4 does not divide model.heads = 2")
        self.expect_bad_input(["train", "-c", cfg, "--set", "parallel.tp=2", "--set", "parallel.dp=2"],
                              "parallel.tp (2) * parallel.pp (1) * parallel.dp (2) = 4 != world size 1")
        # dp is known before the launch: the batch is checked against it in the config.
        self.expect_bad_input(["train", "-c", cfg, "--set", "parallel.dp=3"],
                              "not a multiple of train.micro_batch (2) x data-parallel degree (3) = 6")
        bad = self.write("bad.toml", "[model\nlayers = 1\n")
        self.expect_bad_input(["train", "-c", bad], "TOML syntax error")

    def test_train_eval_generate(self):
        cfg = self.write("cfg.toml", TINY)
        out = os.path.join(self.dir, "run")
        metrics = os.path.join(self.dir, "m.jsonl")
        r = run("train", "-c", cfg, "--set", f"out.dir={out}", "--metrics", metrics)
        self.assertEqual(r.returncode, 0, r.stderr)
        steps = [l for l in r.stdout.splitlines() if l.startswith("step ")]
        self.assertEqual(len(steps), 6)
        for field in ("loss", "lr", "gnorm", "ms", "tok/s", "GFLOP/s", "eta"):
            self.assertIn(field, steps[0])
        rows = [json.loads(l) for l in open(metrics)]
        self.assertEqual([r_["step"] for r_ in rows], list(range(1, 7)))
        for key in ("step", "loss", "lr", "grad_norm", "tokens_per_s"):
            self.assertIn(key, rows[0])
        self.assertIn("val_loss", rows[2])
        self.assertIn("val_loss", rows[5])
        ckpt = os.path.join(out, "final")
        self.assertTrue(os.path.isfile(os.path.join(ckpt, "meta.json")))

        r = run("eval", "--ckpt", ckpt, "--data", CORPUS, "--batches", "3")
        self.assertEqual(r.returncode, 0, r.stderr)
        last = r.stdout.strip().splitlines()[-1]
        self.assertTrue(last.startswith("val_loss="), last)
        self.assertLess(float(last.split("=")[1]), 5.6)  # better than uniform over 256 (ln 256 = 5.55) + slack

        a = run("generate", "--ckpt", ckpt, "--prompt", "The ", "-n", "12", "--seed", "3", "--ids")
        b = run("generate", "--ckpt", ckpt, "--prompt", "The ", "-n", "12", "--seed", "3", "--ids")
        self.assertEqual(a.returncode, 0, a.stderr)
        self.assertEqual(a.stdout, b.stdout)  # same seed, same text
        ids = a.stdout.strip().splitlines()[-1].split()
        self.assertEqual(len(ids), 12)
        self.assertTrue(all(0 <= int(i) < 256 for i in ids))
        g1 = run("generate", "--ckpt", ckpt, "--prompt", "a", "-n", "8", "-t", "0", "--seed", "1", "--ids")
        g2 = run("generate", "--ckpt", ckpt, "--prompt", "a", "-n", "8", "-t", "0", "--seed", "2", "--ids")
        self.assertEqual(g1.stdout, g2.stdout)  # greedy ignores the seed

        # Corrupt checkpoint: clear message, exit 2.
        with open(os.path.join(ckpt, "model.safetensors"), "r+b") as f:
            f.seek(-5, 2)
            byte = f.read(1)
            f.seek(-5, 2)
            f.write(bytes([byte[0] ^ 0xFF]))
        self.expect_bad_input(["eval", "--ckpt", ckpt, "--data", CORPUS], "checksum mismatch")
        self.expect_bad_input(["eval", "--ckpt", os.path.join(self.dir, "nope"), "--data", CORPUS], "not a tera checkpoint")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])

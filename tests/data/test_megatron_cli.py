#!/usr/bin/python3
"""End-to-end tests of Megatron indexed datasets: `tera tokenize encode
--format megatron` writes PREFIX.bin/.idx; training on the prefix gives the
same losses, bit for bit, as training on the same tokens in tera's shards
(same windows); a data.blend trains, and a resumed blend run continues with
the same losses; bad input (truncated files, a pointer past the end, an
unknown dtype, a non-positive blend weight, an id beyond model.vocab) exits 2
naming the file and the field.
Usage: test_megatron_cli.py TERA_BINARY CORPUS_FILE"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

TERA = os.path.abspath(sys.argv[1])
CORPUS = os.path.abspath(sys.argv[2])


def run(*args, cwd=None):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([TERA, *args], capture_output=True, text=True, errors="replace", cwd=cwd, env=env,
                          timeout=300)


def config(data, vocab, out, steps=6, extra=""):
    return f"""
[model]
layers = 1
hidden = 32
heads = 2
seq_len = 16
vocab = {vocab}

[train]
steps = {steps}
micro_batch = 2
global_batch = 4
lr = 3e-3
warmup = 2
eval_every = 3
eval_sequences = 4

[data]
{data}
{extra}

[out]
dir = "{out}"
"""


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(path, data):
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)


def losses(path):
    """(step, loss, val_loss) of every metrics line: floats as JSON wrote them (exact)."""
    with open(path) as f:
        return [(m["step"], m["loss"], m.get("val_loss")) for m in map(json.loads, f)]


class MegatronCli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        base = read(CORPUS)
        cls.files = []
        for i, w in enumerate((b"the", b"a", b"this")):
            p = os.path.join(cls.dir, f"doc{i}.txt")
            write(p, base.replace(b"the", w))
            cls.files.append(p)
        cls.tok = os.path.join(cls.dir, "tok.json")
        r = run("tokenize", "train", "--input", *cls.files, "--vocab", "320", "--out", cls.tok)
        assert r.returncode == 0, r.stdout + r.stderr
        cls.prefix = os.path.join(cls.dir, "corpus")
        r = run("tokenize", "encode", "--tokenizer", cls.tok, "--input", *cls.files, "--format", "megatron",
                "--out", cls.prefix)
        assert r.returncode == 0, r.stdout + r.stderr
        cls.encode_out = r.stdout

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def expect_bad_input(self, args, *needles):
        r = run(*args, cwd=self.dir)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        for n in needles:
            self.assertIn(n, r.stderr)
        self.assertNotIn("internal error", r.stderr)
        return r

    def train(self, name, data, vocab=320, steps=6, extra="", flags=()):
        cfg = self.path(name + ".toml")
        write(cfg, config(data, vocab, self.path(name), steps, extra))
        metrics = self.path(name + ".jsonl")
        r = run("train", "-c", cfg, "-q", "--metrics", metrics, *flags)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return losses(metrics)

    def test_encode_writes_bin_and_idx(self):
        self.assertIn("3 documents", self.encode_out)
        idx = read(self.prefix + ".idx")
        self.assertEqual(idx[:9], b"MMIDIDX\x00\x00")
        version, dtype, seqs, docs = struct.unpack_from("<QBQQ", idx, 9)
        self.assertEqual((version, dtype, seqs, docs), (1, 8, 3, 4))  # uint16 for a 320-token vocab
        lengths = struct.unpack_from("<3i", idx, 34)
        self.assertEqual(os.path.getsize(self.prefix + ".bin"), 2 * sum(lengths))
        # stats reads and checks it, and reports the document boundaries.
        r = run("tokenize", "stats", "--input", self.prefix, "--tokenizer", self.tok)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("3 sequences, 3 documents", r.stdout)
        self.assertIn("3 of 3 sequences end with the end-of-text token", r.stdout)
        # An existing prefix is replaced only with --force; a val split is refused.
        self.expect_bad_input(["tokenize", "encode", "--tokenizer", self.tok, "--input", self.files[0], "--format",
                               "megatron", "--out", self.prefix], "--out", "--force")
        self.expect_bad_input(["tokenize", "encode", "--tokenizer", self.tok, "--input", self.files[0], "--format",
                               "megatron", "--out", self.path("v"), "--val-fraction", "0.1"], "--val-fraction")

    def test_same_losses_as_the_same_tokens_in_shards(self):
        shards = self.path("shards")
        r = run("tokenize", "encode", "--tokenizer", self.tok, "--input", *self.files, "--out", shards)
        self.assertEqual(r.returncode, 0, r.stderr)
        a = self.train("on_shards", f'train = "{shards}"')
        b = self.train("on_megatron", f'train = "{self.prefix}"\ntokenizer = "{self.tok}"')
        self.assertEqual(len(a), 6)
        self.assertEqual(a, b)  # every loss and val_loss, bit for bit
        self.assertTrue(any(v is not None for _, _, v in a))
        # eval --data takes the prefix too (the checkpoint's tokenizer checks its ids).
        r = run("eval", "--ckpt", self.path("on_megatron/final"), "--data", self.prefix, "--batches", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.strip().splitlines()[-1].startswith("val_loss="), r.stdout)

    def test_blend_trains_and_resumes_at_the_same_window(self):
        other = self.path("other")
        r = run("tokenize", "encode", "--tokenizer", self.tok, "--input", self.files[1], "--format", "megatron",
                "--out", other)
        self.assertEqual(r.returncode, 0, r.stderr)
        data = (f'blend = [[0.3, "{self.prefix}"], [0.7, "{other}"]]\nval = "{self.files[2]}"\n'
                f'tokenizer = "{self.tok}"')
        ck = self.path("blend_ckpt")
        full = self.train("blend_full", data, extra=f'\n[ckpt]\ndir = "{ck}"\nevery = 3\nkeep = 5\n')
        self.assertEqual([s for s, _, _ in full], [1, 2, 3, 4, 5, 6])
        again = self.train("blend_again", data)
        self.assertEqual(full, again)  # deterministic
        resumed = self.train("blend_resumed", data, flags=("--resume", os.path.join(ck, "step-00000003")))
        self.assertEqual([s for s, _, _ in resumed], [4, 5, 6])
        self.assertEqual(resumed, full[3:])  # steps 4..6 continue at the same windows, bit for bit
        # Other weights: another data stream, refused on resume.
        moved = data.replace("0.3", "0.5")
        cfg = self.path("blend_moved.toml")
        write(cfg, config(moved, 320, self.path("blend_moved"), 6))
        self.expect_bad_input(["train", "-c", cfg, "--resume", os.path.join(ck, "step-00000003")],
                              "different training data")

    def bad_pair(self, name, idx=None, bin_=None):
        """A copy of the good prefix with its .idx or .bin replaced."""
        p = self.path(name)
        write(p + ".idx", idx if idx is not None else read(self.prefix + ".idx"))
        write(p + ".bin", bin_ if bin_ is not None else read(self.prefix + ".bin"))
        return p

    def expect_train_refused(self, prefix, *needles, vocab=320):
        cfg = self.path("bad.toml")
        write(cfg, config(f'train = "{prefix}"\ntokenizer = "{self.tok}"', vocab, self.path("bad")))
        return self.expect_bad_input(["train", "-c", cfg], *needles)

    def test_bad_input_exits_2_naming_the_file_and_the_field(self):
        idx = read(self.prefix + ".idx")
        bin_ = read(self.prefix + ".bin")
        p = self.bad_pair("trunc_idx", idx=idx[:-5])
        self.expect_train_refused(p, p + ".idx", "truncated")
        p = self.bad_pair("trunc_bin", bin_=bin_[:-10])
        self.expect_train_refused(p, p + ".idx", "pointers[2]", "past the end", p + ".bin")
        p = self.bad_pair("long_bin", bin_=bin_ + b"\0\0")
        self.expect_train_refused(p, p + ".idx", "lengths")
        ptr = bytearray(idx)
        struct.pack_into("<q", ptr, 34 + 3 * 4 + 2 * 8, 1 << 40)  # pointers[2]
        p = self.bad_pair("ptr", idx=bytes(ptr))
        self.expect_train_refused(p, p + ".idx", "pointers[2]", "past the end")
        ln = bytearray(idx)
        struct.pack_into("<i", ln, 34, struct.unpack_from("<i", idx, 34)[0] - 1)  # lengths[0] one short
        p = self.bad_pair("len", idx=bytes(ln))
        self.expect_train_refused(p, p + ".idx", "pointers[1]", "disagrees with lengths")
        dt = bytearray(idx)
        dt[17] = 11
        p = self.bad_pair("dtype", idx=bytes(dt))
        self.expect_train_refused(p, p + ".idx", "dtype", "unknown dtype code 11")
        dt[17] = 7
        p = self.bad_pair("float", idx=bytes(dt))
        self.expect_train_refused(p, p + ".idx", "dtype", "float32")
        # An id beyond the tokenizer's vocabulary, named in the .bin.
        big = bytearray(bin_)
        struct.pack_into("<H", big, 6, 4000)
        p = self.bad_pair("big_id", bin_=bytes(big))
        self.expect_train_refused(p, p + ".bin", "token 3", "id 4000", "beyond")
        # Blend weights must be positive (the config key and the entry named).
        for w in ("0", "-0.5"):
            cfg = self.path("bw.toml")
            write(cfg, config(f'blend = [[{w}, "{self.prefix}"]]\nval = "{self.files[0]}"\n'
                                        f'tokenizer = "{self.tok}"', 320, self.path("bw")))
            self.expect_bad_input(["train", "-c", cfg], "bw.toml", "data.blend[0]", "not positive")
        cfg = self.path("bm.toml")
        write(cfg, config(f'blend = [[1, "{self.path("missing")}"]]\nval = "{self.files[0]}"', 320,
                                    self.path("bm")))
        self.expect_bad_input(["train", "-c", cfg], "data.blend[0]", "missing.idx")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])

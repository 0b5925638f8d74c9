#!/usr/bin/python3
"""End-to-end tests of `tera tokenize` and of training, generating and
evaluating with a BPE tokenizer: exact decode of encoded shards, a tiktoken
rank file with its pattern and special tokens (encode, convert, train),
bad input (corrupt shards, bad or unsupported tokenizer files, empty corpus,
sequence longer than the data) exits 2 with the file and the problem named;
JSONL corpora (plain and .jsonl.gz) for train, encode (shards and Megatron)
and stats.
Usage: test_tokenize_cli.py TERA_BINARY CORPUS_FILE"""
import base64
import gzip
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib

TERA = os.path.abspath(sys.argv[1])
CORPUS = os.path.abspath(sys.argv[2])


def run(*args, cwd=None):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([TERA, *args], capture_output=True, text=True, errors="replace", cwd=cwd, env=env,
                          timeout=300)


def slurp(path):
    with open(path, "rb") as f:
        return f.read()


def spit(path, data):
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)


def config(train, vocab, extra=""):
    return f"""
[model]
layers = 1
hidden = 32
heads = 2
seq_len = 16
vocab = {vocab}

[train]
steps = 6
micro_batch = 2
global_batch = 4
lr = 3e-3
warmup = 2
eval_sequences = 4

[data]
train = "{train}"
{extra}
"""


def gpt2_byte_map():
    """GPT-2's printable character -> byte table (its bytes_to_unicode, inverted)."""
    printable = [b for b in range(256) if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255]
    out, n = {}, 256
    for b in range(256):
        if b in printable:
            out[chr(b)] = b
        else:
            out[chr(n)] = b
            n += 1
    return out


class TokenizeCli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        base = open(CORPUS, "rb").read()
        # A few variations of the corpus plus non-ASCII and invalid UTF-8, so the text is not one repeated block.
        text = b"".join(base.replace(b"the", w) for w in (b"the", b"a", b"this", b"th\xc3\xa9", b"that")) + \
            b"\xff\xfe invalid bytes \xc3 and trailing spaces   \n\n"
        cls.text_path = os.path.join(cls.dir, "corpus.txt")
        with open(cls.text_path, "wb") as f:
            f.write(text)
        cls.text = text
        cls.tok = os.path.join(cls.dir, "tok.json")
        r = run("tokenize", "train", "--input", cls.text_path, "--vocab", "320", "--out", cls.tok)
        assert r.returncode == 0, r.stdout + r.stderr
        cls.train_out = r.stdout

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

    def encode(self, out, *extra):
        r = run("tokenize", "encode", "--tokenizer", self.tok, "--input", self.text_path, "--out", self.path(out),
                *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r

    def test_train_writes_a_hugging_face_tokenizer_json(self):
        tok = json.load(open(self.tok))
        self.assertEqual(tok["model"]["type"], "BPE")
        self.assertEqual(tok["pre_tokenizer"]["type"], "ByteLevel")
        self.assertEqual(len(tok["model"]["vocab"]) + len(tok["added_tokens"]), 320)
        self.assertEqual(len(tok["model"]["merges"]), 63)
        self.assertEqual(tok["added_tokens"][0]["content"], "<|endoftext|>")
        self.assertTrue(tok["added_tokens"][0]["special"])
        self.assertIn("learned 63 merges", self.train_out)

    def rank_file(self):
        """The trained tokenizer's vocabulary as a tiktoken rank file (id order is rank order)."""
        tok = json.load(open(self.tok))
        to_byte = gpt2_byte_map()
        lines = [base64.b64encode(bytes(to_byte[c] for c in text)).decode() + " " + str(i)
                 for text, i in sorted(tok["model"]["vocab"].items(), key=lambda kv: kv[1])]
        path = self.path("ranks.tiktoken")
        open(path, "w").write("\n".join(lines) + "\n")
        return path, len(lines)

    def test_tiktoken_rank_file_encodes_converts_and_trains(self):
        ranks, n = self.rank_file()
        self.expect_bad_input(["tokenize", "encode", "--tokenizer", ranks, "--input", self.text_path, "--out", "o"],
                              ranks, "is a tiktoken rank file", "--pattern")
        self.expect_bad_input(["tokenize", "encode", "--tokenizer", ranks, "--pattern", "o200k", "--input",
                               self.text_path, "--out", "o"], "\"o200k\": not a pre-tokenizer")
        self.expect_bad_input(["tokenize", "encode", "--tokenizer", ranks, "--pattern", "cl100k", "--special", "<s>",
                               "--input", self.text_path, "--out", "o"], "\"<s>\" must be TEXT=ID")
        self.expect_bad_input(["tokenize", "encode", "--tokenizer", self.tok, "--special", "<s>=400", "--input",
                               self.text_path, "--out", "o"], "only with a tiktoken rank file")
        eot = f"<|endoftext|>={n}"
        r = run("tokenize", "encode", "--tokenizer", ranks, "--pattern", "cl100k", "--special", eot, "--input",
                self.text_path, "--out", self.path("tik_shards"))
        self.assertEqual(r.returncode, 0, r.stderr)
        d = run("tokenize", "decode", "--input", self.path("tik_shards"), "--out", self.path("tik.txt"))
        self.assertEqual(d.returncode, 0, d.stderr)
        self.assertEqual(open(self.path("tik.txt"), "rb").read(), self.text)  # the shard dir's tokenizer.json decodes
        c = run("tokenize", "convert", "--tokenizer", ranks, "--pattern", "llama3", "--special", eot, "--out",
                self.path("tik_tokenizer.json"))
        self.assertEqual(c.returncode, 0, c.stderr)
        self.assertIn("cl100k pre-tokenizer", c.stdout)
        hf = json.load(open(self.path("tik_tokenizer.json")))
        self.assertTrue(hf["model"]["ignore_merges"])
        self.assertEqual(hf["pre_tokenizer"]["pretokenizers"][0]["type"], "Split")
        # The converted file encodes the same shards as the rank file.
        r2 = run("tokenize", "encode", "--tokenizer", self.path("tik_tokenizer.json"), "--input", self.text_path,
                 "--out", self.path("tik_shards2"))
        self.assertEqual(r2.returncode, 0, r2.stderr)
        m1 = json.load(open(self.path("tik_shards/manifest.json")))
        m2 = json.load(open(self.path("tik_shards2/manifest.json")))
        self.assertEqual(m1["splits"], m2["splits"])
        # Training from text with the rank file named in the config.
        cfg = self.path("tik.toml")
        open(cfg, "w").write(config(self.text_path, n + 1, f'tokenizer = "{ranks}"\ntokenizer_pattern = "cl100k"\n'
                                    f'tokenizer_specials = "{eot}"') + f'\n[out]\ndir = "{self.path("tik_run")}"\n')
        t = run("train", "-c", cfg, "-q")
        self.assertEqual(t.returncode, 0, t.stderr)
        meta = json.load(open(self.path("tik_run/final/meta.json")))
        self.assertEqual(json.loads(meta["tokenizer"])["pre_tokenizer"]["type"], "Sequence")
        g = run("generate", "--ckpt", self.path("tik_run/final"), "--prompt", "The keeper", "-n", "5", "--seed", "1")
        self.assertEqual(g.returncode, 0, g.stderr)
        open(cfg, "w").write(config(self.text_path, n + 1, f'tokenizer = "{ranks}"'))
        self.expect_bad_input(["train", "-c", cfg], "data.tokenizer", "tiktoken rank file", "data.tokenizer_pattern")

    def test_encode_decode_is_exact(self):
        r = self.encode("shards", "--val-fraction", "0", "--threads", "2", "--shard-tokens", "1000")
        self.assertIn("train:", r.stdout)
        self.assertNotIn("\r", r.stderr)  # no progress bar when stderr is not a terminal
        m = json.load(open(self.path("shards/manifest.json")))
        self.assertGreater(len(m["splits"]["train"]["shards"]), 1)
        self.assertNotIn("val", m["splits"])
        r = run("tokenize", "decode", "--input", self.path("shards"), "--out", self.path("back.txt"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(open(self.path("back.txt"), "rb").read(), self.text)

        self.encode("split", "--val-fraction", "0.2")
        for s in ("train", "val"):
            r = run("tokenize", "decode", "--input", self.path("split"), "--split", s, "--out", self.path(s + ".txt"))
            self.assertEqual(r.returncode, 0, r.stderr)
        joined = open(self.path("train.txt"), "rb").read() + open(self.path("val.txt"), "rb").read()
        self.assertEqual(joined, self.text)

        r = run("tokenize", "stats", "--input", self.path("split"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("bytes/token", r.stdout)
        self.assertIn("val:", r.stdout)
        r = run("tokenize", "stats", "--input", self.text_path, "--tokenizer", self.tok)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"{len(self.text)} bytes", r.stdout)

    def corrupt_copy(self, name, edit):
        self.encode(name, "--val-fraction", "0")
        shard = self.path(f"{name}/train-00000.tok")
        data = bytearray(open(shard, "rb").read())
        edit(data)
        with open(shard, "wb") as f:
            f.write(data)
        return shard

    def test_corrupt_shards_exit_2_naming_the_file(self):
        shard = self.corrupt_copy("c1", lambda d: d.__setitem__(0, ord("X")))
        self.expect_bad_input(["tokenize", "decode", "--input", shard, "--tokenizer", self.tok, "--out", "x"],
                              shard, "wrong magic")
        shard = self.corrupt_copy("c2", lambda d: d.__delitem__(slice(len(d) - 7, len(d))))
        self.expect_bad_input(["tokenize", "decode", "--input", self.path("c2"), "--out", "x"], shard, "truncated")
        shard = self.corrupt_copy("c3", lambda d: d.__setitem__(80, d[80] ^ 1))
        self.expect_bad_input(["tokenize", "decode", "--input", self.path("c3"), "--out", "x"], shard,
                              "checksum mismatch")

        def big_token(d):  # token 5 := 999 >= vocab 320, both checksums recomputed
            d[64 + 10:64 + 12] = struct.pack("<H", 999)
            d[40:44] = struct.pack("<I", zlib.crc32(bytes(d[64:])))
            d[60:64] = struct.pack("<I", zlib.crc32(bytes(d[:60])))
        shard = self.corrupt_copy("c4", big_token)
        self.expect_bad_input(["tokenize", "decode", "--input", self.path("c4"), "--out", "x"], shard,
                              "token id 999 at position 5 is >= the vocabulary size 320")
        cfg = self.path("c4.toml")
        open(cfg, "w").write(config(self.path("c4"), 320))
        self.expect_bad_input(["train", "-c", cfg], shard, "token id 999")

    def test_bad_tokenizers_and_corpora_exit_2(self):
        bad = self.path("bad_tok.json")
        open(bad, "w").write('{"format": "tera-bpe", "version": 7}')
        self.expect_bad_input(["tokenize", "encode", "--tokenizer", bad, "--input", self.text_path, "--out", "o"],
                              bad, "unsupported tokenizer version 7")
        self.expect_bad_input(["tokenize", "encode", "--tokenizer", self.path("none.json"), "--input",
                               self.text_path, "--out", "o"], "none.json", "not found")
        empty = self.path("empty.txt")
        open(empty, "w").close()
        self.expect_bad_input(["tokenize", "train", "--input", empty, "--vocab", "300", "--out", "t.json"],
                              "empty corpus")
        self.expect_bad_input(["tokenize", "train", "--input", self.path("missing"), "--vocab", "300", "--out",
                               "t.json"], "missing: no such file or directory")
        self.expect_bad_input(["tokenize", "train", "--input", self.text_path, "--vocab", "100", "--out", "t.json"],
                              "--vocab")
        self.expect_bad_input(["tokenize", "decode", "--input", self.dir, "--out", "x"], "not a token-shard directory")
        wordpiece = self.path("wordpiece.json")
        open(wordpiece, "w").write('{"model": {"type": "WordPiece", "vocab": {}}, "normalizer": null}')
        self.expect_bad_input(["tokenize", "encode", "--tokenizer", wordpiece, "--input", self.text_path, "--out", "o"],
                              wordpiece, "model.type: \"WordPiece\" is not implemented")

    def test_train_generate_eval_with_bpe(self):
        self.encode("run_shards", "--val-fraction", "0.1")
        cfg = self.path("bpe.toml")
        out = self.path("run")
        open(cfg, "w").write(config(self.path("run_shards"), 320) + f'\n[out]\ndir = "{out}"\n')
        r = run("train", "-c", cfg)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("run_shards [train]", r.stdout)
        ckpt = os.path.join(out, "final")
        meta = json.load(open(os.path.join(ckpt, "meta.json")))
        self.assertEqual(json.loads(meta["tokenizer"])["model"]["type"], "BPE")  # self-contained checkpoint

        a = run("generate", "--ckpt", ckpt, "--prompt", "The keeper", "-n", "10", "--seed", "3", "--ids")
        self.assertEqual(a.returncode, 0, a.stderr)
        ids = [int(i) for i in a.stdout.strip().splitlines()[-1].split()]
        self.assertEqual(len(ids), 10)
        self.assertTrue(all(0 <= i < 320 for i in ids))
        self.assertTrue(a.stdout.startswith("The keeper"))
        for data in (self.text_path, self.path("run_shards")):
            r = run("eval", "--ckpt", ckpt, "--data", data, "--batches", "2")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(r.stdout.strip().splitlines()[-1].startswith("val_loss="))

        # A byte-level checkpoint cannot read BPE shards; a too-long seq_len is refused.
        open(cfg, "w").write(config(self.text_path, 256, 'tokenizer = "bytes"') + f'\n[out]\ndir = "{out}b"\n')
        r = run("train", "-c", cfg)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.expect_bad_input(["eval", "--ckpt", out + "b/final", "--data", self.path("run_shards")],
                              "different tokenizer")
        open(cfg, "w").write(config(self.path("run_shards"), 320).replace("seq_len = 16", "seq_len = 100000"))
        self.expect_bad_input(["train", "-c", cfg], "fewer than model.seq_len + 1")

    def test_text_file_with_a_tokenizer_is_encoded_in_memory(self):
        cfg = self.path("mem.toml")
        open(cfg, "w").write(config(self.text_path, 320, f'tokenizer = "{self.tok}"') +
                             f'\n[out]\ndir = "{self.path("mem")}"\n')
        r = run("train", "-c", cfg, "-q")
        self.assertEqual(r.returncode, 0, r.stderr)
        open(cfg, "w").write(config(self.text_path, 300, f'tokenizer = "{self.tok}"'))
        self.expect_bad_input(["train", "-c", cfg], "model.vocab = 300 is smaller than the data's vocabulary (320")


class TokenizeJsonlCli(unittest.TestCase):
    """JSONL input: one document per line and --json-key, gzip read by its magic bytes."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        paragraphs = [p for p in slurp(CORPUS).decode("utf-8", "replace").split("\n\n") if p.strip()]
        cls.docs = [p + "\n" for p in paragraphs] + ["caf\u00e9 \U0001F600 \u65e5\u672c"]
        lines = []
        for i, d in enumerate(cls.docs):
            lines.append(json.dumps({"id": i, "text": d, "title": f"title {i}"}) + ("\r\n" if i % 2 else "\n"))
            if i % 5 == 0:
                lines.append("\n")  # blank lines: skipped quietly
        cls.raw = "".join(lines).encode()
        cls.plain = os.path.join(cls.dir, "corpus.jsonl")
        cls.gz = os.path.join(cls.dir, "corpus.jsonl.gz")
        spit(cls.plain, cls.raw)
        spit(cls.gz, gzip.compress(cls.raw))
        cls.tok = os.path.join(cls.dir, "tok.json")
        r = run("tokenize", "train", "--input", cls.plain, "--vocab", "320", "--out", cls.tok)
        assert r.returncode == 0, r.stdout + r.stderr

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def ok(self, *args):
        r = run(*args, cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return r

    def test_train_on_gzip_equals_plain(self):
        self.ok("tokenize", "train", "--input", self.gz, "--vocab", "320", "--out", self.path("tok_gz.json"),
                "--threads", "3")
        self.assertEqual(slurp(self.path("tok_gz.json")), slurp(self.tok))

    def test_encode_shards_decode_gives_the_documents(self):
        self.ok("tokenize", "encode", "-t", self.tok, "-i", self.plain, "-o", self.path("s1"), "-j", "1")
        r = self.ok("tokenize", "encode", "-t", self.tok, "-i", self.gz, "-o", self.path("s2"), "-j", "3")
        self.assertIn(f"{len(self.docs)} documents", r.stdout)
        for name in os.listdir(self.path("s1")):
            if name.endswith(".tok"):
                self.assertEqual(slurp(self.path("s1/" + name)), slurp(self.path("s2/" + name)))
        self.ok("tokenize", "decode", "-i", self.path("s2"), "-o", self.path("back.txt"))
        self.assertEqual(slurp(self.path("back.txt")), "".join(self.docs).encode())

    def test_megatron_has_one_document_per_line_and_a_dataset_per_key(self):
        self.ok("tokenize", "encode", "-t", self.tok, "-i", self.gz, "--format", "megatron", "-o", self.path("m"))
        r = self.ok("tokenize", "stats", "-i", self.path("m"), "-t", self.tok)
        n = len(self.docs)
        self.assertIn(f"{n} sequences, {n} documents", r.stdout)
        self.assertIn(f"{n} of {n} sequences end with the end-of-text token", r.stdout)
        r = self.ok("tokenize", "encode", "-t", self.tok, "-i", self.plain, "--format", "megatron", "-o",
                    self.path("k"), "--json-key", "text", "title")
        self.assertIn(f"_title: {n} documents", r.stdout)
        for key in ("text", "title"):
            r = self.ok("tokenize", "stats", "-i", self.path("k_" + key))
            self.assertIn(f"{n} sequences, {n} documents", r.stdout)
        self.assertEqual(slurp(self.path("k_text.bin")), slurp(self.path("m.bin")))

    def test_stats_counts_documents_and_lines(self):
        r = self.ok("tokenize", "stats", "-i", self.gz, "-t", self.tok, "--json-key", "text", "title")
        n = len(self.docs)
        self.assertIn(f"{2 * n} documents", r.stdout)
        lines = self.raw.count(b"\n")
        self.assertIn(f"JSONL: {lines} lines, 0 malformed skipped; \"text\": {n} documents", r.stdout)
        # --input-format text: the same file is one text document.
        r = self.ok("tokenize", "stats", "-i", self.plain, "-t", self.tok, "--input-format", "text")
        self.assertIn(f"{len(self.raw)} bytes, 1 documents", r.stdout)

    def test_malformed_lines_stop_or_are_skipped_and_reported(self):
        bad = self.path("bad.jsonl")
        spit(bad, '{"text": "fine"}\n\n{"text": 3}\n{"content": "x"}\nnot json\n{"text": "end"}\n')
        for cmd in (["train", "--vocab", "300", "--out", self.path("t.json")],
                    ["encode", "-t", self.tok, "--out", self.path("bad_shards")],
                    ["stats", "-t", self.tok]):
            r = run("tokenize", cmd[0], "-i", bad, *cmd[1:], cwd=self.dir)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn(f'{bad}:3: the value of "text" is a number, not a string', r.stderr)
            self.assertIn("--skip-bad-lines", r.stderr)
        r = self.ok("tokenize", "stats", "-i", bad, "-t", self.tok, "--skip-bad-lines")
        self.assertIn("skipped 3 malformed JSONL lines of 6 (first: " + bad + ":3:", r.stderr)
        self.assertIn("2 documents", r.stdout)
        r = run("tokenize", "stats", "-i", bad, "-t", self.tok, "--json-key", "content", "--skip-bad-lines")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"(first: {bad}:1: no key \"content\"", r.stderr)

    def test_gzip_text_and_overlong_input_are_refused(self):
        gz_text = self.path("notes.txt.gz")
        spit(gz_text, gzip.compress(b"plain text"))
        r = run("tokenize", "stats", "-i", gz_text, "-t", self.tok)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("is gzip-compressed; tera reads gzip only as JSONL", r.stderr)
        r = self.ok("tokenize", "stats", "-i", gz_text, "-t", self.tok, "--input-format", "jsonl", "--skip-bad-lines")
        self.assertIn("skipped 1 malformed JSONL line of 1", r.stderr)
        cut = self.path("cut.jsonl.gz")
        data = gzip.compress(self.raw)
        spit(cut, data[:len(data) // 2])
        r = run("tokenize", "encode", "-t", self.tok, "-i", cut, "--out", self.path("cut_shards"))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(cut + ": truncated gzip data", r.stderr)
        r = run("tokenize", "train", "-i", self.plain, "--json-key", "text", "text", "--vocab", "300", "-o", "x.json",
                cwd=self.dir)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--json-key text: given twice", r.stderr)
        # A JSONL file as data.train is refused, not trained on as text.
        cfg = self.path("jsonl_train.toml")
        spit(cfg, config(self.plain, 320, f'tokenizer = "{self.tok}"').encode())
        r = run("train", "-c", cfg, cwd=self.dir)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("a JSONL corpus is not read as text; encode it first", r.stderr)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])

#!/usr/bin/python3
"""Robustness of the offline subcommands (ckpt, tokenize, eval, generate,
calibrate): outputs checked before any work, nothing a user made replaced
without --force, an output never one of the inputs, paths inside files
treated as untrusted, round trips that keep what they carry.

usage: test_cli_robustness.py TERA_BINARY CORPUS_FILE [unittest args, e.g. -k row03]

Each test is one row of the robustness issue's table: it asserts the exit
code, the message's key words, and that what the user had before is still
there byte for byte."""
import glob
import json
import os
import shutil
import struct
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CORPUS, RobustnessCase, main, run, snapshot, tiny_config  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def round_to(dtype, v):
    """v rounded to F32, F16 or BF16 (nearest, ties to even) and back."""
    if dtype == "F32":
        return struct.unpack("<f", struct.pack("<f", v))[0]
    if dtype == "F16":
        return struct.unpack("<e", struct.pack("<e", v))[0]
    bits = struct.unpack("<I", struct.pack("<f", v))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def pack(dtype, values):
    if dtype == "F32":
        return struct.pack(f"<{len(values)}f", *values)
    if dtype == "F16":
        return struct.pack(f"<{len(values)}e", *values)
    return b"".join(struct.pack("<I", struct.unpack("<I", struct.pack("<f", round_to("BF16", v)))[0])[2:] for v in values)


def write_safetensors(path, tensors, metadata=None, dtype="F32"):
    """tensors: {name: (shape, [floats])}, written as F32 (or F16, BF16) safetensors."""
    header, blobs, at = {}, [], 0
    for name, (shape, values) in tensors.items():
        blob = pack(dtype, values)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [at, at + len(blob)]}
        blobs.append(blob)
        at += len(blob)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def load_json(path):
    with open(path) as f:
        return json.load(f)


def read_text(path):
    with open(path) as f:
        return f.read()


def read_safetensors(path):
    """{name: (shape, [floats])} of an F32 safetensors file, and its metadata."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        out[name] = (t["shape"], list(struct.unpack(f"<{(e - b) // 4}f", data[8 + n + b:8 + n + e])))
    return out, meta


class Fixtures:
    """Built once: a byte-level model, a BPE tokenizer, its shards, a BPE model and its export."""
    root = None

    @classmethod
    def build(cls):
        if cls.root:
            return cls.root
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.root = cls.tmp.name

        def ok(*args):
            r = run(*args, cwd=d)
            assert r.returncode == 0, (args, r.stdout, r.stderr)
            return r

        with open(os.path.join(d, "tiny.toml"), "w") as f:
            f.write(tiny_config())
        ok("train", "-q", "-c", "tiny.toml", "--set", "out.dir=bytes", "--set", "ckpt.dir=bytes/ckpt",
           "--set", "ckpt.every=6")
        ok("tokenize", "train", "-i", CORPUS, "--vocab", "300", "--out", "tok.json")
        ok("tokenize", "encode", "-t", "tok.json", "-i", CORPUS, "-o", "shards", "--val-fraction", "0.2")
        ok("train", "-q", "-c", "tiny.toml", "--set", "out.dir=bpe", "--set", "data.train=shards",
           "--set", "model.vocab=300")
        ok("ckpt", "export", "bpe/final", "--out", "hf/model.safetensors")
        return d


class CliRobustness(RobustnessCase):
    @classmethod
    def setUpClass(cls):
        cls.fx = Fixtures.build()

    def copy(self, name, to=None):
        """A private copy of a fixture in this test's directory."""
        src, dst = os.path.join(self.fx, name), self.path(to or name)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        (shutil.copytree if os.path.isdir(src) else shutil.copy)(src, dst)
        return dst

    # Row 3: an existing --out is refused unless --force, and --force replaces atomically.
    def test_row03_import_out_exists_refused(self):
        hf = self.copy("hf")
        keep = self.write("afile", "keep\n")
        final = self.copy("bytes/final", "trained/final")
        for target in (keep, final):
            before = snapshot(target)
            r = self.tera("ckpt", "import", os.path.join(hf, "model.safetensors"), "--out", target)
            self.assert_refused(r, [target, "already exists", "--force"])
            self.assert_unchanged(before, target)
        # With --force: replaced by a complete tera-model directory, no temporaries left beside it.
        self.ok(self.tera("ckpt", "import", os.path.join(hf, "model.safetensors"), "--out", keep, "--force"))
        self.assertTrue(os.path.isfile(os.path.join(keep, "meta.json")))
        self.assertEqual(sorted(os.listdir(self.dir)), ["afile", "hf", "trained"])

    def test_row03_export_out_exists_refused(self):
        final = self.copy("bpe/final", "final")
        out = self.write("out/model.safetensors", "keep\n")
        before = snapshot(self.path("out"))
        self.assert_refused(self.tera("ckpt", "export", final, "--out", out), [out, "already exists", "--force"])
        self.assert_unchanged(before, self.path("out"))
        # The files written beside it count too: a user's config.json is not replaced silently.
        os.remove(out)
        cfg = self.write("out/config.json", "{\"mine\": 1}\n")
        before = snapshot(self.path("out"))
        self.assert_refused(self.tera("ckpt", "export", final, "--out", out), [cfg, "already exists", "--force"])
        self.assert_unchanged(before, self.path("out"))
        self.ok(self.tera("ckpt", "export", final, "--out", out, "--force"))
        self.assertEqual(load_json(cfg)["model_type"], "gpt2")
        # Never into the checkpoint it reads, even with --force.
        before = snapshot(final)
        self.assert_refused(self.tera("ckpt", "export", final, "--out", os.path.join(final, "m.safetensors"), "--force"),
                            ["inside the checkpoint"])
        self.assert_unchanged(before, final)

    def test_row03_decode_train_calibrate_out_exists_refused(self):
        shards = self.copy("shards")
        for args in (["tokenize", "decode", "--input", shards],
                     ["tokenize", "train", "-i", CORPUS, "--vocab", "300"],
                     ["calibrate", "--seconds", "0.01"]):
            out = self.write("mine.txt", "keep\n")
            before = snapshot(out)
            r = self.tera(*args, "--out", out, timeout=60, env={"TERA_CONFIG_DIR": self.path("cfgdir")})
            self.assert_refused(r, [out, "already exists", "--force"])
            self.assertEqual(r.stdout, "")  # refused before any work
            self.assert_unchanged(before, out)
        r = self.ok(self.tera("tokenize", "decode", "--input", shards, "--out", out, "--force"))
        with open(CORPUS, "rb") as f, open(out, "rb") as g:
            self.assertEqual(g.read(), f.read())  # train + val splits decode back to the corpus

    # Row 4: an output is never one of the inputs, --force or not.
    def test_row04_decode_out_is_input_refused(self):
        shards = self.copy("shards")
        before = snapshot(shards)
        shard = os.path.join(shards, "train-00000.tok")
        for args in (["--input", shards, "--out", shard],
                     ["--input", shard, "--tokenizer", os.path.join(shards, "tokenizer.json"), "--out", shard],
                     ["--input", shards, "--out", os.path.join(shards, "tokenizer.json")],
                     ["--input", shards, "--out", os.path.join(shards, "manifest.json")]):
            r = self.tera("tokenize", "decode", *args, "--force")
            self.assert_refused(r, ["is the same file as", "an input of this command"])
            self.assert_unchanged(before, shards)
        # A new file named like a shard inside the shard directory is refused too.
        r = self.tera("tokenize", "decode", "--input", shards, "--out", os.path.join(shards, "train-00007.tok"))
        self.assert_refused(r, ["named like a shard"])
        self.assert_unchanged(before, shards)
        # tokenize train over its own corpus.
        corpus = shutil.copy(CORPUS, self.path("corpus.txt"))
        before = snapshot(corpus)
        r = self.tera("tokenize", "train", "-i", corpus, "--vocab", "300", "--out", corpus, "--force")
        self.assert_refused(r, ["is the same file as", corpus, "an input of this command"])
        self.assert_unchanged(before, corpus)
        # encode into the directory holding its own input text; import into the directory holding its input.
        os.makedirs(self.path("texts"))
        text = shutil.copy(CORPUS, self.path("texts", "corpus.txt"))
        before = snapshot(self.path("texts"))
        r = self.tera("tokenize", "encode", "-t", "bytes", "-i", self.path("texts"), "-o", self.path("texts"))
        self.assert_refused(r, ["holds --input", text, "an input of this command"])
        self.assert_unchanged(before, self.path("texts"))
        hf = self.copy("hf")
        before = snapshot(hf)
        r = self.tera("ckpt", "import", os.path.join(hf, "model.safetensors"), "--out", hf, "--force")
        self.assert_refused(r, ["holds the source", "an input of this command"])
        self.assert_unchanged(before, hf)
        # reshard into the ckpt.dir it reads from: would replace the very checkpoint.
        ck = self.copy("bytes/ckpt", "ck")
        before = snapshot(ck)
        r = self.tera("ckpt", "reshard", os.path.join(ck, "step-00000006"), "--layout", "tp=2", "--out", ck, "--force")
        self.assert_refused(r, ["holds the checkpoint it reads", "step-00000006"])
        self.assert_unchanged(before, ck)

    # Row 6: a tokenizer path inside meta.json (or given as --tokenizer) must be a regular file.
    def test_row06_tokenizer_path_not_regular_refused(self):
        final = self.copy("bpe/final", "final")
        meta_path = os.path.join(final, "meta.json")
        meta = load_json(meta_path)
        embedded = meta["tokenizer"]
        fifo = self.path("fifo")
        os.mkfifo(fifo)
        shards = self.copy("shards")
        os.symlink("/dev/zero", self.path("zero"))  # outside final/: snapshot() reads every file there
        with open(self.path("tok.json"), "w") as f:
            f.write(embedded)
        # Relative paths resolve beside meta.json and must name a regular file;
        # an absolute one is refused outright (issue 35: a checkpoint names only what travels with it).
        for bad, kind in (("../zero", "character device"), ("../fifo", "FIFO"), ("..", "vocab.json"),
                          (self.path("tok.json"), "absolute path")):
            meta["tokenizer"] = bad
            with open(meta_path, "w") as f:
                json.dump(meta, f)
            before = snapshot(final)
            for args in (["generate", "--ckpt", final, "--prompt", "a", "-n", "2"],
                         ["eval", "--ckpt", final, "--data", shards]):
                r = self.tera(*args, timeout=30)
                self.assert_refused(r, [os.path.normpath(os.path.join(final, bad)), kind, "meta.json"])
            self.assert_unchanged(before, final)
        # A relative path resolves beside meta.json, not against the working directory.
        with open(os.path.join(final, "tok.json"), "w") as f:
            f.write(embedded)
        meta["tokenizer"] = "tok.json"
        with open(meta_path, "w") as f:
            json.dump(meta, f)
        self.ok(self.tera("generate", "--ckpt", "final", "--prompt", "a", "-n", "2", cwd=self.dir))
        self.ok(self.tera("generate", "--ckpt", os.path.join(self.dir, "final"), "--prompt", "a", "-n", "2", cwd="/"))
        # User-given --tokenizer paths, and a manifest's tokenizer file replaced by a FIFO.
        for args in (["tokenize", "encode", "-t", "/dev/zero", "-i", CORPUS, "-o", self.path("s2")],
                     ["tokenize", "stats", "-t", fifo, "-i", CORPUS],
                     ["tokenize", "decode", "-i", shards, "-t", "/dev/zero", "--out", self.path("x.txt")]):
            self.assert_refused(self.tera(*args, timeout=30), ["not a regular file"])
        self.assertFalse(os.path.exists(self.path("s2")) or os.path.exists(self.path("x.txt")))
        # A shard the manifest lists, replaced by a FIFO or a link to a device: refused, never waited on.
        for name, make in (("fifo", os.mkfifo), ("device", lambda p: os.symlink("/dev/zero", p))):
            for victim in ("train-00000.tok", "val-00000.tok", "manifest.json"):
                other = self.copy("shards", f"shards-{name}-{victim}")
                os.remove(os.path.join(other, victim))
                make(os.path.join(other, victim))
                r = self.tera("tokenize", "decode", "-i", other, "--out", self.path("x.txt"), timeout=30)
                self.assert_refused(r, [victim, "not a regular file"])
                if victim != "train-00000.tok":  # eval reads the val split
                    r = self.tera("eval", "--ckpt", final, "--data", other, timeout=30)
                    self.assert_refused(r, [victim, "not a regular file"])
        os.remove(os.path.join(shards, "tokenizer.json"))
        os.mkfifo(os.path.join(shards, "tokenizer.json"))
        self.assert_refused(self.tera("tokenize", "decode", "-i", shards, "--out", self.path("x.txt"), timeout=30),
                            ["tokenizer.json", "FIFO"])
        self.assert_refused(self.tera("ckpt", "import", fifo, "--out", self.path("imp"), timeout=30),
                            [fifo, "not a regular file"])
        for model in ("bpe", "bytes"):  # text encoded in memory, and text as byte tokens
            r = self.tera("eval", "--ckpt", os.path.join(self.fx, model, "final"), "--data", fifo, timeout=30)
            self.assert_refused(r, [fifo, "FIFO"])

    # Row 11: --batches past the data is refused with the number the data holds; progress for long evaluations.
    def test_row11_eval_batches_past_data_refused(self):
        final = os.path.join(self.fx, "bytes", "final")
        r = self.tera("eval", "--ckpt", final, "--data", CORPUS, "--batches", "100000000")
        # tiny_corpus.txt: 1774 bytes -> 110 windows of 16 tokens, micro_batch 2 -> 55 batches.
        self.assert_refused(r, ["--batches 100000000", "holds only 55 batches", "110 windows"])
        self.assertEqual(r.stdout, "")
        r = self.ok(self.tera("eval", "--ckpt", final, "--data", CORPUS, "--batches", "55"))
        self.assertIn("evaluated 110 windows", r.stdout)
        every = self.ok(self.tera("eval", "--ckpt", final, "--data", CORPUS, env={"TERA_TEST_EVAL_PROGRESS_S": "0"}))
        progress = [l for l in every.stderr.splitlines() if l.startswith("eval: ")]
        self.assertGreater(len(progress), 10, every.stderr)
        self.assertIn("windows (", progress[0])
        self.assertIn("eta", progress[0])
        self.assertEqual(every.stdout, r.stdout)  # stdout holds the result only
        quiet = self.ok(self.tera("eval", "-q", "--ckpt", final, "--data", CORPUS,
                                  env={"TERA_TEST_EVAL_PROGRESS_S": "0"}))
        self.assertEqual(quiet.stderr, "")

    # Issue 16: generate and eval take --backend; one this binary does not have is refused naming the ones it has.
    def test_generate_and_eval_unknown_backend_refused(self):
        final = os.path.join(self.fx, "bytes", "final")
        r = self.tera("generate", final, "--prompt", "a", "--tokens", "2", "--backend", "tpu")
        self.assert_refused(r, ["--backend tpu", "cpu, cpu-guarded"])
        r = self.tera("eval", final, "--data", CORPUS, "--batches", "1", "--backend", "tpu")
        self.assert_refused(r, ["--backend tpu", "cpu, cpu-guarded"])
        a = self.ok(self.tera("eval", final, "--data", CORPUS, "--batches", "3"))
        b = self.ok(self.tera("eval", final, "--data", CORPUS, "--batches", "3", "--backend", "cpu-guarded"))
        self.assertEqual(a.stdout, b.stdout)  # the same kernels, the same numbers

    # Row 13: config.json is checked against the tensors; an untied head is refused, not dropped.
    def test_row13_import_checks_config_and_untied_head(self):
        hf = self.copy("hf")
        st = os.path.join(hf, "model.safetensors")
        cfg_path = os.path.join(hf, "config.json")
        cfg = load_json(cfg_path)
        tensors, meta = read_safetensors(st)
        out = self.path("imported")
        for field, wrong in (("n_layer", 2), ("n_embd", 32), ("n_head", 3), ("vocab_size", 256),
                             ("n_positions", 1024)):
            with open(cfg_path, "w") as f:
                json.dump(dict(cfg, **{field: wrong}), f)
            r = self.tera("ckpt", "import", st, "--out", out)
            self.assert_refused(r, [field, cfg_path])
            self.assertFalse(os.path.exists(out))
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        wte = tensors["transformer.wte.weight"]
        # A head that differs from wte while config.json says tied: refused, naming both (issue 35 row 12:
        # with tie_word_embeddings = false the same file is an untied GPT-2, imported with its head).
        head = (wte[0], [round_to("F32", v + 1.0) for v in wte[1]])
        write_safetensors(st, dict(tensors, **{"lm_head.weight": head}), meta)
        r = self.tera("ckpt", "import", st, "--out", out)
        self.assert_refused(r, ["tie_word_embeddings = true", "lm_head.weight", "disagree"])
        self.assertFalse(os.path.exists(out))
        with open(cfg_path, "w") as f:
            json.dump(dict(cfg, tie_word_embeddings=False), f)
        self.ok(self.tera("ckpt", "import", st, "--out", out))
        self.assertFalse(load_json(os.path.join(out, "meta.json"))["model"]["tie_embeddings"])
        imported, _ = read_safetensors(os.path.join(out, "model.safetensors"))
        self.assertEqual(imported["lm_head.weight"], (head[0], head[1]))
        shutil.rmtree(out)
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        # A layer the config does not have (h.1 without h.1.ln_1): refused, named.
        extra = {"transformer.h.1.mlp.c_fc.weight": tensors["transformer.h.0.mlp.c_fc.weight"]}
        write_safetensors(st, dict(tensors, **extra), meta)
        self.assert_refused(self.tera("ckpt", "import", st, "--out", out), ["transformer.h.1.mlp.c_fc.weight", "drop"])
        # The head stored twice, equal to wte (tied): imported.
        write_safetensors(st, dict(tensors, **{"lm_head.weight": wte}), meta)
        self.ok(self.tera("ckpt", "import", st, "--out", out))
        self.assertTrue(os.path.isfile(os.path.join(out, "meta.json")))

    # Issue 35 row 15: GPT2Config fields that change the function are refused by name.
    def test_round2_row15_gpt2_function_fields_refused(self):
        hf = self.copy("hf")
        st, cfg_path = os.path.join(hf, "model.safetensors"), os.path.join(hf, "config.json")
        cfg = load_json(cfg_path)
        out = self.path("imported")
        for field, value in (("activation_function", "gelu"), ("activation_function", "relu"),
                             ("layer_norm_epsilon", 1e-6), ("scale_attn_weights", False),
                             ("scale_attn_by_inverse_layer_idx", True)):
            with open(cfg_path, "w") as f:
                json.dump(dict(cfg, **{field: value}), f)
            before = snapshot(hf)
            for args in (["ckpt", "import", st, "--out", out], ["generate", st, "--prompt", "a", "-n", "1"]):
                self.assert_refused(self.tera(*args), [field, cfg_path])
            self.assertFalse(os.path.exists(out))
            self.assert_unchanged(before, hf)
        # What tera computes is accepted under each of its names.
        for act in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
            with open(cfg_path, "w") as f:
                json.dump(dict(cfg, activation_function=act, reorder_and_upcast_attn=True), f)
            self.ok(self.tera("ckpt", "import", st, "--out", out, "--force"))

    # Issue 35 row 15: nan or inf weights are refused naming the tensor, in import and in ckpt.init.
    def test_round2_row15_nonfinite_weights_refused(self):
        hf = self.copy("hf")
        st = os.path.join(hf, "model.safetensors")
        tensors, meta = read_safetensors(st)
        shape, values = tensors["transformer.h.0.mlp.c_fc.bias"]
        for bad in (float("nan"), float("inf")):
            write_safetensors(st, dict(tensors, **{"transformer.h.0.mlp.c_fc.bias": (shape, [bad] + values[1:])}), meta)
            before = snapshot(hf)
            r = self.tera("ckpt", "import", st, "--out", self.path("imported"))
            self.assert_refused(r, ["transformer.h.0.mlp.c_fc.bias", "non-finite", "element 0"])
            self.assert_unchanged(before, hf)
            self.assertFalse(os.path.exists(self.path("imported")))
        cfg = self.write("init.toml", tiny_config(extra=f'tokenizer = "{hf}"').replace(
            "vocab = 256", "vocab = 300") + f'\n[ckpt]\ninit = "{st}"\n')
        r = self.tera("train", "-c", cfg, "--set", "out.dir=o", "--set", "data.train=" + os.path.join(self.fx, "shards"))
        self.assert_refused(r, ["ckpt.init", "transformer.h.0.mlp.c_fc.bias", "non-finite"], code=2)
        self.assertFalse(os.path.exists(self.path("o", "final")))

    # Issue 35 row 15: F16 and BF16 GPT-2 weights are read (exactly widened), as Llama's are.
    def test_round2_row15_half_precision_gpt2_read(self):
        hf = self.copy("hf")
        st = os.path.join(hf, "model.safetensors")
        tensors, meta = read_safetensors(st)
        for dtype in ("F16", "BF16"):
            half = {n: (shape, [round_to(dtype, v) for v in vals]) for n, (shape, vals) in tensors.items()}
            write_safetensors(st, tensors, meta, dtype=dtype)
            out = self.path("imported-" + dtype)
            self.ok(self.tera("ckpt", "import", st, "--out", out))
            got, _ = read_safetensors(os.path.join(out, "model.safetensors"))
            self.assertEqual(got["h.0.ln_1.bias"], half["transformer.h.0.ln_1.bias"], dtype)
            c_fc = half["transformer.h.0.mlp.c_fc.weight"]  # Conv1D [in, out] -> tera [out, in]
            rows, cols = c_fc[0]
            self.assertEqual(got["h.0.mlp.c_fc.weight"][1], [c_fc[1][r * cols + c] for c in range(cols) for r in range(rows)])

    # Issue 35 row 14: --val-fraction cuts text without ASCII spaces (CJK, emoji,
    # NUL-separated records) at a UTF-8 character boundary: the val split is
    # never empty when asked for, the splits decode back to the text, and a
    # split shorter than a sequence is warned about.
    def test_round2_row14_val_split_of_text_without_spaces(self):
        texts = {"cjk.txt": "日本語のテキストです。" * 211, "emoji.txt": "😀🎉🚀x" * 257,
                 "nul.txt": "\0".join(f"record{i}" for i in range(700))}
        for name, text in texts.items():
            src = self.write(name, text)
            out = self.path("s-" + name)
            r = self.ok(self.tera("tokenize", "encode", "-t", "bytes", "-i", src, "-o", out, "--val-fraction", "0.13"))
            self.assertIn("val split holds", r.stderr)  # fewer than 1024 tokens
            manifest = load_json(os.path.join(out, "manifest.json"))
            val = manifest["splits"]["val"]["tokens"]
            self.assertGreater(val, 0, name)
            parts = []
            for split in ("train", "val"):
                self.ok(self.tera("tokenize", "decode", "-i", out, "--split", split, "-o", self.path(f"{name}.{split}")))
                with open(self.path(f"{name}.{split}"), "rb") as f:
                    parts.append(f.read())
            parts[1].decode("utf-8")  # a whole number of characters
            self.assertEqual(parts[0] + parts[1], text.encode(), name)
            self.assertAlmostEqual(len(parts[1]) / len(text.encode()), 0.13, delta=0.01)

    # Issue 35 row 16: ckpt.init from a model of tokenizer A on shards of
    # tokenizer B with the same vocabulary size is refused, as eval refuses it.
    def test_round2_row16_ckpt_init_of_another_tokenizer_refused(self):
        with open(CORPUS) as f:
            other = self.write("other.txt", f.read().swapcase())  # other pair counts, other merges
        self.ok(self.tera("tokenize", "train", "-i", other, "--vocab", "300", "--out", self.path("tokB.json")))
        shards_b = self.path("shardsB")
        self.ok(self.tera("tokenize", "encode", "-t", self.path("tokB.json"), "-i", CORPUS, "-o", shards_b,
                          "--val-fraction", "0.2"))
        model_a = os.path.join(self.fx, "bpe", "final")  # trained on tok.json's shards, vocab 300
        r = self.tera("eval", model_a, "--data", shards_b)
        self.assert_refused(r, ["different tokenizer"])
        cfg = self.write("b.toml", tiny_config().replace("vocab = 256", "vocab = 300"))
        r = self.tera("train", "-c", cfg, "--set", f"data.train={shards_b}", "--set", f"ckpt.init={model_a}",
                      "--set", "out.dir=ob")
        self.assert_refused(r, ["ckpt.init", "another tokenizer", "fingerprint"])
        self.assertFalse(os.path.exists(self.path("ob", "final")))
        # The model's own tokenizer's shards: accepted.
        self.ok(self.tera("train", "-q", "-c", cfg, "--set", "data.train=" + os.path.join(self.fx, "shards"),
                          "--set", f"ckpt.init={model_a}", "--set", "out.dir=oa"))

    # Issue 35, unclear errors: a file that is not a model's weights is named for what it is.
    def test_round2_non_safetensors_model_named(self):
        hf = self.copy("hf")
        ck = self.copy("bytes/ckpt", "ck")
        index = self.write("hf/model.safetensors.index.json", json.dumps({"weight_map": {}}))
        text = self.write("notes.txt", "These are my notes about the run.\n")
        cases = [(index, ["sharded over several safetensors files"]),
                 (os.path.join(ck, "latest"), ["pointer to its newest checkpoint", ck]),
                 (os.path.join(ck, "step-00000006", "meta.json"), ["checkpoint's metadata",
                                                                    os.path.join(ck, "step-00000006")]),
                 (os.path.join(hf, "config.json"), ["not weights", ".safetensors file beside it"]),
                 (text, ["not a safetensors file", "a text file", "These are my notes"])]
        for path, needles in cases:
            for args in (["generate", path, "--prompt", "a", "-n", "1"], ["eval", path, "--data", CORPUS],
                         ["ckpt", "export", path, "--out", self.path("x", "m.safetensors")],
                         ["ckpt", "import", path, "--out", self.path("imp")], ["ckpt", "inspect", path]):
                r = self.tera(*args)
                self.assert_refused(r, [path] + needles)
                self.assertNotIn("header length", r.stderr)
        self.assertFalse(os.path.exists(self.path("x")) or os.path.exists(self.path("imp")))

    # Row 14: export writes the BPE tokenizer (tokenizer.json, vocab.json + merges.txt); import reads it back.
    def test_row14_export_import_keeps_bpe_tokenizer(self):
        final = os.path.join(self.fx, "bpe", "final")
        out = self.path("hf", "model.safetensors")
        self.ok(self.tera("ckpt", "export", final, "--out", out))
        vocab = load_json(self.path("hf", "vocab.json"))
        self.assertEqual(len(vocab), 300)
        self.assertIn("<|endoftext|>", vocab)
        cfg = load_json(self.path("hf", "config.json"))  # GPT2Config's default 50256 is not this model's
        self.assertEqual((cfg["bos_token_id"], cfg["eos_token_id"]), (vocab["<|endoftext|>"],) * 2)
        merges = read_text(self.path("hf", "merges.txt")).splitlines()
        self.assertTrue(merges[0].startswith("#version"))
        self.assertEqual(len(merges) - 1, 300 - 256 - 1)
        hf_tok = load_json(self.path("hf", "tokenizer.json"))  # what import reads first, as Hugging Face's libraries
        self.assertEqual(hf_tok["model"]["type"], "BPE")
        self.assertEqual(len(hf_tok["model"]["merges"]), 300 - 256 - 1)
        r = self.ok(self.tera("ckpt", "import", out, "--out", self.path("imported")))
        self.assertIn("BPE tokenizer of 300 tokens", r.stdout)
        # The imported model generates the same text and evaluates its own shards.
        gen = ["--prompt", "The cat", "-n", "8", "-t", "0", "--ids"]
        a = self.ok(self.tera("generate", "--ckpt", final, *gen))
        b = self.ok(self.tera("generate", "--ckpt", self.path("imported"), *gen))
        self.assertEqual(a.stdout, b.stdout)
        ids = [int(i) for i in b.stdout.strip().splitlines()[-1].split()]
        self.assertTrue(all(0 <= i < 300 for i in ids))
        shards = os.path.join(self.fx, "shards")
        e1 = self.ok(self.tera("eval", "--ckpt", final, "--data", shards))
        e2 = self.ok(self.tera("eval", "--ckpt", self.path("imported"), "--data", shards))
        l1, l2 = (float(e.stdout.splitlines()[-1].split("=")[1]) for e in (e1, e2))
        self.assertAlmostEqual(l1, l2, delta=1e-5 * l1)  # micro-batch sizes differ (final/ records its run's)
        # A byte-level model exports no tokenizer files, and imports as byte-level.
        self.ok(self.tera("ckpt", "export", os.path.join(self.fx, "bytes", "final"), "--out", self.path("b", "m.safetensors")))
        self.assertEqual(sorted(os.listdir(self.path("b"))), ["config.json", "m.safetensors"])
        r = self.ok(self.tera("ckpt", "import", self.path("b", "m.safetensors"), "--out", self.path("bimp")))
        self.assertIn("byte-level", r.stdout)
        self.assertEqual(load_json(self.path("bimp", "meta.json"))["tokenizer"], "bytes")

    # Row 16 (and "every output checked before any work"): unwritable outputs are refused at start-up.
    def test_row16_outputs_checked_before_work(self):
        self.write("afile", "x\n")
        hf = os.path.join(self.fx, "hf", "model.safetensors")
        bad_file = self.path("afile", "out.txt")  # its parent is a regular file
        missing = self.path("nodir", "out.txt")   # its parent does not exist
        tmp_before = set(glob.glob(os.path.join(tempfile.gettempdir(), "tera-calibrate-*")))
        cases = [
            (["tokenize", "train", "-i", CORPUS, "--vocab", "300", "--out", missing], missing),
            (["tokenize", "decode", "-i", os.path.join(self.fx, "shards"), "--out", missing], missing),
            (["tokenize", "encode", "-t", "bytes", "-i", CORPUS, "-o", bad_file], bad_file),
            (["ckpt", "import", hf, "--out", bad_file], bad_file),
            (["ckpt", "export", os.path.join(self.fx, "bpe", "final"), "--out", bad_file], bad_file),
            (["ckpt", "reshard", os.path.join(self.fx, "bytes", "ckpt", "step-00000006"), "--layout", "tp=2",
              "--out", bad_file], bad_file),
            (["calibrate", "--out", bad_file], bad_file),
        ]
        for args, needle in cases:
            before = snapshot(self.dir)
            r = self.tera(*args, timeout=60)
            self.assert_refused(r, ["--out", needle])
            self.assertNotIn("tera calibrate:", r.stdout)  # no work before the refusal
            self.assert_unchanged(before, self.dir)
            self.assertFalse(os.path.exists(self.path("nodir")))
        self.assertEqual(set(glob.glob(os.path.join(tempfile.gettempdir(), "tera-calibrate-*"))), tmp_before)
        # A command refused after its output was probed leaves no directories it created behind.
        notckpt = self.write("notckpt/readme.txt", "not a checkpoint\n")
        for args in (["ckpt", "import", notckpt, "--out", self.path("new", "sub", "m")],
                     ["ckpt", "export", os.path.dirname(notckpt), "--out", self.path("new", "sub", "m.safetensors")]):
            r = self.tera(*args)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertFalse(os.path.exists(self.path("new")), args)
        # calibrate's default output is the user's configuration directory, never the tracked preset.
        tracked = os.path.join(REPO, "configs", "clusters", "local.toml")
        tracked_before = snapshot(tracked) if os.path.exists(tracked) else None
        xdg = self.path("xdg")
        preset = self.write("xdg/tera/clusters/local.toml", "# mine\n")
        before = snapshot(preset)
        cfgdir = self.path("cfgdir")  # where an old build would write its default (instead of configs/)
        env = {"XDG_CONFIG_HOME": xdg, "TERA_CONFIG_DIR": cfgdir}
        r = self.tera("calibrate", "--seconds", "0.01", env=env, timeout=60)
        self.assert_refused(r, [preset, "already exists", "--force"])
        self.assertEqual(r.stdout, "")  # refused before measuring anything
        self.assert_unchanged(before, preset)
        self.assertFalse(os.path.exists(cfgdir))
        if tracked_before is not None:
            self.assert_unchanged(tracked_before, tracked)
        help_text = self.tera("calibrate", "--help", env={"XDG_CONFIG_HOME": xdg}).stdout
        self.assertIn(preset, help_text)


if __name__ == "__main__":
    main()

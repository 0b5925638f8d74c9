"""Robustness of what tera writes (issue 35, rows 1, 1b, 3, 4, 5, 6): every
output of every subcommand against every input (same file, hard link,
symbolic link, a file of an input directory) and against the other outputs,
devices and FIFOs written in place and links written through, a resume that
would replace later checkpoints, another run's final weights, and a metrics
file that cannot be written. Each case asserts the exit code, the message's
key words and that what the user had is still there byte for byte."""
import json
import os
import shutil
import signal
import stat
import threading

from harness import CORPUS, TERA, RobustnessCase, main, snapshot, tiny_config

SIM = ["simulate", "--model", "gpt2-124m", "--cluster", "selene", "--global-batch", "8"]
SWEEP = SIM + ["--sweep", "weak", "--from", "8", "--to", "16"]


class FifoReader:
    """Reads a FIFO to its end on a thread (the writer's open blocks until a reader opens)."""

    def __init__(self, path):
        self.data = b""
        self.thread = threading.Thread(target=self._read, args=(path,), daemon=True)
        self.thread.start()

    def _read(self, path):
        with open(path, "rb") as f:
            self.data = f.read()

    def join(self):
        self.thread.join(timeout=120)
        return self.data


class OutputsRobustness(RobustnessCase):
    quiet_train = True

    def config(self, steps=4, name="run.toml", corpus=CORPUS):
        return super().config(steps=steps, name=name, corpus=corpus)

    def device(self, name, major, minor):
        """A character device made in the test's directory (root only), or None."""
        p = self.path(name)
        try:
            os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(major, minor))
        except OSError:
            return None
        return p

    # Row 1: an output of `tera train` that is one of its inputs, however it is named.
    def test_row01_train_output_is_an_input_refused(self):
        corpus = shutil.copy(CORPUS, self.path("corpus.txt"))
        cfg = self.config(corpus=corpus)
        os.link(cfg, self.path("hard.toml"))
        os.symlink(corpus, self.path("soft.txt"))
        self.ok(self.tera("tokenize", "encode", "-t", "bytes", "-i", corpus, "-o", "shards", "--val-fraction", "0.2"))
        before = {p: snapshot(p) for p in (cfg, corpus, self.path("shards"))}
        cases = [("--metrics", cfg, [], "--config"), ("--metrics", self.path("hard.toml"), [], "--config"),
                 ("--trace", self.path("soft.txt"), [], "data.train"),
                 ("--metrics", self.path("shards", "train-00000.tok"), ["data.train=shards"], "data.train"),
                 ("--trace", self.path("shards", "manifest.json"), ["data.train=shards"], "data.train")]
        for flag, out, sets, what in cases:
            r = self.train(cfg, "out.dir=out", *sets, extra_args=(flag, out))
            self.assert_refused(r, [flag, out, "is the same file as", what, "an input of this command"])
            self.assertFalse(os.path.exists(self.path("out")), "refused before any work")
        for p, snap in before.items():
            self.assert_unchanged(snap, p)
        # ckpt.init inside the out.dir/final this run replaces (even with --start-over).
        self.ok(self.train(cfg, "out.dir=out"))
        before = snapshot(self.path("out"))
        r = self.train(cfg, "out.dir=out", f"ckpt.init={self.path('out', 'final')}", extra_args=("--start-over",))
        self.assert_refused(r, ["out.dir", "holds ckpt.init", "replaces or deletes"])
        self.assert_unchanged(before, self.path("out"))

    # Row 1: simulate's --plot and --trace never replace the presets it reads.
    def test_row01_simulate_output_is_an_input_refused(self):
        model = self.write("m.toml", "[model]\nlayers = 12\nhidden = 768\nheads = 12\nseq_len = 1024\nvocab = 50257\n")
        cluster = self.path("c.toml")
        shutil.copy(os.path.join(os.path.dirname(__file__), "..", "..", "configs", "clusters", "selene.toml"), cluster)
        before = {p: snapshot(p) for p in (model, cluster)}
        base = ["simulate", "--model", model, "--cluster", cluster, "--global-batch", "8"]
        r = self.tera(*base, "--layout", "tp=1,pp=1,dp=8", "--trace", model)
        self.assert_refused(r, ["--trace", "is the same file as", "--model"])
        r = self.tera(*base, "--sweep", "weak", "--from", "8", "--to", "16", "--plot", cluster)
        self.assert_refused(r, ["--plot", "is the same file as", "--cluster"])
        # The same file by another name: a hard link, a symlink.
        os.link(model, self.path("hard.toml"))
        os.symlink(cluster, self.path("soft.toml"))
        r = self.tera(*base, "--layout", "tp=1,pp=1,dp=8", "--trace", self.path("hard.toml"))
        self.assert_refused(r, ["--trace", "is the same file as", "--model"])
        r = self.tera(*base, "--sweep", "weak", "--from", "8", "--to", "16", "--plot", self.path("soft.toml"))
        self.assert_refused(r, ["--plot", "is the same file as", "--cluster"])
        for p, snap in before.items():
            self.assert_unchanged(snap, p)

    # Row 1: export never writes its config.json over the one it reads beside a safetensors source.
    def test_row01_export_beside_its_source_refused(self):
        cfg = self.config()
        self.ok(self.train(cfg, "out.dir=out"))
        self.ok(self.tera("ckpt", "export", "out/final", "--out", "hf/model.safetensors"))
        before = snapshot(self.path("hf"))
        r = self.tera("ckpt", "export", "hf/model.safetensors", "--out", "hf/model2.safetensors", "--force")
        self.assert_refused(r, ["config.json", "is the same file as", "an input of this command"])
        self.assert_unchanged(before, self.path("hf"))

    # Row 1b: a device or FIFO is written in place, a link to a file is written through.
    def test_row01b_devices_fifos_and_links_written_in_place(self):
        cfg = self.config()
        null = self.device("null", 1, 3)
        os.mkfifo(self.path("fifo"))
        os.symlink("fifo", self.path("to-fifo"))
        self.write("real.json", "keep me until replaced\n")
        os.symlink("real.json", self.path("link.json"))
        targets = [("link.json", None), ("fifo", "fifo"), ("to-fifo", "fifo")]
        if null:
            os.symlink("null", self.path("to-null"))
            targets += [("null", None), ("to-null", None)]
        for i, (name, fifo) in enumerate(targets):
            reader = FifoReader(self.path(fifo)) if fifo else None
            self.ok(self.train(cfg, f"out.dir=out{i}", extra_args=("--trace", name)))
            if reader:
                self.assertIn(b"traceEvents", reader.join())
        self.assertTrue(stat.S_ISFIFO(os.lstat(self.path("fifo")).st_mode))
        self.assertTrue(os.path.islink(self.path("link.json")))
        with open(self.path("real.json")) as f:
            self.assertIn("traceEvents", json.load(f))
        if null:
            self.assertTrue(stat.S_ISCHR(os.lstat(null).st_mode), "the device is still a device")
            self.assertTrue(os.path.islink(self.path("to-null")))
            for args in (SIM + ["--layout", "tp=1,pp=1,dp=8", "--trace", null], SWEEP + ["--plot", null]):
                self.ok(self.tera(*args))
            self.assertTrue(stat.S_ISCHR(os.lstat(null).st_mode))
        reader = FifoReader(self.path("fifo"))
        self.ok(self.tera(*SWEEP, "--plot", self.path("to-fifo")))
        self.assertIn(b"<svg", reader.join())
        # --metrics into a FIFO on a resumed run: appended to as it is (nothing to truncate).
        self.ok(self.train(cfg, "out.dir=m", "ckpt.dir=mck", "ckpt.every=2"))
        reader = FifoReader(self.path("fifo"))
        self.ok(self.train(cfg, "out.dir=m", "ckpt.dir=mck", "train.steps=6",
                           extra_args=("--resume", "auto", "--change-schedule", "--metrics", "fifo")))
        self.assertEqual([json.loads(l)["step"] for l in reader.join().decode().splitlines()], [5, 6])
        self.assertEqual(sorted(n for n in os.listdir(self.dir) if ".tmp." in n), [], "no temporaries left")
        # ckpt export's --out through a link to a file: the target replaced, the link kept.
        self.ok(self.train(cfg, "out.dir=e"))
        os.makedirs(self.path("hf"))
        self.write(os.path.join("hf", "real.safetensors"), "old bytes\n")
        os.symlink("real.safetensors", self.path("hf", "model.safetensors"))
        self.ok(self.tera("ckpt", "export", "e/final", "--out", "hf/model.safetensors", "--force"))
        self.assertTrue(os.path.islink(self.path("hf", "model.safetensors")))
        with open(self.path("hf", "real.safetensors"), "rb") as f:
            self.assertNotEqual(f.read(), b"old bytes\n")
        self.ok(self.tera("ckpt", "inspect", "hf/model.safetensors"))

    # Row 3: resuming an earlier checkpoint of a ckpt.dir that holds later ones.
    def test_row03_resume_before_later_checkpoints_refused(self):
        cfg = self.config(steps=8)
        self.ok(self.train(cfg, "ckpt.dir=ck", "ckpt.every=2", "ckpt.keep=5"))
        before = snapshot(self.path("ck"))
        final = snapshot(self.path("out"))
        r = self.train(cfg, "ckpt.dir=ck", "ckpt.every=2", extra_args=("--resume", self.path("ck", "step-00000004")))
        self.assert_refused(r, ["newer than step 4", "step-00000006", "step-00000008", "--discard-newer",
                                "--resume auto"])
        self.assert_unchanged(before, self.path("ck"))
        self.assert_unchanged(final, self.path("out"))
        r = self.ok(self.train(cfg, "ckpt.dir=ck", "ckpt.every=2",
                               extra_args=("--resume", self.path("ck", "step-00000004"), "--discard-newer")))
        self.assertIn("--discard-newer: deleted step-00000008, step-00000006", r.stdout + r.stderr)
        # A later final alone (no checkpoint directory) counts too.
        self.ok(self.train(cfg, "out.dir=o2", "ckpt.dir=o2/ck", "ckpt.every=4"))
        shutil.rmtree(self.path("o2", "ck", "step-00000008"))
        before = snapshot(self.path("o2"))
        r = self.train(cfg, "out.dir=o2", "ckpt.dir=o2/ck", "ckpt.every=4", extra_args=("--resume", "auto"))
        self.assert_refused(r, ["final weights", "(step 8)", "newer than step 4", "--discard-newer"])
        self.assert_unchanged(before, self.path("o2"))

    # Row 4: outputs that overlap each other are refused at start.
    def test_row04_overlapping_outputs_refused(self):
        cfg = self.config()
        self.ok(self.train(cfg, "out.dir=out", "ckpt.dir=ck", "ckpt.every=2"))
        before = {d: snapshot(self.path(d)) for d in ("out", "ck")}
        cases = [(["out.dir=out", "ckpt.dir=out/final/ck"], (), ["ckpt.dir", "inside", "out/final"]),
                 (["out.dir=ck/step-00000002/o", "ckpt.dir=ck"], (), ["out.dir", "inside", "step-00000002"]),
                 (["out.dir=out", "ckpt.dir=ck"], ("--trace", "out/final/t.json"), ["--trace", "inside", "out/final"]),
                 (["out.dir=out", "ckpt.dir=ck"], ("--metrics", "m.jsonl", "--trace", "m.jsonl"),
                  ["--metrics", "--trace", "same file"])]
        for sets, extra, needles in cases:
            r = self.train(cfg, *sets, extra_args=extra + ("--start-over",))
            self.assert_refused(r, needles + ["overlap" if "same file" not in needles else "give each output"])
        for d, snap in before.items():
            self.assert_unchanged(snap, self.path(d))

    # Row 5: a fresh run into an out.dir holding another run's final weights.
    def test_row05_fresh_run_over_another_runs_final_refused(self):
        cfg = self.config()
        self.ok(self.train(cfg))  # the default out.dir, "out"
        before = snapshot(self.path("out"))
        other = self.config(name="other.toml")
        r = self.train(other, "train.seed=7")
        self.assert_refused(r, ["out.dir out", "final weights of an earlier run", "--start-over", "--resume auto"])
        self.assert_unchanged(before, self.path("out"))
        r = self.train(other, "train.seed=7", extra_args=("--resume", "auto"))  # nothing to continue: still refused
        self.assert_refused(r, ["--resume auto found no checkpoint", "--start-over instead"])
        self.assert_unchanged(before, self.path("out"))
        self.ok(self.train(other, "train.seed=7", extra_args=("--start-over",)))
        self.assertNotEqual(before, snapshot(self.path("out")))

    # Row 6: a metrics file that cannot be written (a full device) is said at
    # once and at the end, and the exit code says the record is incomplete;
    # the weights are still written.
    def test_row06_metrics_write_failure_reported(self):
        full = self.device("full", 1, 7)  # /dev/full's numbers
        if not full:
            self.skipTest("mknod needs root")
        cfg = self.config(steps=3)
        r = self.train(cfg, "out.dir=out", extra_args=("--metrics", full))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn(f"--metrics {full}: writing step 1 failed (No space left on device)", r.stderr)
        self.assertIn("training goes on", r.stderr)
        self.assertIn("the run's record is incomplete", r.stderr)
        self.assertIn("the metrics file was not written", r.stdout)
        self.assertTrue(os.path.exists(self.path("out", "final", "meta.json")))
        self.assertTrue(stat.S_ISCHR(os.lstat(full).st_mode))
        # The same when the run is stopped: the checkpoint is written, the exit code is 1.
        p = self.start([TERA, "train", "-c", self.config(steps=100000, name="long.toml"), "--set", "ckpt.dir=ck",
                        "--set", "out.dir=out2", "--metrics", full])
        self.wait_for(p, "step      2/")
        p.send_signal(signal.SIGTERM)
        rc, text = self.finish(p)
        self.assertEqual(rc, 1, text)
        self.assertIn("SIGTERM received", text)
        self.assertIn("the run's record is incomplete", text)
        self.assert_latest_valid(self.path("ck"))

    # UX: out.dir or ckpt.dir = "/" is refused.
    def test_root_directory_as_output_refused(self):
        cfg = self.config()
        for key in ("out.dir", "ckpt.dir"):
            self.assert_refused(self.train(cfg, f"{key}=/"), [key, "root directory"])


if __name__ == "__main__":
    main()

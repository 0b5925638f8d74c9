"""Robustness of what tera says and does not accept without a word (issue 35,
"Unclear errors and UX"): config errors under mpirun printed once, resumes
that change the optimizer or carry a ckpt.init, a finished run resumed, a
bad TERA_GPU_EMU_WARP, tokenize's --out checks and stats verification, a
full disk leaving no temporaries, oversubscribed cores and the trace's track
names. Each case asserts the exit code, the message's key words and that
what the user had is still there."""
import json
import os
import shutil
import subprocess

from harness import CORPUS, MPI_ENV, MPIRUN, TERA, RobustnessCase, main, run, snapshot, tiny_config


class UxRobustness(RobustnessCase):
    quiet_train = True

    def config(self, steps=4, name="run.toml"):
        return super().config(steps=steps, name=name)

    # A config error under mpirun: one message for the job, not one per rank.
    def test_config_error_under_mpirun_printed_once(self):
        cfg = self.config()
        for sets in (["model.heads=3"], ["parallel.tp=2", "model.heads=3", "model.hidden=18"]):
            r = run("train", "-c", cfg, *[a for s in sets for a in ("--set", s)], launcher=MPIRUN + ["-n", "2"],
                    env=MPI_ENV, cwd=self.dir)
            self.assertNotEqual(r.returncode, 0)
            self.assertEqual((r.stdout + r.stderr).count("tera: error:"), 1, r.stdout + r.stderr)
            self.assertNotIn("MPI_ABORT", r.stdout + r.stderr)

    # Resuming with another optimizer, or with a ckpt.init the resume ignores.
    def test_resume_with_changed_optimizer_refused_and_init_noted(self):
        cfg = self.config(steps=6)
        self.ok(self.train(cfg, "ckpt.dir=ck", "ckpt.every=3", "out.dir=o1"))
        before = snapshot(self.path("ck"))
        for key, value in (("weight_decay", "0.3"), ("beta1", "0.8"), ("clip", "0.5"), ("eps", "1e-6")):
            r = self.train(cfg, "ckpt.dir=ck", f"train.{key}={value}", "out.dir=o1", extra_args=("--resume", "auto"))
            self.assert_refused(r, [f"train.{key}", "--change-schedule"])
        self.assert_unchanged(before, self.path("ck"))
        r = self.ok(self.train(cfg, "ckpt.dir=ck", "train.clip=0.5", "train.steps=8", "out.dir=o1",
                               extra_args=("--resume", "auto", "--change-schedule")))
        self.assertIn("train.clip 1 -> 0.5", r.stdout + r.stderr)
        # ckpt.init on a resumed run is not read, and says so.
        self.ok(self.train(cfg, "out.dir=other"))
        r = self.ok(self.train(cfg, "ckpt.dir=ck", "train.steps=8", "train.clip=0.5", "out.dir=o1",
                               f"ckpt.init={self.path('other', 'final')}", extra_args=("--resume", "auto")))
        self.assertIn("ckpt.init", r.stdout + r.stderr)
        self.assertIn("is not read", r.stdout + r.stderr)

    # Resuming a finished run: nothing to train, said as such.
    def test_resume_of_a_finished_run(self):
        cfg = self.config(steps=4)
        self.ok(self.train(cfg, "ckpt.dir=ck"))
        r = self.ok(self.tera("train", "-c", cfg, "--set", "ckpt.dir=ck", "--resume", "auto"))
        self.assertIn("already complete at step 4", r.stdout)
        self.assertNotIn("0.0000 -> 0.0000", r.stdout)

    def test_gpu_emu_warp_refused(self):
        cfg = self.config()
        r = self.train(cfg, "train.backend=gpu-emu", env={"TERA_GPU_EMU_WARP": "7"})
        self.assert_refused(r, ["TERA_GPU_EMU_WARP", "'7'", "32", "64"])
        r = self.tera("eval", "x", "--data", CORPUS, "--backend", "gpu-emu", env={"TERA_GPU_EMU_WARP": "7"})
        self.assert_refused(r, ["TERA_GPU_EMU_WARP"])
        self.assertFalse(os.path.exists(self.path("out")))

    # tokenize: train --out DIR is refused as a directory (not "pass --force");
    # encode replaces another encode's shards only with --force; stats verifies shards.
    def test_tokenize_out_checks_and_stats_verification(self):
        os.makedirs(self.path("adir"))
        r = self.tera("tokenize", "train", "-i", CORPUS, "--vocab", "300", "--out", self.path("adir"))
        self.assert_refused(r, ["--out", "is a directory; name a file"])
        self.assertNotIn("--force", r.stderr)
        self.ok(self.tera("tokenize", "encode", "-t", "bytes", "-i", CORPUS, "-o", "shards", "--val-fraction", "0.2"))
        before = snapshot(self.path("shards"))
        r = self.tera("tokenize", "encode", "-t", "bytes", "-i", CORPUS, "-o", "shards")
        self.assert_refused(r, ["--out shards", "already holds files", "token-shard directory", "--force"])
        self.assert_unchanged(before, self.path("shards"))
        self.ok(self.tera("tokenize", "encode", "-t", "bytes", "-i", CORPUS, "-o", "shards", "--force"))
        self.assertIn("(verified)", self.ok(self.tera("tokenize", "stats", "-i", "shards")).stdout)
        shard = self.path("shards", "train-00000.tok")
        with open(shard, "r+b") as f:  # one token flipped: the checksum no longer matches
            f.seek(100)
            b = f.read(1)
            f.seek(100)
            f.write(bytes([b[0] ^ 1]))
        r = self.tera("tokenize", "stats", "-i", "shards")
        self.assert_refused(r, ["train-00000.tok", "checksum"])

    # A full disk (a small tmpfs; root only) leaves no .tmp-step-N or final.tmp.PID behind.
    def test_full_disk_leaves_no_temporaries(self):
        mnt = self.path("small")
        os.makedirs(mnt)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", mnt], capture_output=True).returncode:
            self.skipTest("mounting a tmpfs needs root")
        try:
            cfg = self.config(steps=100)
            r = self.train(cfg, f"ckpt.dir={mnt}/ck", "ckpt.every=1", f"out.dir={mnt}/out")
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("No space left", r.stderr)
            self.assertEqual([n for n in os.listdir(os.path.join(mnt, "ck")) if n.startswith(".tmp-")], [])
            left = [n for n in os.listdir(os.path.join(mnt, "ck")) if n.startswith("step-")]
            self.assertTrue(left, "the last good checkpoint is kept")
            r = self.tera("ckpt", "inspect", os.path.join(mnt, "ck", left[0]))
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            shutil.rmtree(os.path.join(mnt, "ck"))
            with open(os.path.join(mnt, "filler"), "wb") as f:  # room for the run's lock, not for its final weights
                f.write(b"\0" * (150 * 1024))
            r = self.train(cfg, "train.steps=1", f"out.dir={mnt}/out", extra_args=("--start-over",))
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertEqual([n for n in os.listdir(os.path.join(mnt, "out")) if n.startswith("final")], [])
        finally:
            subprocess.run(["umount", mnt])

    # More threads than the cores this process may use: fewer threads, said so.
    def test_oversubscribed_cores_use_fewer_threads(self):
        if shutil.which("taskset") is None:
            self.skipTest("no taskset")
        cfg = self.config(steps=1)
        r = self.ok(self.tera("train", "-c", cfg, "--set", "out.dir=o1", env={"OMP_NUM_THREADS": "2"},
                              launcher=["taskset", "-c", "0"]))
        self.assertIn("1 threads per rank (OMP_NUM_THREADS = 2 x 1 rank > 1 core available", r.stdout)
        env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
        p = subprocess.run(["taskset", "-c", "0", TERA, "train", "-c", cfg, "--set", "out.dir=o2"], cwd=self.dir,
                           env=env, capture_output=True, text=True, timeout=180)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn(", 1 threads per rank", p.stdout)  # the affinity mask's cores, not the machine's

    # The trace names every rank's track.
    def test_trace_has_track_names(self):
        cfg = self.write("deep.toml", tiny_config().replace("layers = 1", "layers = 2"))
        r = run("train", "-q", "-c", cfg, "--set", "parallel.pp=2", "--trace", "t.json", launcher=MPIRUN + ["-n", "2"],
                env=MPI_ENV, cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(self.path("t.json")) as f:
            events = json.load(f)["traceEvents"]
        names = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
        self.assertEqual(names, {0: "rank 0 (pp 0, dp 0, tp 0)", 1: "rank 1 (pp 1, dp 0, tp 0)"})
        # A scalar's reduction says its bytes ("all_reduce pp 8 B"), never "0.0 KB".
        comm = [e["name"] for e in events if e.get("cat") == "comm"]
        self.assertTrue(any(n.startswith("all_reduce pp ") and n.endswith(" B") for n in comm), comm[:20])
        self.assertFalse([n for n in comm if " 0.0 KB" in n])


if __name__ == "__main__":
    main()

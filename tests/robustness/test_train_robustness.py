"""Robustness of `tera train` (issue 14, rows 1, 2, 5, 7, 8, 9, 10, 12 and the
train parts of 15 and 16): outputs checked before any work, a checkpoint
directory owned by one run, limits before allocation, finite parameters,
stop signals (single process and under mpirun), resumed metrics and
schedules, concurrent runs and a stopped rank. Each case asserts the exit
code, the message's key words and that what the user had is still there."""
import json
import os
import signal
import subprocess
import time

from harness import CORPUS, MPI_ENV, MPIRUN, TERA, RobustnessCase, main, snapshot, tiny_config


class TrainRobustness(RobustnessCase):
    def checkpoints(self, root):
        return sorted(d for d in os.listdir(root) if d.startswith("step-"))

    # Row 1: an unwritable --trace or --metrics is found before any work.
    def test_row01_unwritable_trace_and_metrics_refused_before_work(self):
        cfg = self.config()
        for flag in ("--trace", "--metrics"):
            r = self.train(cfg, "out.dir=out", extra_args=(flag, "nodir/t.json"))
            self.assert_refused(r, [flag, "nodir"])
            self.assertNotIn("step 1/", r.stdout)
            self.assertFalse(os.path.exists(self.path("out", "final")))

    # Row 1: a trace that cannot be written at the end never costs the weights.
    def test_row01_late_trace_failure_keeps_the_final_weights(self):
        cfg = self.config(steps=400)
        p = self.start([TERA, "train", "-c", cfg, "--set", "out.dir=out", "--trace", "t/trace.json"])
        os.makedirs(self.path("t"))
        self.wait_for(p, "step   1/")
        os.rmdir(self.path("t"))  # the directory goes away while the run trains
        with open(self.path("t"), "w") as f:
            f.write("a file where the trace's directory was\n")
        rc, out = self.finish(p, timeout=300)
        self.assertEqual(rc, 1, out)
        self.assertIn("could not write the trace", out)
        self.assertTrue(os.path.exists(self.path("out", "final", "meta.json")), out)

    # Row 2: a fresh run into another run's ckpt.dir is refused; --start-over is explicit.
    def test_row02_fresh_run_into_used_ckpt_dir_refused(self):
        cfg = self.config(steps=10)
        r = self.train(cfg, "ckpt.dir=ck", "ckpt.every=2", "ckpt.keep=3")
        self.assertEqual(r.returncode, 0, r.stderr)
        before = snapshot(self.path("ck"))
        cfg2 = self.config(steps=4, name="other.toml")
        r = self.train(cfg2, "ckpt.dir=ck", "ckpt.every=2", "train.seed=7", "out.dir=out2")
        self.assert_refused(r, ["ckpt.dir", "step-00000010", "--resume auto", "--start-over"])
        self.assert_unchanged(before, self.path("ck"))
        r = self.train(cfg2, "ckpt.dir=ck", "ckpt.every=2", "train.seed=7", "out.dir=out2",
                       extra_args=("--start-over",))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("--start-over: deleted 3 checkpoint(s)", r.stdout + r.stderr)
        self.assertEqual(self.checkpoints(self.path("ck")), ["step-00000002", "step-00000004"])
        self.assertEqual(self.assert_latest_valid(self.path("ck")), "step-00000004")

    # Row 2: retention never deletes the checkpoint just written; `latest` exists.
    def test_row02_resume_from_earlier_checkpoint_keeps_what_it_writes(self):
        cfg = self.config(steps=10)
        r = self.train(cfg, "ckpt.dir=ck", "ckpt.every=2", "ckpt.keep=5")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.train(cfg, "ckpt.dir=ck", "ckpt.every=2", "ckpt.keep=2",
                       extra_args=("--resume", self.path("ck", "step-00000004"), "--discard-newer"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("checkpoint: ", r.stdout + r.stderr)
        self.assertNotIn("(0 B", r.stdout + r.stderr)
        self.assertEqual(self.checkpoints(self.path("ck")), ["step-00000008", "step-00000010"])
        self.assertEqual(self.assert_latest_valid(self.path("ck")), "step-00000010")

    # Row 5: sizes beyond the index types at parse time; beyond memory before allocation.
    def test_row05_huge_sizes_refused_before_allocation(self):
        cfg = self.config()
        cases = [
            (["model.layers=1000000000"], ["model.layers", "supports"]),
            (["model.hidden=1048576", "model.heads=2"], ["needs at least", "available", "tera plan"]),
            (["model.vocab_align=1000000000"], ["needs at least", "available"]),
            (["train.micro_batch=10000000", "train.global_batch=10000000"], ["needs at least", "activations"]),
            (["model.hidden=3037000500", "model.heads=2"], ["model.hidden", "2^31"]),
        ]
        for sets, needles in cases:
            r = self.train(cfg, "out.dir=out", *sets)
            self.assert_refused(r, needles)
            self.assertNotIn("step 1/", r.stdout)

    # Row 5b: a device backend's memory: the plan is checked against what the
    # device has free (gpu-emu given 100 KiB here, the run needs 204 KiB), the
    # refusal names the classes, the bytes and which memory; a malformed
    # capacity is refused naming the variable.
    def test_row05b_device_memory_refused_before_allocation(self):
        cfg = self.config()
        r = self.train(cfg, "out.dir=out", "train.backend=gpu-emu", env={"TERA_GPU_EMU_MEMORY": "100K"})
        self.assert_refused(r, ["needs at least", "parameters", "100.00 KiB of gpu-emu device memory", "tera plan"])
        self.assertNotIn("step 1/", r.stdout)
        r = self.train(cfg, "out.dir=out", "train.backend=gpu-emu", env={"TERA_GPU_EMU_MEMORY": "lots"})
        self.assert_refused(r, ["TERA_GPU_EMU_MEMORY", "lots", "suffix"])
        r = self.train(cfg, "out.dir=out", "train.backend=gpu-emu", "train.steps=1", env={"TERA_GPU_EMU_MEMORY": "1G"})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    # Row 7: inf is refused like nan, and an lr no optimizer could use (issue 35
    # row 17). The skipped overflowing update: UpdateOverflow.* (tests/train).
    def test_row07_lr_inf_refused(self):
        cfg = self.config()
        for v in ("inf", "-inf", "nan"):
            self.assert_refused(self.train(cfg, f"train.lr={v}"), ["train.lr", "finite"])
        self.assert_refused(self.train(cfg, "train.lr=1e39"), ["train.lr", "32-bit float's range"])
        for v in ("1e38", "1e30", "2"):
            self.assert_refused(self.train(cfg, f"train.lr={v}"), ["train.lr", "must lie in (0, 1]"])
        self.assert_refused(self.train(cfg, "train.weight_decay=inf"), ["train.weight_decay", "finite"])

    # Row 8: Ctrl-C checkpoints at the next step and exits 0.
    def test_row08_sigint_and_sigterm_checkpoint_and_exit_0(self):
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):
            cfg = self.config(steps=100000, name=f"run-{sig}.toml")
            ck = f"ck{int(sig)}"
            p = self.start([TERA, "train", "-c", cfg, "--set", f"ckpt.dir={ck}", "--set", f"out.dir=out{int(sig)}"])
            self.wait_for(p, "step      2/")
            p.send_signal(sig)
            rc, out = self.finish(p)
            self.assertEqual(rc, 0, out)
            self.assertIn(f"{signal.Signals(sig).name} received", out)
            self.assertIn("continue with --resume auto", out)
            self.assert_latest_valid(self.path(ck))

    # Row 8: a second request exits at once; the last checkpoint stays intact.
    # (Another signal: the same one again within a second is one request, issue 35 row 2.)
    def test_row08_second_signal_exits_at_once(self):
        cfg = self.config(steps=100000)
        p = self.start([TERA, "train", "-c", cfg, "--set", "ckpt.dir=ck", "--set", "ckpt.every=1"])
        self.wait_for(p, "checkpoint: ")
        p.send_signal(signal.SIGINT)
        p.send_signal(signal.SIGTERM)
        rc, out = self.finish(p)
        self.assertIn(rc, (0, 128 + signal.SIGTERM), out)  # 0 if the first checkpoint finished before the second
        self.assert_latest_valid(self.path("ck"))

    # Row 8: a signal during a long evaluation is honoured within a micro-batch.
    def test_row08_sigterm_during_long_evaluation(self):
        cfg = self.config(steps=1)
        p = self.start([TERA, "train", "-c", cfg, "--set", "train.eval_sequences=100000000", "--set", "ckpt.dir=ck"])
        self.wait_for(p, "compute: ")
        time.sleep(1.0)  # inside the evaluation after step 1
        p.send_signal(signal.SIGTERM)
        rc, out = self.finish(p, timeout=60)
        self.assertEqual(rc, 0, out)
        self.assertIn("evaluation interrupted", out)
        self.assertIn("SIGTERM received", out)
        self.assert_latest_valid(self.path("ck"))

    # Row 8, under mpirun (Open MPI 4.1): SIGUSR1 to mpirun is forwarded to the
    # ranks at once; SIGTERM to every process of the job (a scheduler's time
    # limit) reaches the ranks directly; SIGTERM to mpirun alone reaches them
    # after odls_base_sigkill_timeout seconds (mpirun's SIGCONT, SIGTERM,
    # SIGKILL sequence). -q: once mpirun tears down it stops forwarding
    # output, and a rank blocked on a full stdout pipe could not checkpoint.
    def test_row08_signals_to_mpirun(self):
        cases = [("usr1-to-mpirun", signal.SIGUSR1, [], False),
                 ("term-to-all", signal.SIGTERM, [], True),
                 ("term-to-mpirun", signal.SIGTERM, ["--mca", "odls_base_sigkill_timeout", "5"], False)]
        for name, sig, mca, to_ranks in cases:
            cfg = self.config(steps=100000, name=f"{name}.toml")
            p = self.start(MPIRUN + mca + ["-n", "2", TERA, "train", "-q", "-c", cfg, "--set", f"ckpt.dir=ck-{name}",
                                           "--set", "ckpt.every=200", "--set", f"out.dir=out-{name}"], env=MPI_ENV)
            self.wait_for(p, "checkpoint: ")  # training (quiet: checkpoint lines only)
            targets = [p.pid] + (self.ranks_of(p, cfg) if to_ranks else [])
            for pid in targets:
                os.kill(pid, sig)
            rc, out = self.finish(p)
            self.assertIn(f"{signal.Signals(sig).name} received", out, f"{name}: {out[-3000:]}")
            if sig == signal.SIGUSR1:
                self.assertEqual(rc, 0, out[-3000:])
            self.assert_latest_valid(self.path(f"ck-{name}"))

    def ranks_of(self, launcher, cfg):
        """pids of the launcher's children that run `cfg`."""
        ranks = []
        for pid in os.listdir("/proc"):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().split(b"\0")
                with open(f"/proc/{pid}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError):
                continue
            if ppid == launcher.pid and cfg.encode() in cmd:
                ranks.append(int(pid))
        return ranks

    # Row 9: --metrics appends on resume and continues the step numbers.
    def test_row09_metrics_append_on_resume(self):
        cfg = self.config(steps=6)
        r = self.train(cfg, "ckpt.dir=ck", "ckpt.every=2", "ckpt.keep=5", extra_args=("--metrics", "m.jsonl"))
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.path("m.jsonl")) as f:
            first = f.read().splitlines()
        self.assertEqual([json.loads(l)["step"] for l in first], [1, 2, 3, 4, 5, 6])
        r = self.train(cfg, "ckpt.dir=ck", "ckpt.every=2",
                       extra_args=("--metrics", "m.jsonl", "--resume", self.path("ck", "step-00000004"),
                                   "--discard-newer"))
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.path("m.jsonl")) as f:
            after = f.read().splitlines()
        self.assertEqual([json.loads(l)["step"] for l in after], [1, 2, 3, 4, 5, 6])
        self.assertEqual(after[:4], first[:4])  # byte for byte
        self.assertEqual([json.loads(l)["loss"] for l in after[4:]], [json.loads(l)["loss"] for l in first[4:]])

    # Row 9 / 15: a changed train.steps or lr on resume is refused unless asked for.
    def test_row09_changed_schedule_on_resume_refused(self):
        cfg = self.config(steps=6)
        r = self.train(cfg, "ckpt.dir=ck", "ckpt.every=3")
        self.assertEqual(r.returncode, 0, r.stderr)
        before = snapshot(self.path("ck"))
        r = self.train(cfg, "ckpt.dir=ck", "train.steps=9", extra_args=("--resume", "auto"))
        self.assert_refused(r, ["train.steps 6 -> 9", "--change-schedule"])
        r = self.train(cfg, "ckpt.dir=ck", "train.lr=1e-3", extra_args=("--resume", "auto"))
        self.assert_refused(r, ["train.lr", "--change-schedule"])
        self.assert_unchanged(before, self.path("ck"))
        r = self.train(cfg, "ckpt.dir=ck", "train.steps=9", extra_args=("--resume", "auto", "--change-schedule"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("train.steps 6 -> 9", r.stdout + r.stderr)
        self.assertIn("step 9/9", r.stdout)

    # Row 10: an unwritable out.dir or ckpt.dir is found before any work.
    def test_row10_unwritable_out_and_ckpt_dir_refused_before_work(self):
        cfg = self.config()
        self.write("afile", "keep\n")
        for key in ("out.dir", "ckpt.dir"):
            r = self.train(cfg, f"{key}=afile/sub")
            self.assert_refused(r, [key, "afile"])
            self.assertNotIn("step 1/", r.stdout)
        self.assert_unchanged({".": snapshot(self.path("afile"))["."]}, self.path("afile"))

    # Row 12: two runs on one ckpt.dir: the second is refused, the first goes on.
    def test_row12_concurrent_runs_refused(self):
        cfg = self.config(steps=100000)
        p = self.start([TERA, "train", "-c", cfg, "--set", "ckpt.dir=ck", "--set", "out.dir=outA"])
        self.wait_for(p, "step      1/")
        r = self.train(self.config(steps=4, name="b.toml"), "ckpt.dir=ck", "out.dir=outB", extra_args=("--resume", "auto"))
        self.assert_refused(r, ["ckpt.dir", "in use by another run", "pid"])
        self.assertIsNone(p.poll())
        p.send_signal(signal.SIGINT)
        rc, out = self.finish(p)
        self.assertEqual(rc, 0, out)

    # Row 12: a stopped rank no longer leaves the others spinning forever, and
    # the message names it: a pair's collective waits for the other rank; in
    # a group of three the others find it by a roll call (issue 35).
    def stop_a_rank(self, n):
        cfg = self.config(steps=100000, name=f"run{n}.toml")
        sets = ["--set", "train.comm_timeout_s=3", "--set", f"out.dir=wout{n}", "--set", f"parallel.dp={n}",
                "--set", f"train.global_batch={2 * n}"]
        p = self.start(MPIRUN + ["-n", str(n), TERA, "train", "-c", cfg] + sets, env=MPI_ENV)
        self.wait_for(p, "step      2/")
        ranks = self.ranks_of(p, cfg)
        self.assertEqual(len(ranks), n, ranks)
        with open(f"/proc/{ranks[-1]}/environ", "rb") as f:
            env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
        stopped = int(env[b"OMPI_COMM_WORLD_RANK"])
        os.kill(ranks[-1], signal.SIGSTOP)
        try:
            rc, out = self.finish(p, timeout=120)
            out = out[-4000:]
        finally:
            for pid in ranks:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        self.assertNotEqual(rc, 0, out)
        self.assertIn("train.comm_timeout_s = 3", out)
        self.assertIn("ending the job", out)
        return stopped, out

    def test_row12_stopped_rank_ends_the_job_with_a_message(self):
        stopped, out = self.stop_a_rank(2)
        self.assertIn(f"for world rank {stopped}", out)  # the peer that stopped, by name

    def test_row12_stopped_rank_of_three_named_by_roll_call(self):
        stopped, out = self.stop_a_rank(3)
        self.assertIn(f"for world rank {stopped}, which did not answer a roll call of the group", out)
        # Only the stopped rank is blamed.
        for r in range(3):
            if r != stopped:
                self.assertNotIn(f"for world rank {r},", out)

    # Issue 35: reading a live ckpt.dir while its run prunes it (ckpt.keep = 1,
    # a checkpoint every step) takes the newest complete checkpoint, again if
    # the one chosen vanishes before it is read.
    def test_round2_live_ckpt_dir_read_while_pruned(self):
        cfg = self.config(steps=100000)
        p = self.start([TERA, "train", "-q", "-c", cfg, "--set", "ckpt.dir=ck", "--set", "ckpt.every=1",
                        "--set", "ckpt.keep=1"])
        self.wait_for(p, "checkpoint: ")
        try:
            for i in range(10):
                r = self.tera("eval", "ck", "--data", CORPUS, "-q")
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                r = self.tera("ckpt", "export", "ck", "--out", f"hf{i}/model.safetensors")
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        finally:
            p.send_signal(signal.SIGTERM)
            rc, out = self.finish(p)
        self.assertEqual(rc, 0, out)

    # Row 16: a number too large for 64 bits, a directory or a FIFO as --config.
    def test_row16_config_messages(self):
        cfg = self.config()
        self.assert_refused(self.train(cfg, "train.steps=99999999999999999999"), ["train.steps", "64-bit"])
        self.assert_refused(self.tera("train", "-c", self.dir), ["--config", "directory"])
        fifo = self.path("fifo.toml")
        os.mkfifo(fifo)
        self.assert_refused(self.tera("train", "-c", fifo, timeout=30), ["--config", "FIFO"])
        self.assert_refused(self.train(cfg, "train.comm_timeout_s=0"), ["train.comm_timeout_s", "positive"])

    # Issue 16: a kernel backend this binary does not have is refused naming the key and the ones it has.
    def test_unknown_backend_refused_naming_the_backends(self):
        cfg = self.config()
        r = self.train(cfg, "train.backend=tpu", "out.dir=out")
        self.assert_refused(r, ["train.backend", "\"tpu\"", "cpu, cpu-guarded"])
        self.assertFalse(os.path.exists(self.path("out")), "nothing is written before the refusal")
        self.assert_refused(self.train(cfg, "train.backend="), ["train.backend", "empty"])

    # Issue 20: Llama shapes the runtime cannot build are refused, naming the field and the fix.
    def test_llama_shapes_refused_naming_the_field(self):
        cfg = self.config()
        self.assert_refused(self.train(cfg, "model.arch=mamba"), ["model.arch", "\"mamba\"", "\"gpt2\" or \"llama\""])
        self.assert_refused(self.train(cfg, "model.arch=llama", "model.heads=4", "model.kv_heads=3"),
                            ["model.kv_heads = 3", "must divide model.heads = 4"])
        self.assert_refused(self.train(cfg, "model.arch=llama", "model.mlp=standard"), ["model.arch", "gated"])
        self.assert_refused(self.train(cfg, "model.arch=llama", "model.rope_theta=0.5"), ["model.rope_theta"])
        self.assert_refused(self.train(cfg, "model.arch=llama", "model.heads=4", "model.norm_eps=2"), ["model.norm_eps"])
        # hidden 16 / 16 heads: head size 1, no pair to rotate.
        self.assert_refused(self.train(cfg, "model.arch=llama", "model.heads=16"), ["head size", "even"])
        # tp 6 over 4 key/value heads: neither split evenly nor replicated evenly.
        r = self.train(cfg, "model.arch=llama", "model.hidden=24", "model.heads=12", "model.kv_heads=4", "parallel.tp=6")
        self.assert_refused(r, ["parallel.tp = 6 neither divides model.kv_heads = 4", "nor is a multiple of it"])
        # A gated MLP on a GPT-2 block is a planner-only shape.
        self.assert_refused(self.train(cfg, "model.mlp=gated"), ["model.mlp", "model.arch = \"llama\""])
        self.assertFalse(os.path.exists(self.path("out")), "nothing is written before a refusal")

    def test_precision_refused_naming_the_choices(self):
        cfg = self.config()
        self.assert_refused(self.train(cfg, "train.precision=fp16"),
                            ["train.precision = \"fp16\"", "\"fp32\", \"bf16\""])
        self.assertFalse(os.path.exists(self.path("out")), "nothing is written before a refusal")


if __name__ == "__main__":
    main()

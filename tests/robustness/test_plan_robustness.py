"""Robustness of `tera plan` and `tera simulate` (issue 14, rows 6, 15 and 16):
device files as inputs, negative or zero values that used to be ignored, a
layout key given twice, and output paths checked before any work. Every case
asserts exit 2, the message's key words and no internal error. Issue 35 row
13: what `plan --emit tera` writes trains what was planned, the memory of
every class equal to the plan's."""
import json
import os
import re

from harness import CORPUS, MPI_ENV, MPIRUN, RobustnessCase, main, run, snapshot

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
GPT2 = "[model]\nlayers = 4\nhidden = 32\nheads = 4\nseq_len = 32\nvocab = 256\n"
LLAMA = ("[model]\narch = \"llama\"\nlayers = 4\nhidden = 48\nheads = 6\nkv_heads = 2\nseq_len = 32\nvocab = 300\n"
         "rope_theta = 500000\nnorm_eps = 1e-6\n")
CLASS_NAMES = {"parameters": "parameters", "gradients": "gradients", "optimizer": "optimizer state",
               "zero_staging": "ZeRO staging", "comm_buckets": "communication buckets", "zero_gather": "ZeRO gather",
               "activations": "activations", "workspace": "workspace"}


def human_bytes(b):
    """core/format.cpp's human_bytes."""
    units, v, u = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"], float(b), 0
    while abs(v) >= 1024.0 and u < 5:
        v /= 1024.0
        u += 1
    return f"{v:.0f} {units[u]}" if u == 0 else f"{v:.2f} {units[u]}"

PLAN = ["plan", "--model", "gpt2-124m", "--cluster", "selene", "--gpus", "8", "--global-batch", "8"]
SWEEP = ["simulate", "--model", "gpt2-124m", "--cluster", "selene", "--global-batch", "8", "--sweep", "weak",
         "--from", "8", "--to", "32", "--replan"]


class PlanRobustness(RobustnessCase):
    def test_row6_plan_model_dev_zero_refused(self):
        r = self.tera("plan", "--model", "/dev/zero", "--cluster", "selene", "--gpus", "8", "--global-batch", "8")
        self.assert_refused(r, ["/dev/zero", "not a regular file"])

    def test_row6_plan_cluster_dev_zero_refused(self):
        r = self.tera("plan", "--model", "gpt2-124m", "--cluster", "/dev/zero", "--gpus", "8", "--global-batch", "8")
        self.assert_refused(r, ["/dev/zero", "not a regular file"])

    def test_row6_validate_dev_zero_refused(self):
        r = self.tera("plan", "validate", "/dev/zero")
        self.assert_refused(r, ["/dev/zero", "not a regular file"])

    def test_row6_validate_directory_refused(self):
        r = self.tera("plan", "validate", self.dir)
        self.assert_refused(r, [self.dir, "directory"])

    def test_row15_negative_mtbf_refused(self):
        r = self.tera(*SWEEP, "--node-mtbf-hours", "-5")
        self.assert_refused(r, ["--node-mtbf-hours", "must be a number in [0, 1000000000]"])

    def test_row15_negative_ckpt_write_refused(self):
        r = self.tera(*SWEEP, "--node-mtbf-hours", "10", "--ckpt-write-s", "-1")
        self.assert_refused(r, ["--ckpt-write-s", "must be a number in [0, 1000000000]"])

    def test_row15_plan_seq_zero_refused(self):
        r = self.tera(*PLAN, "--seq", "0")
        self.assert_refused(r, ["--seq", "must be an integer in [1, 16777216]"])

    def test_row15_plan_seq_negative_refused(self):
        r = self.tera(*PLAN, "--seq", "-5")
        self.assert_refused(r, ["--seq", "must be an integer in [1, 16777216]"])

    def test_row15_simulate_seq_zero_refused(self):
        r = self.tera(*SWEEP, "--seq", "0")
        self.assert_refused(r, ["--seq", "must be an integer in [1, 16777216]"])

    def test_row15_explain_key_twice_refused(self):
        r = self.tera(*PLAN, "--explain", "tp=2,tp=4")
        self.assert_refused(r, ["--explain", "tp", "twice"])

    def test_row15_simulate_layout_key_twice_refused(self):
        r = self.tera("simulate", "--model", "gpt2-124m", "--cluster", "selene", "--global-batch", "8",
                      "--layout", "tp=1,pp=1,dp=8,dp=4")
        self.assert_refused(r, ["--layout", "dp", "twice"])

    def test_row16_top_zero_refused_briefly(self):
        r = self.tera(*PLAN, "--top", "0")
        self.assert_refused(r, ["--top", "must be an integer in [1, 100000]"])
        self.assertLess(len(r.stderr), 300, r.stderr)  # not the whole double range

    def test_row16_tp_zero_refused_briefly(self):
        r = self.tera(*PLAN, "--tp", "0")
        self.assert_refused(r, ["--tp", "must be an integer in [1, 4096]"])
        self.assertLess(len(r.stderr), 300, r.stderr)

    def test_row16_plot_path_checked_first(self):
        r = self.tera(*SWEEP, "--plot", self.path("nodir", "curve.svg"))
        self.assert_refused(r, ["--plot", "nodir"])
        self.assertNotIn("points simulated", r.stdout)  # refused before the sweep ran
        self.assertFalse(os.path.exists(self.path("nodir")))

    def test_row16_plot_into_directory_refused_first(self):
        os.makedirs(self.path("out"))
        self.write("out/keep.txt", "keep\n")
        before = snapshot(self.path("out"))
        r = self.tera(*SWEEP, "--plot", self.path("out"))
        self.assert_refused(r, ["--plot", "is a directory"])
        self.assert_unchanged(before, self.path("out"))

    def test_row16_trace_path_checked_first(self):
        r = self.tera("simulate", "--model", "gpt2-124m", "--cluster", "selene", "--global-batch", "8",
                      "--layout", "tp=1,pp=1,dp=8", "--trace", self.path("nodir", "t.json"))
        self.assert_refused(r, ["--trace", "nodir"])
        self.assertNotIn("step time", r.stdout)

    def test_row16_trace_existing_file_kept_when_refused(self):
        keep = self.write("t.json", "keep\n")
        before = snapshot(keep)
        # The layout is refused (tp does not divide heads), so nothing is written over the old trace.
        r = self.tera("simulate", "--model", "gpt2-124m", "--cluster", "selene", "--global-batch", "8",
                      "--layout", "tp=5,pp=1,dp=1", "--trace", keep)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertNotIn("internal error", r.stdout + r.stderr)
        self.assert_unchanged(before, keep)

    def cluster(self, flash):
        """This machine's preset as four "GPUs" (tp up to 4), its stack as tera's runtime computes."""
        with open(os.path.join(REPO, "configs", "clusters", "local.toml")) as f:
            text = f.read()
        text = re.sub(r"(?m)^(package_)?gpus = \d+$", lambda m: (m.group(1) or "") + "gpus = 4", text)
        text = re.sub(r"(?m)^flash_attention = \w+$", f"flash_attention = {str(flash).lower()}", text)
        text = re.sub(r"(?m)^dropout = \w+$", "dropout = false", text)
        text = re.sub(r"(?m)^(peak_tflops_32 = .*)$", r"\1\npeak_tflops_16 = 0.7", text)  # --precision bf16 prices too
        return self.write(f"c-{flash}.toml", text)

    # Issue 35 row 13: the emitted config trains, and what each rank of the
    # plan's fullest stage allocates is what the plan priced, class by class,
    # in both precisions as `tera plan --precision` names them (issue 36).
    def test_round2_row13_emitted_config_trains_what_was_planned(self):
        for name, model, flash, bf16 in (("gpt2", GPT2, True, False), ("llama", LLAMA, False, True)):
            mfile = self.write(f"{name}.toml", model)
            plan = ["plan", "--model", mfile, "--cluster", self.cluster(flash), "--gpus", "4", "--global-batch",
                    "8", "--precision", "bf16" if bf16 else "fp32"]
            r = self.tera(*plan, "--emit", "tera")
            self.assertEqual(r.returncode, 0, r.stderr)
            emitted = r.stdout
            self.assertIn(f'precision = "{"bf16" if bf16 else "fp32"}"', emitted)
            self.assertIn(f'attention = "{"flash" if flash else "naive"}"', emitted)
            if name == "llama":
                for line in ('arch = "llama"', "kv_heads = 2", "rope_theta = 500000", "norm_eps = 1e-06",
                             "tie_embeddings = false"):
                    self.assertIn(line, emitted)
            layout = re.search(r"layout (\S+)", emitted).group(1)
            r = self.tera(*plan, "--explain", layout, "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            e = json.loads(r.stdout)
            cfg = self.write(f"{name}-emitted.toml", emitted)
            t = run("train", "-c", cfg, "--set", f"data.train={CORPUS}", "--set", "train.steps=1",
                    "--set", f"out.dir={self.path('out-' + name)}", launcher=MPIRUN + ["-n", "4"], env=MPI_ENV,
                    cwd=self.dir, timeout=300)
            self.assertEqual(t.returncode, 0, t.stdout + t.stderr)
            rank = e["memory"]["stage"] * e["dp"] * e["tp"]  # the first rank of the fullest stage
            line = re.search(rf"^memory rank {rank}: (.*) = ", t.stdout, re.M).group(1)
            got = dict(re.match(r"(.+) (\S+ \S+)$", part).groups() for part in line.split(", "))
            want = {CLASS_NAMES[k]: human_bytes(v) for k, v in e["memory"].items() if k in CLASS_NAMES and v > 0}
            self.assertEqual(got, want, f"{name} {layout}: train's memory line vs the plan")

    # Issue 39: a context-parallel layout emitted by the plan trains under
    # mpirun, and each rank allocates what the plan priced (the ring's
    # buffers included), class by class.
    def test_context_parallel_emitted_config_trains_what_was_planned(self):
        emitted, e, t = self.emit_and_train(GPT2, "tp=1,pp=1,dp=2,cp=2,mb=2,zero=1", "cp")
        self.assertIn("cp = 2", emitted)
        want = self.planned_memory(e)
        for rank in range(4):  # every (dp, cp) rank holds the same shapes; ZeRO's shards differ in padding
            got = self.memory_line(t, rank)
            if rank > 0:  # the plan reports ZeRO rank 0's optimizer shard
                got.pop("optimizer state")
                want_here = {k: v for k, v in want.items() if k != "optimizer state"}
            else:
                want_here = want
            self.assertEqual(got, want_here, f"rank {rank}: train's memory line vs the plan")

    # Issue 39: a zb-h1 layout emitted by the plan trains under mpirun, and the
    # fullest stage allocates what the plan priced (each slot's kept output
    # gradients included), class by class; with recomputation it is refused.
    def test_zero_bubble_emitted_config_trains_what_was_planned(self):
        layout = "tp=1,pp=2,dp=2,mb=1,zero=1,schedule=zb-h1"
        emitted, e, t = self.emit_and_train(GPT2, layout, "zb")
        self.assertIn('schedule = "zb-h1"', emitted)
        rank = e["memory"]["stage"] * e["dp"] * e["tp"]  # the first rank of the fullest stage
        self.assertEqual(self.memory_line(t, rank), self.planned_memory(e), "train's memory line vs the plan")
        r = self.tera(*self.explain_plan(GPT2, layout + ",recompute=full", "zb"), "--emit", "tera")
        self.assert_refused(r, ["zb-h1", "recompute", "full"])

    def explain_plan(self, model, layout, name):
        """`tera plan --explain layout` of `model` on this machine's four-"GPU" preset, fp32."""
        return ["plan", "--model", self.write(f"{name}.toml", model), "--cluster", self.cluster(True), "--gpus", "4",
                "--global-batch", "8", "--precision", "fp32", "--explain", layout]

    def emit_and_train(self, model, layout, name):
        """The layout's `--emit tera` config trained one step under mpirun -n 4: (config, plan JSON, run)."""
        plan = self.explain_plan(model, layout, name)
        r = self.tera(*plan, "--emit", "tera")
        self.assertEqual(r.returncode, 0, r.stderr)
        e = json.loads(self.tera(*plan, "--json").stdout)
        cfg = self.write(f"{name}-emitted.toml", r.stdout)
        t = run("train", "-c", cfg, "--set", f"data.train={CORPUS}", "--set", "train.steps=1",
                "--set", f"out.dir={self.path('out-' + name)}", launcher=MPIRUN + ["-n", "4"], env=MPI_ENV,
                cwd=self.dir, timeout=300)
        self.assertEqual(t.returncode, 0, t.stdout + t.stderr)
        return r.stdout, e, t

    @staticmethod
    def memory_line(t, rank):
        """Rank `rank`'s memory line of a train run: {class: "N.N MiB"}."""
        line = re.search(rf"^memory rank {rank}: (.*) = ", t.stdout, re.M).group(1)
        return dict(re.match(r"(.+) (\S+ \S+)$", part).groups() for part in line.split(", "))

    @staticmethod
    def planned_memory(e):
        """The plan JSON's memory classes as train prints them."""
        return {CLASS_NAMES[k]: human_bytes(v) for k, v in e["memory"].items() if k in CLASS_NAMES and v > 0}

    # Issue 35 row 13: a layout the runtime cannot run is refused by --emit tera,
    # and the search behind --emit tera keeps to what the runtime runs.
    def test_round2_row13_emit_refuses_what_train_cannot_run(self):
        mfile = self.write("gpt2.toml", GPT2)
        plan = ["plan", "--model", mfile, "--cluster", self.cluster(False), "--gpus", "4", "--global-batch", "8",
                "--precision", "fp32"]
        r = self.tera(*plan, "--explain", "tp=1,pp=1,dp=4,recompute=selective", "--emit", "tera")
        self.assert_refused(r, ["--emit tera", "selective", "recompute=full"])
        r = self.tera(*plan, "--recompute", "selective", "--emit", "tera")
        self.assert_refused(r, ["--emit tera", "selective"])
        r = self.tera(*plan[:-1], "mixed", "--emit", "tera")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('precision = "bf16"', r.stdout)
        self.assertNotIn('"selective"', r.stdout)
        m = self.tera("plan", "--model", self.write("llama.toml", LLAMA), "--cluster", self.cluster(True),
                      "--gpus", "4", "--global-batch", "8", "--emit", "megatron")
        self.assertEqual(m.returncode, 0, m.stderr)
        for flag in ("--position-embedding-type rope", "--rotary-base 500000", "--normalization RMSNorm",
                     "--norm-epsilon 1e-06", "--disable-bias-linear", "--untie-embeddings-and-output-weights",
                     "--group-query-attention --num-query-groups 2", "--swiglu", "--attention-dropout 0"):
            self.assertIn(flag, m.stdout)


if __name__ == "__main__":
    main()

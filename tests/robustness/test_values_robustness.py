"""Robustness to values out of range (issue 35, rows 8, 10, 17 and the
message rows of "Unclear errors"): every numeric flag of every subcommand
range-checked (exit 2 naming the flag and its range, never an internal
error), bounded sweeps with correct skip messages, config values outside a
sane range refused with the range named and the right reason, a run that
ends non-finite writes no final, and `plan validate` scores only what can be
scored."""
import csv
import io
import json
import os
import struct

from harness import CORPUS, RobustnessCase, main, snapshot, tiny_config

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PLAN = ["plan", "--model", "gpt2-124m", "--cluster", "selene", "--gpus", "8", "--global-batch", "8"]
SIM = ["simulate", "--model", "gpt2-124m", "--cluster", "selene", "--global-batch", "8"]


class ValuesRobustness(RobustnessCase):
    quiet_train = True

    def run_with(self, *sets, cfg=None):
        """tera train over the tiny config (or cfg) with these --set values."""
        return self.train(cfg or self.config(), *sets)

    # Row 8: numeric flags of every subcommand, range-checked before any work.
    def test_row08_numeric_flags_range_checked(self):
        big = "9223372036854775807"
        cases = [
            (PLAN[:-1] + [big], "--global-batch", "[1, 16777216]"),
            (PLAN[:-1] + ["99999999999999999999"], "--global-batch", "[1, 16777216]"),
            (PLAN + ["--seq", "2147483648"], "--seq", "[1, 16777216]"),
            (PLAN + ["--top", "0"], "--top", "[1, 100000]"),
            (PLAN + ["--tp", big], "--tp", "[1, 4096]"),
            (["plan", "--model", "gpt2-124m", "--cluster", "selene", "--gpus", big, "--global-batch", "8"], "--gpus",
             "[1, 1073741824]"),
            (SIM + ["--layout", "tp=1,pp=1", "--gpus", "-3"], "--gpus", "[1, 1073741824]"),
            (SIM + ["--layout", "tp=1,pp=1", "--sweep", "weak", "--from", "8", "--to", "4611686018427387904"], "--to",
             "[1, 1073741824]"),
            (SIM + ["--sweep", "weak", "--from", "8", "--to", "16", "--node-mtbf-hours", "nan"], "--node-mtbf-hours",
             "a number in [0, 1000000000]"),
            (["generate", "x", "--prompt", "a", "--tokens", big], "--tokens", "[1, 1048576]"),
            (["generate", "x", "--prompt", "a", "--temperature", "nan"], "--temperature", "a number in [0, 100]"),
            (["eval", "x", "--data", CORPUS, "--batches", big], "--batches", "[0, 1099511627776]"),
            (["tokenize", "encode", "-t", "bytes", "-i", CORPUS, "-o", "s", "--val-fraction", "nan"], "--val-fraction",
             "a number in [0, 0.99]"),
            (["tokenize", "encode", "-t", "bytes", "-i", CORPUS, "-o", "s", "--shard-tokens", big], "--shard-tokens",
             "[1, 1073741824]"),
            (["tokenize", "train", "-i", CORPUS, "--vocab", big, "-o", "t.json"], "--vocab", "[257, 16777216]"),
            (["ckpt", "inspect", "x", "--heads", big], "--heads", "[1, 1048576]"),
            (["plan", "validate", "x.csv", "--fail-above-median", "inf"], "--fail-above-median", "a number in"),
        ]
        for args, flag, rng in cases:
            r = self.tera(*args)
            self.assert_refused(r, [flag, "must be", rng])
        self.assertEqual(os.listdir(self.dir), [], "nothing written by a refused command")

    # UX: calibrate --seconds nan / 1e300 / 1e-9.
    def test_calibrate_seconds_range_checked(self):
        for v in ("nan", "1e300", "1e-9", "-1"):
            r = self.tera("calibrate", "--seconds", v, "--out", "local.toml")
            self.assert_refused(r, ["--seconds", "a number in [0.01, 60]"])
        self.assertFalse(os.path.exists(self.path("local.toml")))

    # Row 9: the memory check reads the limit that applies to the process (a
    # nested cgroup v2 here, a fake root given by TERA_TEST_HOST_ROOT) and
    # names both figures; under that limit nothing is allocated.
    def test_row09_nested_cgroup_limit_refused_with_both_figures(self):
        root = self.path("fakeroot")
        files = {"proc/meminfo": "MemAvailable:   16777216 kB\n", "proc/self/cgroup": "0::/slurm/job1\n",
                 "sys/fs/cgroup/memory.max": "max\n", "sys/fs/cgroup/slurm/job1/memory.max": "204800\n",
                 "sys/fs/cgroup/slurm/job1/memory.current": "102400\n"}
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        cfg = self.write("run.toml", tiny_config())
        r = self.tera("train", "-c", cfg, "--set", "out.dir=out", env={"TERA_TEST_HOST_ROOT": root})
        self.assert_refused(r, ["needs at least", "100.00 KiB of host memory", "MemAvailable 16.00 GiB",
                                "cgroup limit 200.00 KiB", os.path.join(root, "sys/fs/cgroup/slurm/job1/memory.max"),
                                "tera plan"])
        self.assertNotIn("step 1/", r.stdout)
        files["sys/fs/cgroup/slurm/job1/memory.max"] = str(1 << 30)  # a limit it fits in
        with open(os.path.join(root, "sys/fs/cgroup/slurm/job1/memory.max"), "w") as f:
            f.write(files["sys/fs/cgroup/slurm/job1/memory.max"])
        r = self.tera("train", "-q", "-c", cfg, "--set", "out.dir=out", env={"TERA_TEST_HOST_ROOT": root})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    # Row 10: a bounded sweep, and the skip message says what the limit is.
    def test_row10_sweep_bounded_and_dp_message(self):
        r = self.tera(*SIM[:-1], "1048576", "--layout", "tp=4,pp=2", "--gpus", "8388608")
        self.assert_refused(r, ["parallel.dp = 1048576 must lie in [1, 1000000]"])
        r = self.tera(*SIM[:-1], "2097152", "--layout", "tp=4,pp=2", "--sweep", "strong", "--from", "4194304",
                      "--to", "16777216")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("skipped 8388608 GPUs (global batch 2097152): parallel.dp = 1048576 must lie in [1, 1000000]",
                      r.stdout)
        self.assertNotIn("must be >= 1", r.stdout)

    # Row 17: config values outside a sane range, with the range and the right reason.
    def test_row17_config_values_out_of_range(self):
        cases = [(["train.lr=1e30"], ["train.lr", "must lie in (0, 1]"]),
                 (["train.lr=1e-400"], ["train.lr = 1e-400", "rounds to 0"]),
                 (["train.weight_decay=100"], ["train.weight_decay", "[0, 10]"]),
                 (["train.eps=5"], ["train.eps", "(0, 1]"]),
                 (["model.arch=llama", "model.rope_theta=1e300"], ["model.rope_theta = 1e+300", "(1, 1e12]"]),
                 (["model.rope_theta=500000"], ["model.rope_theta", "\"llama\" only"]),
                 (["model.norm_eps=1e-6"], ["model.norm_eps", "\"llama\" only"])]
        for sets, needles in cases:
            r = self.run_with(*sets)
            self.assert_refused(r, needles)
            self.assertNotIn("not a finite number", r.stderr)
        # The same literal in the file, not through --set.
        cfg = self.write("small.toml", tiny_config().replace("lr = 3e-3", "lr = 1e-400"))
        self.assert_refused(self.run_with(cfg=cfg), ["train.lr = 1e-400", "rounds to 0"])

    # Row 17: a run whose loss ends non-finite exits non-zero and writes no final.
    def test_row17_nonfinite_end_writes_no_final(self):
        self.assertEqual(self.run_with("out.dir=good").returncode, 0)
        src = self.path("good", "final", "model.safetensors")
        with open(src, "rb") as f:
            data = bytearray(f.read())
        n = struct.unpack("<Q", data[:8])[0]
        header = json.loads(data[8:8 + n])
        for name, t in header.items():
            if name == "__metadata__":
                continue
            b, e = t["data_offsets"]
            at = 8 + n + b
            vals = struct.unpack(f"<{(e - b) // 4}f", data[at:8 + n + e])
            data[at:8 + n + e] = struct.pack(f"<{len(vals)}f", *[v * 1e30 for v in vals])  # finite, but a forward overflows
        huge = self.path("huge.safetensors")
        with open(huge, "wb") as f:
            f.write(data)
        r = self.run_with("out.dir=bad", f"ckpt.init={huge}", "train.steps=2", "train.max_bad_steps=5")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("the run ended with a non-finite loss", r.stderr)
        self.assertFalse(os.path.exists(self.path("bad", "final")))

    def validate_csv(self, rows, name, bom=False):
        with open(os.path.join(REPO, "configs", "calibration", "published_runs.csv"), newline="") as f:
            reader = csv.reader(f)
            header = next(reader)
            first = next(reader)
        out = io.StringIO()
        w = csv.writer(out)
        w.writerow(header)
        for change in rows:
            row = list(first)
            for col, v in change.items():
                row[header.index(col)] = v
            w.writerow(row)
        path = self.path(name)
        with open(path, "w", encoding="utf-8-sig" if bom else "utf-8", newline="") as f:
            f.write(out.getvalue())
        return path

    # Row 17 / UX: plan validate skips what it cannot score, fails when nothing was scored, reads a BOM.
    def test_row17_validate_unusable_rows(self):
        good = self.validate_csv([{}], "good.csv", bom=True)
        r = self.tera("plan", "validate", good)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertNotIn("missing column", r.stdout + r.stderr)
        mixed = self.validate_csv([{}, {"row_id": "2", "reported_tflops_per_gpu": "0"},
                                   {"row_id": "3", "reported_tflops_per_gpu": "-5"}], "mixed.csv")
        r = self.tera("plan", "validate", mixed)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("reported_tflops_per_gpu = 0 cannot be scored", r.stdout)
        self.assertIn("reported_tflops_per_gpu = -5 cannot be scored", r.stdout)
        self.assertNotIn("inf%", r.stdout)
        bad = self.validate_csv([{"reported_tflops_per_gpu": "0"}], "bad.csv")
        before = snapshot(bad)
        r = self.tera("plan", "validate", bad)
        self.assert_refused(r, ["bad.csv", "no row could be scored", "cannot be scored"])
        self.assert_unchanged(before, bad)


if __name__ == "__main__":
    main()

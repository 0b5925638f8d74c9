"""Robustness of `tera plan` and `tera simulate` (issue 14, rows 6, 15 and 16):
device files as inputs, negative or zero values that used to be ignored, a
layout key given twice, and output paths checked before any work. Every case
asserts exit 2, the message's key words and no internal error."""
import os

from harness import RobustnessCase, main, snapshot

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


if __name__ == "__main__":
    main()

"""Robustness of a run to how it is stopped (issue 35, rows 2 and 7): GNU
timeout's two copies of one signal are one request, SIGHUP (a lost ssh
session) and SIGPIPE (`tera train | head`, a tee that died) checkpoint like
SIGTERM and never count as a second request. Each case asserts the exit
code, the message's key words and a valid latest checkpoint."""
import os
import shutil
import signal
import time

from harness import CORPUS, TERA, RobustnessCase, main

# A step of a few hundred milliseconds: the signals arrive inside it.
BUSY = f"""
[model]
layers = 2
hidden = 128
heads = 4
seq_len = 128
vocab = 256

[train]
steps = 100000
micro_batch = 8
global_batch = 64
lr = 1e-3
eval_every = 0
eval_sequences = 4

[data]
train = "{CORPUS}"
"""


class SignalsRobustness(RobustnessCase):
    # Row 2: GNU timeout signals tera, then its process group: one request,
    # a checkpoint, exit 0 (timeout exits with its child's status when it is
    # itself signalled; on its own deadline it sends the same two copies).
    def test_row02_timeout_double_signal_is_one_request(self):
        if shutil.which("timeout") is None:
            self.skipTest("no GNU timeout")
        cfg = self.write("busy.toml", BUSY)
        for i in range(3):  # the copies race the receiving thread differently each time
            p = self.start(["timeout", "600", TERA, "train", "-c", cfg, "--set", f"ckpt.dir=ck{i}",
                            "--set", f"out.dir=out{i}"])
            self.wait_for(p, "step      1/")
            os.kill(p.pid, signal.SIGTERM)  # to timeout, which forwards it to tera and to the group
            rc, out = self.finish(p)
            self.assertEqual(rc, 0, out)
            self.assertIn("SIGTERM received", out)
            self.assertNotIn("second stop signal", out)
            self.assertIn("continue with --resume auto", out)
            self.assert_latest_valid(self.path(f"ck{i}"))

    # Row 2: a copy of the signal a moment later (a launcher forwarding what
    # the user also sent) is still the same request.
    def test_row02_a_second_copy_soon_after_is_one_request(self):
        cfg = self.write("busy.toml", BUSY)
        p = self.start([TERA, "train", "-c", cfg, "--set", "ckpt.dir=ck"])
        self.wait_for(p, "step      1/")
        p.send_signal(signal.SIGTERM)
        time.sleep(0.05)  # taken by then; well inside the one-second window
        p.send_signal(signal.SIGTERM)
        rc, out = self.finish(p)
        self.assertEqual(rc, 0, out)
        self.assertNotIn("second stop signal", out)
        self.assert_latest_valid(self.path("ck"))

    # Row 7: SIGHUP (the ssh session dropped) checkpoints like SIGTERM.
    def test_row07_sighup_checkpoints(self):
        cfg = self.write("busy.toml", BUSY)
        p = self.start([TERA, "train", "-c", cfg, "--set", "ckpt.dir=ck"])
        self.wait_for(p, "step      1/")
        p.send_signal(signal.SIGHUP)
        p.send_signal(signal.SIGPIPE)  # a lost terminal and reader never count as a second request
        rc, out = self.finish(p)
        self.assertEqual(rc, 0, out)
        self.assertIn("SIGHUP received", out)
        self.assertNotIn("second stop signal", out)
        self.assert_latest_valid(self.path("ck"))

    # Row 7: `tera train | head`: the reader goes away; output stops, the run
    # checkpoints at the step boundary and exits 0.
    def test_row07_closed_stdout_pipe_checkpoints(self):
        cfg = self.write("busy.toml", BUSY)
        p = self.start([TERA, "train", "-c", cfg, "--set", "ckpt.dir=ck"], stdout_pipe=True)
        for _ in range(3):  # what `head -n 3` reads
            self.assertTrue(p.stdout.readline())
        p.stdout.close()
        rc, out = self.finish(p)
        self.assertEqual(rc, 0, out)
        self.assertIn("SIGPIPE received", out)
        self.assertIn("the output's reader is gone", out)
        self.assert_latest_valid(self.path("ck"))


if __name__ == "__main__":
    main()

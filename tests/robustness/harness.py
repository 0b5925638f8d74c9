"""Shared pieces of the robustness tests (tests/robustness): a tiny run
config, a runner that never hangs, and byte-for-byte snapshots of what a user
already had, so each test can show that a refused command lost nothing.

Each test module is run as: test_X.py TERA_BINARY CORPUS_FILE"""
import hashlib
import os
import subprocess
import sys
import tempfile
import time
import unittest

TERA = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else "build/tera"
CORPUS = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else "tests/data/tiny_corpus.txt"
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMP_NUM_THREADS": "1",
           "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1"}
MPIRUN = ["mpirun", "--oversubscribe", "--bind-to", "none", "--mca", "btl_vader_single_copy_mechanism", "none"]


def tiny_config(corpus=CORPUS, steps=6, extra=""):
    return f"""
[model]
layers = 1
hidden = 16
heads = 2
seq_len = 16
vocab = 256

[train]
steps = {steps}
micro_batch = 2
global_batch = 4
lr = 3e-3
warmup = 2
eval_every = 0
eval_sequences = 4

[data]
train = "{corpus}"
{extra}
"""


def run(*args, cwd=None, timeout=180, env=None, launcher=None):
    """Runs tera (or launcher + tera); returns CompletedProcess with text output."""
    e = dict(os.environ, OMP_NUM_THREADS="1")
    if env:
        e.update(env)
    cmd = (launcher or []) + [TERA, *args]
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace", cwd=cwd, env=e, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def snapshot(path):
    """{relative path: sha256} of every regular file under path (or of path
    itself), less tera's run lock (.tera.lock), which records its holder."""
    out = {}
    if os.path.isfile(path):
        with open(path, "rb") as f:
            return {".": hashlib.sha256(f.read()).hexdigest()}
    for root, _, files in os.walk(path):
        for name in files:
            if name == ".tera.lock":
                continue
            p = os.path.join(root, name)
            with open(p, "rb") as f:
                out[os.path.relpath(p, path)] = hashlib.sha256(f.read()).hexdigest()
    return out


class RobustnessCase(unittest.TestCase):
    """A temporary working directory per test, and the assertions every row uses."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        for root, dirs, _ in os.walk(self.dir):  # tests make read-only dirs; let cleanup delete them
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o755)
        self.tmp.cleanup()

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def write(self, name, text):
        p = self.path(name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
        return p

    def tera(self, *args, **kw):
        kw.setdefault("cwd", self.dir)
        return run(*args, **kw)

    quiet_train = False  # train() passes -q (modules that read only the summary and the errors)

    def config(self, steps=6, extra="", name="run.toml", corpus=CORPUS):
        return self.write(name, tiny_config(corpus=corpus, steps=steps, extra=extra))

    def train(self, cfg, *sets, extra_args=(), **kw):
        """tera train -c cfg --set s ... extra_args."""
        args = ["train", "-c", cfg] + (["-q"] if self.quiet_train else [])
        for s in sets:
            args += ["--set", s]
        return self.tera(*args, *extra_args, **kw)

    def ok(self, r):
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return r

    def start(self, cmd, env=None, stdout_pipe=False):
        """A background process (tera, mpirun, timeout) with its output in a file (stdout a pipe if asked)."""
        e = dict(os.environ, OMP_NUM_THREADS="1")
        e.update(env or {})
        path = self.path(f"bg-{time.time_ns()}.log")
        with open(path, "w") as out:  # the child's own file description: reading below never moves its offset
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE if stdout_pipe else out,
                                 stderr=out if stdout_pipe else subprocess.STDOUT, cwd=self.dir, env=e, text=True,
                                 stdin=subprocess.DEVNULL)
        p.log = open(path)
        return p

    def wait_for(self, p, needle, timeout=120):
        t0 = time.time()
        while time.time() - t0 < timeout:
            p.log.seek(0)
            text = p.log.read()
            if needle in text:
                return text
            if p.poll() is not None:
                self.fail(f"exited {p.returncode} before '{needle}':\n{text[-3000:]}")
            time.sleep(0.05)
        p.kill()
        self.fail(f"no '{needle}' within {timeout} s")

    def finish(self, p, timeout=120):
        """(exit code, the tail of the output): enough for every message, short in a failure."""
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            self.fail("the process did not end")
        p.log.seek(0)
        text = p.log.read()
        p.log.close()
        return p.returncode, text[-6000:]

    def assert_latest_valid(self, root):
        """The checkpoint `latest` names exists and `ckpt inspect` finds it valid; its name."""
        with open(os.path.join(root, "latest")) as f:
            latest = f.read().strip()
        self.assertIn(latest, sorted(d for d in os.listdir(root) if d.startswith("step-")))
        r = self.tera("ckpt", "inspect", os.path.join(root, latest))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return latest

    def assert_refused(self, r, needles, code=2):
        """Exit `code`, every needle in stderr, and never an internal error or a crash."""
        out = r.stdout + r.stderr
        self.assertEqual(r.returncode, code, out)
        for n in needles if isinstance(needles, (list, tuple)) else [needles]:
            self.assertIn(n, r.stderr, out)
        self.assertNotIn("internal error", out)

    def assert_unchanged(self, before, path):
        self.assertEqual(before, snapshot(path), f"{path} changed")


def main():
    unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[3:])

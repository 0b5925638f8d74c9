"""Checks shared by the end-to-end checkpoint scripts (hf_llama_files.py,
hf_llama_sharded.py): run a tera command expecting an exit code and phrases
in its output, record each check, and fail the script at the end if any did."""
import os
import subprocess
import sys

ENV = dict(os.environ, OMP_NUM_THREADS="2")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def run(cmd, expect=0, must_say=()):
    r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", env=ENV, timeout=600)
    out = r.stdout + r.stderr
    check(r.returncode == expect, f"{' '.join(os.path.basename(c) for c in cmd[:3])} ...: exit {r.returncode} "
          f"(expected {expect})" + ("" if r.returncode == expect else "\n" + out[-3000:]))
    for s in must_say:
        check(s in out, f"  the message names {s!r}" + ("" if s in out else ": " + out[-600:]))
    check("internal error" not in out, "  no internal error")
    return r


def finish():
    """Exits 1 naming how many checks failed, else says all passed."""
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print("all checks passed")

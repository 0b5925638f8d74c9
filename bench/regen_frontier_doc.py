"""Reruns every `$ build/tera ...` command in docs/frontier.md (from the
repository root) and replaces the output below it, so the page shows what the
current planner prints (the --plot SVGs are rewritten too).
Usage: python3 bench/regen_frontier_doc.py [docs/frontier.md]"""
import re
import shlex
import subprocess
import sys

path = sys.argv[1] if len(sys.argv) > 1 else "docs/frontier.md"
text = open(path).read()


def rerun(m):
    cmd = m.group(1)
    out = subprocess.run(shlex.split(cmd), capture_output=True, text=True, timeout=600)
    body = (out.stdout + out.stderr).rstrip("\n")
    return "```\n$ " + cmd + "\n" + body + "\n```"


text = re.sub(r"```\n\$ (build/tera [^\n]*)\n.*?\n```", rerun, text, flags=re.S)
open(path, "w").write(text)

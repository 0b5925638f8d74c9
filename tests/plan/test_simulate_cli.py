#!/usr/bin/python3
"""End-to-end tests of `tera simulate`: the step report and its JSON, the
Chrome trace (parsed as JSON, one track per stage), sweeps (JSON fields,
weak batch growth, SVG parsed as XML), the failure model columns, and every
bad input exiting 2 with a message naming the flag.
Usage: test_simulate_cli.py TERA_BINARY"""
import json
import os
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

TERA = os.path.abspath(sys.argv[1])
ONE = ["simulate", "--model", "gpt2-350m", "--cluster", "dgx-h100", "--global-batch", "64",
       "--layout", "tp=2,pp=4,dp=2,mb=2,zero=1"]
SWEEP = ["simulate", "--model", "gpt2-350m", "--cluster", "dgx-h100", "--global-batch", "32",
         "--layout", "tp=2,pp=4,mb=1,zero=1"]


def run(*args):
    return subprocess.run([TERA, *args], capture_output=True, text=True, timeout=300)


class SimulateCli(unittest.TestCase):
    def bad(self, args, needle):
        r = run(*args)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn(needle, r.stderr)
        self.assertNotIn("internal error", r.stderr)

    def test_step_report(self):
        r = run(*ONE)
        self.assertEqual(r.returncode, 0, r.stderr)
        for needle in ("step time", "tokens/s", "TFLOP/s per GPU", "MFU", "bubble", "exposed communication",
                       "<- last to finish", "16 x H100"):
            self.assertIn(needle, r.stdout)

    def test_json_matches_plan_explain(self):
        r = run(*ONE, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        for key in ("gpus", "tp", "pp", "dp", "step_time_s", "tokens_per_s", "tflops_per_gpu", "mfu", "bubble",
                    "memory_bytes", "fits", "stages", "critical_stage", "micro_batches"):
            self.assertIn(key, j)
        self.assertEqual(j["gpus"], 16)
        self.assertEqual(j["micro_batches"], 16)
        self.assertEqual(len(j["stages"]), 4)
        for s in j["stages"]:
            parts = (s["compute_s"] + s["tp_exposed_s"] + s["zero_exposed_s"] + s["bubble_s"] + s["p2p_blocking_s"] +
                     s["dp_exposed_s"] + s["optimizer_s"])
            self.assertAlmostEqual(parts, s["end_s"], delta=1e-9 + 1e-6 * s["end_s"])
        p = run("plan", "--model", "gpt2-350m", "--cluster", "dgx-h100", "--gpus", "16", "--global-batch", "64",
                "--explain", "tp=2,pp=4,dp=2,mb=2,zero=1", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertAlmostEqual(json.loads(p.stdout)["step_time_s"], j["step_time_s"], places=12)

    def test_trace_is_chrome_json(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "sim.json")
            r = run(*ONE, "--trace", path)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(path) as f:
                t = json.load(f)
        ev = t["traceEvents"]
        spans = [e for e in ev if e["ph"] == "X"]
        names = [e for e in ev if e["ph"] == "M"]
        # One track per stage: rank = pp_rank * dp * tp (dp_rank = tp_rank = 0).
        self.assertEqual(sorted({e["tid"] for e in spans}), [0, 4, 8, 12])
        self.assertEqual(len(names), 4)
        self.assertIn("tp ranks 4..5 identical", names[1]["args"]["name"])
        # 16 micro-batches: a forward and a backward each per stage, with ids.
        fwd = [e for e in spans if e["name"].startswith("F")]
        self.assertEqual(len(fwd), 4 * 16)
        self.assertTrue(all("mb" in e["args"] and "chunk" in e["args"] for e in fwd))
        self.assertEqual({e["cat"] for e in spans} - {"compute", "p2p", "bubble", "comm"}, set())
        for e in spans:
            self.assertGreaterEqual(e["dur"], 0)

    def test_gpipe_and_interleaved(self):
        for layout in ("tp=2,pp=4,dp=2,mb=2,schedule=gpipe", "tp=2,pp=4,dp=2,vpp=2,mb=2"):
            r = run("simulate", "--model", "gpt2-350m", "--cluster", "dgx-h100", "--global-batch", "64",
                    "--layout", layout, "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertGreater(json.loads(r.stdout)["step_time_s"], 0)

    def test_zb_h1_prices_w_apart(self):
        # The zero-bubble schedule: a W span per micro-batch per stage, each
        # after its B on that stage, and a shorter step than 1F1B's.
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "zb.json")
            r = run(*ONE[:-1], ONE[-1] + ",schedule=zb-h1", "--json", "--trace", path)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(path) as f:
                spans = [e for e in json.load(f)["traceEvents"] if e["ph"] == "X"]
        zb = json.loads(r.stdout)
        base = json.loads(run(*ONE, "--json").stdout)
        self.assertLess(zb["step_time_s"], base["step_time_s"])
        w = [e for e in spans if e["name"].startswith("W")]
        self.assertEqual(len(w), 4 * 16)
        self.assertTrue(all(e["cat"] == "compute" for e in w))
        b_end = {(e["tid"], e["name"][1:]): e["ts"] + e["dur"] for e in spans if e["name"].startswith("B")}
        for e in w:
            self.assertGreaterEqual(e["ts"], b_end[(e["tid"], e["name"][1:])] - 1e-3)  # us, rounded

    def test_weak_sweep_json_and_plot(self):
        with tempfile.TemporaryDirectory() as d:
            svg = os.path.join(d, "weak.svg")
            r = run(*SWEEP, "--sweep", "weak", "--from", "8", "--to", "128", "--json", "--plot", svg)
            self.assertEqual(r.returncode, 0, r.stderr)
            root = ET.parse(svg).getroot()
        pts = json.loads(r.stdout)
        self.assertEqual([p["gpus"] for p in pts], [8, 16, 32, 64, 128])
        for p in pts:
            for key in ("gpus", "tp", "pp", "dp", "step_time_s", "tokens_per_s", "tflops_per_gpu", "efficiency",
                        "global_batch", "mfu", "fits"):
                self.assertIn(key, p)
            self.assertEqual(p["tp"] * p["pp"] * p["dp"], p["gpus"])
            self.assertEqual(p["global_batch"], 32 * p["gpus"] // 8)
        self.assertEqual(pts[0]["efficiency"], 1.0)
        ns = "{http://www.w3.org/2000/svg}"
        self.assertEqual(root.tag, ns + "svg")
        self.assertEqual(len(root.findall(ns + "polyline")), 1)
        self.assertEqual(len(root.findall(ns + "circle")), 5)
        dashed = [e for e in root.findall(ns + "line") if e.get("stroke-dasharray")]
        self.assertGreaterEqual(len(dashed), 2)  # the ideal line and its legend entry
        texts = " ".join(e.text or "" for e in root.iter(ns + "text"))
        for needle in ("GPUs", "efficiency", "ideal", "gpt2-350m", "TFLOP/s"):
            self.assertIn(needle, texts)

    def test_strong_sweep_and_failures(self):
        r = run(*SWEEP, "--sweep", "strong", "--points", "8,16,32,64", "--node-mtbf-hours", "20000",
                "--ckpt-write-s", "30", "--restart-s", "300", "--train-tokens", "1e11", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        pts = json.loads(r.stdout)
        self.assertEqual([p["global_batch"] for p in pts], [32, 32, 32, 32])
        for p in pts:
            for key in ("nodes", "system_mtbf_s", "ckpt_interval_s", "goodput", "time_to_train_s"):
                self.assertIn(key, p)
            self.assertAlmostEqual(p["ckpt_interval_s"], (2 * 30 * p["system_mtbf_s"]) ** 0.5, delta=1e-6)
            self.assertAlmostEqual(p["system_mtbf_s"], 20000 * 3600 / p["nodes"], delta=1e-6)
        t = run(*SWEEP, "--sweep", "strong", "--points", "8,16,32,64", "--node-mtbf-hours", "20000",
                "--ckpt-write-s", "30")
        self.assertIn("goodput", t.stdout)
        self.assertIn("ckpt every", t.stdout)

    def test_replan_sweep(self):
        r = run("simulate", "--model", "gpt2-350m", "--cluster", "dgx-h100", "--global-batch", "32", "--sweep",
                "weak", "--from", "8", "--to", "32", "--replan")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("re-planned", r.stdout)

    def test_bad_input(self):
        self.bad(["simulate", "--model", "nope", "--cluster", "dgx-h100", "--global-batch", "8", "--layout", "tp=1"],
                 "--model")
        self.bad(["simulate", "--model", "gpt2-350m", "--cluster", "dgx-h100", "--global-batch", "64"], "--layout")
        self.bad(["simulate", "--model", "gpt2-350m", "--cluster", "dgx-h100", "--layout", "tp=1,dp=1"],
                 "--global-batch")
        self.bad(["simulate", "--model", "gpt2-350m", "--cluster", "dgx-h100", "--global-batch", "64",
                  "--layout", "tp=3,pp=1,dp=1"], "parallel.tp = 3 does not divide model.heads")
        self.bad(["simulate", "--model", "gpt2-350m", "--cluster", "dgx-h100", "--global-batch", "64",
                  "--layout", "tp=2,pp=2"], "give dp=N")
        self.bad(["simulate", "--model", "gpt2-350m", "--cluster", "dgx-h100", "--global-batch", "64",
                  "--layout", "tp=2,pp=2,dp=2,foo=1"], "unknown layout key 'foo'")
        self.bad(["simulate", "--model", "gpt2-350m", "--cluster", "dgx-h100", "--global-batch", "64",
                  "--layout", "tp=2,pp=2,dp=2", "--gpus", "16"], "!= --gpus 16")
        self.bad(["simulate", "--model", "gpt2-350m", "--cluster", "dgx-h100", "--global-batch", "64",
                  "--layout", "tp=2,pp=2,dp=2", "--schedule", "zigzag"], "--schedule")
        # Does not fit: the message gives the memory and the way out.
        self.bad(["simulate", "--model", "frontier-1t", "--cluster", "frontier", "--global-batch", "64",
                  "--layout", "tp=1,pp=1,dp=64"], "--no-memory-check")
        self.bad([*SWEEP, "--sweep", "sideways", "--from", "8", "--to", "16"], "--sweep sideways")
        self.bad([*SWEEP, "--sweep", "weak"], "--from N --to M")
        self.bad([*SWEEP, "--sweep", "weak", "--from", "16", "--to", "8"], "--to 8 must lie in [--from 16, 1073741824]")
        self.bad([*SWEEP, "--sweep", "weak", "--from", "8", "--to", "16", "--points", "8,16"], "either --points")
        self.bad([*SWEEP, "--sweep", "weak", "--points", "8,x"], "--points")
        self.bad([*SWEEP, "--sweep", "weak", "--from", "8", "--to", "16", "--replan"], "drop --layout")
        self.bad([*SWEEP, "--sweep", "weak", "--from", "8", "--to", "16", "--node-mtbf-hours", "100"],
                 "--ckpt-write-s")
        self.bad([*SWEEP, "--sweep", "weak", "--from", "12", "--to", "16"], "does not divide gpus 12")
        self.bad([*SWEEP, "--sweep", "weak", "--from", "8", "--to", "16", "--trace", "x.json"], "--trace")
        self.bad([*ONE, "--from", "8"], "add --sweep")
        self.bad([*ONE, "--plot", "x.svg"], "--plot")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)

"""bench/tuned.py and the report's table of the tuner's winners, against a real kernel database:
`mxfp6c precompile` fills it, `mxfp6-db import` records a selection per key (what mxfp6-tune would
record), and the benchmark's side is stood in for by plans whose stages are the database's own
code objects written to files. No GPU, no torch.

usage: tuned_test.py MXFP6C MXFP6_DB
"""

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import unittest

MXFP6C, MXFP6_DB = sys.argv[-2], sys.argv[-1]
del sys.argv[-2:]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import report  # noqa: E402
import tuned  # noqa: E402

SHAPES = {"model": "tuned_test", "entries": [
    {"op": "ln_modulate_bwd", "variant": {"layout": layout}, "size": 3072, "tokens_per_sample": 256,
     "tokens": [4096]} for layout in ("bsd", "sbd")]}


class Problem:
    """What tuned.py reads of a benchmark problem (bench/problems.py LnModulateBwd)."""
    kernel, D, S = "ln_modulate_bwd", 3072, 256

    def __init__(self, tokens, layout):
        self.tokens = self.rows = tokens
        self.layout = layout
        self.name = f"{self.kernel}:T={tokens}:{layout}"


class Tuned(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory(prefix="mxfp6-tuned-test-")
        d = cls.dir.name
        cls.db = os.path.join(d, "kernels.db")
        shapes = os.path.join(d, "shapes.json")
        with open(shapes, "w") as f:
            json.dump(SHAPES, f)
        subprocess.run([MXFP6C, "precompile", "--shapes", shapes, "--targets", "sm_90", "--db", cls.db], check=True,
                       capture_output=True)
        doc = json.loads(subprocess.run([MXFP6_DB, "export", "--json", "--db", cls.db], check=True,
                                        capture_output=True, text=True).stdout)
        # A selection per key, as a tune records it: the second candidate for [B, S, D], the third
        # for [S, B, D], so the two keys' winners differ.
        cls.chosen, cls.candidates = {}, {}
        for family in doc["families"]:
            layout = dict(kv.split("=") for kv in family["variant"].split(","))["layout"]
            pick = family["candidates"][1 if layout == "bsd" else 2]
            cls.chosen[layout], cls.candidates[layout] = pick, family["candidates"]
            w = pick["plan_id"]
            family["runs"] = [{"rows": 4096, "winner": w, "equivalent": [w], "rule": "chosen by the test",
                               "tuned_at": "2026-12-07T00:00:00Z", "tuner": "tuned_test", "current": True,
                               "timings": [{"plan_id": w, "passed_gate": True, "gate_message": "",
                                            "samples_us": [10.0, 10.2, 9.9]}]}]
        runs = os.path.join(d, "runs.json")
        with open(runs, "w") as f:
            json.dump(doc, f)
        subprocess.run([MXFP6_DB, "import", runs, "--db", cls.db], check=True, capture_output=True)
        # The code objects as files, as the benchmark finds them in its folder.
        cls.files = {}
        con = sqlite3.connect(cls.db)
        for sha, data in con.execute("SELECT sha256, bytes FROM objects"):
            path = os.path.join(d, sha[:16] + ".cubin")
            with open(path, "wb") as f:
                f.write(data)
            cls.files[sha] = path
        con.close()
        cls.winners = tuned.load(cls.db)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def plan(self, candidate):
        """The benchmark's view of a candidate: its launches' object files, and its partials."""
        plan = json.loads(candidate["plan_json"])
        shas = [tuned.file_sha256(self.files[launch["object"]]) for launch in plan["launches"]]
        return shas, plan["partials"]

    def test_every_selection_is_loaded(self):
        self.assertEqual(sorted(w.key for w in self.winners),
                         ["ln_modulate_bwd/S=256,layout=bsd/sm_90/D=3072/4096",
                          "ln_modulate_bwd/S=256,layout=sbd/sm_90/D=3072/4096"])

    def test_the_problem_finds_its_own_key(self):
        for layout in ("bsd", "sbd"):
            w = tuned.winner_for(self.winners, Problem(4096, layout))
            self.assertEqual(w.plan_id, self.chosen[layout]["plan_id"])
            self.assertIn(f"layout={layout}", w.key)
        self.assertIsNone(tuned.winner_for(self.winners, Problem(8192, "bsd")))

    def test_only_the_chosen_plan_matches(self):
        for layout in ("bsd", "sbd"):
            w = tuned.winner_for(self.winners, Problem(4096, layout))
            matching = [c["plan_id"] for c in self.candidates[layout] if w.launched_by(*self.plan(c))]
            self.assertEqual(matching, [self.chosen[layout]["plan_id"]])
        # The same code objects with other partials are another plan.
        w = tuned.winner_for(self.winners, Problem(4096, "sbd"))
        self.assertGreater(w.partials, 0)
        shas, partials = self.plan(self.chosen["sbd"])
        self.assertTrue(w.launched_by(shas, partials))
        self.assertFalse(w.launched_by(shas, partials * 2))

    def test_a_problem_without_the_telling_attribute_is_ambiguous(self):
        class NoLayout:  # a problem that cannot tell [B, S, D] from [S, B, D]
            kernel, D, S, rows, tokens, name = "ln_modulate_bwd", 3072, 256, 4096, 4096, "no layout"
        with self.assertRaisesRegex(ValueError, "2 tuned keys fit"):
            tuned.winner_for(self.winners, NoLayout())

    def test_the_report_counts_keys_within_two_percent(self):
        def rec(tokens, median_ms, tuned_entry):
            return {"kernel": "ln_modulate_bwd", "label": f"T={tokens}", "tokens": tokens, "shape": {},
                    "impls": {"mxfp6c": {"config": "best", "median_ms": median_ms, "ok": True, "tuned": tuned_entry}}}
        doc = {"results": [
            rec(4096, 0.1, {"key": "k1", "plan": "p", "rule": "r", "config": "a", "median_ms": 0.1015,
                            "regret": tuned.regret({"median_ms": 0.1}, {"median_ms": 0.1015})}),
            rec(8192, 0.2, {"key": "k2", "plan": "p", "rule": "r", "config": "b", "median_ms": 0.21,
                            "regret": tuned.regret({"median_ms": 0.2}, {"median_ms": 0.21})}),
            rec(16384, 0.4, {"error": "no selection for this key in the database"})]}
        table = "\n".join(report._tuned_table(doc))
        self.assertIn("1 of 2 measured keys within 2%", table)
        self.assertIn("1 without a measurement", table)
        self.assertIn("+1.50 % | ✓", table)
        self.assertIn("+5.00 % | ✗", table)
        self.assertIn("no selection for this key in the database", table)


if __name__ == "__main__":
    unittest.main()

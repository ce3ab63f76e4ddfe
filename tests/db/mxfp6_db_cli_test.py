#!/usr/bin/env python3
"""mxfp6-db as a user drives it: every command's output and exit code on fixture databases.

usage: mxfp6_db_cli_test.py MXFP6_DB DB_FIXTURE
"""
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import unittest

TOOL = FIXTURE = None
KEY = "ln_modulate_fwd//sm_90/D=3072/16384"


def run(*args, stdin=None):
    p = subprocess.run([TOOL, *args], capture_output=True, text=True, input=stdin)
    return p.returncode, p.stdout, p.stderr


class Cli(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.a = self.path("a.db")
        self.b = self.path("b.db")
        subprocess.run([FIXTURE, self.a, "a"], check=True)
        subprocess.run([FIXTURE, self.b, "b"], check=True)

    def tearDown(self):
        self.dir.cleanup()

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def assertError(self, result, code, text):
        rc, out, err = result
        self.assertEqual(rc, code, err)
        first = err.splitlines()[0]
        self.assertTrue(first.startswith("mxfp6-db: error: "), err)
        self.assertIn(text, first)

    def test_list_is_an_aligned_table_and_filters(self):
        rc, out, err = run("list", "--db", self.a)
        self.assertEqual(rc, 0, err)
        lines = out.splitlines()
        self.assertEqual(lines[0].split(), ["OP", "VARIANT", "TARGET", "SIZES", "M", "WINNER", "PIN"])
        self.assertEqual(len(lines), 4)
        self.assertEqual(lines[1].split(), ["ln_modulate_fwd", "-", "sm_90", "D=3072", "1024", "rows4", "-"])
        self.assertEqual(lines[2].split()[4:], ["4096", "-", "pinned:", "rows8"])
        # Aligned: every row's M column starts where the header's does.
        column = lines[0].index(" M ") + 1
        for line in lines[1:]:
            self.assertNotEqual(line[column], " ", line)
        rc, out, _ = run("list", "--db", self.a, "--rows", "16384", "--json")
        self.assertEqual(rc, 0)
        entries = json.loads(out)
        self.assertEqual(len(entries), 1)
        self.assertEqual(entries[0]["winner"], "rows8")
        self.assertEqual(entries[0]["key"]["toolchain"], "tc-1")
        self.assertEqual(json.loads(run("list", "--db", self.a, "--target", "gfx942", "--json")[1]), [])

    def test_show_gives_samples_gate_equivalence_winner_and_pin(self):
        rc, out, err = run("show", KEY, "--db", self.a)
        self.assertEqual(rc, 0, err)
        self.assertIn("winner     rows8 (rule: fastest median)", out)
        self.assertIn("equivalent rows8", out)
        rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("rows")}
        # rows4: samples 10, 11, 12, 30 -> median 11.5, min 10, max 30.
        self.assertEqual(rows["rows4"][1:8], ["0", "pass", "4", "11.500", "10.000", "30.000", "-"])
        self.assertEqual(rows["rows8"][7], "winner")
        rc, out, _ = run("show", "ln_modulate_fwd//sm_90/D=3072/4096", "--db", self.a)
        self.assertEqual(rc, 0)
        self.assertIn("pin        rows8 by alice at 2026-01-05T00:00:00Z: rows4 regressed on 4096", out)
        data = json.loads(run("show", KEY, "--db", self.a, "--json")[1])
        self.assertEqual(data["selection"]["winner"], "rows8")
        self.assertEqual(data["candidates"][0]["samples_us"], [10.0, 11.0, 12.0, 30.0])
        self.assertEqual(data["candidates"][0]["median_us"], 11.5)

    def test_show_errors(self):
        self.assertError(run("show", "ln_modulate_fwd/sm_90/16384", "--db", self.a), 2,
                         "is not op/variant/target/sizes/M")
        self.assertError(run("show", "ln_modulate_fwd//sm_90/D=3072/x", "--db", self.a), 2,
                         "is not an integer")
        self.assertError(run("show", "mxfp6_pack_dual//sm_90//64", "--db", self.a), 1,
                         "no key family mxfp6_pack_dual//sm_90/")
        self.assertError(run("show", "ln_modulate_fwd//sm_90/D=3072/77", "--db", self.a), 1,
                         "ln_modulate_fwd//sm_90/D=3072/77 is neither tuned nor pinned")
        two = self.path("two.db")
        subprocess.run([FIXTURE, two, "two-toolchains"], check=True)
        self.assertError(run("show", KEY, "--db", two), 2, "pick one with --toolchain: tc-1, tc-2")
        rc, out, _ = run("show", "ln_modulate_fwd//sm_90/D=3072/1024", "--db", two, "--toolchain", "tc-2")
        self.assertEqual(rc, 0)
        self.assertIn("winner     rows8", out)

    def test_diff_lists_changed_and_one_sided_keys(self):
        rc, out, err = run("diff", self.a, self.b)
        self.assertEqual(rc, 1, err)
        found = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:]}
        self.assertEqual(found["ln_modulate_fwd//sm_90/D=3072/16384"][:3], ["winner", "rows8", "rows4"])
        self.assertEqual(found["ln_modulate_fwd//sm_90/D=3072/1024"][:3], ["only", "in", "DB1"])
        self.assertEqual(found["ln_modulate_fwd//sm_90/D=3072/8192"][:3], ["only", "in", "DB2"])
        self.assertEqual(run("diff", self.a, self.a), (0, "", ""))
        self.assertError(run("diff", self.a), 2, "two databases")

    def test_merge_then_diff_shows_the_newer_selection(self):
        rc, out, err = run("merge", "--db", self.a, self.b)
        self.assertEqual(rc, 0, err)
        self.assertIn("merged " + self.b, out)
        entries = {e["key"]["rows"]: e for e in json.loads(run("list", "--db", self.a, "--json")[1])}
        self.assertEqual(entries[16384]["winner"], "rows4")  # b's run is newer
        self.assertEqual(sorted(entries), [1024, 4096, 8192, 16384])

    def test_export_import_round_trip(self):
        rc, exported, err = run("export", "--json", "--with-bytes", "--db", self.a)
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(exported)["format"], "mxfp6-kernel-db")
        fresh = self.path("fresh.db")
        rc, out, err = run("import", "-", "--db", fresh, stdin=exported)
        self.assertEqual(rc, 0, err)
        self.assertEqual(run("export", "--db", fresh)[1], run("export", "--db", self.a)[1])
        bad = self.path("bad.json")
        with open(bad, "w") as f:
            f.write("{nope")
        self.assertError(run("import", bad, "--db", fresh), 1, "not JSON")

    def test_gc_needs_a_toolchain_when_there_are_several(self):
        two = self.path("two.db")
        subprocess.run([FIXTURE, two, "two-toolchains"], check=True)
        self.assertError(run("gc", "--db", two), 2, "name the one to keep with --toolchain")
        rc, out, err = run("gc", "--db", two, "--toolchain", "tc-2")
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"removed [1-9][0-9]* rows; kept toolchain tc-2")
        entries = json.loads(run("list", "--db", two, "--json")[1])
        self.assertEqual({e["key"]["toolchain"] for e in entries}, {"tc-2"})
        rc, out, _ = run("gc", "--db", self.a)  # one toolchain: kept
        self.assertEqual(rc, 0)
        self.assertIn("removed 0 rows; kept toolchain tc-1", out)

    def test_check_passes_then_reports_a_corrupt_object(self):
        rc, out, err = run("check", "--db", self.a)
        self.assertEqual(rc, 0, err)
        self.assertIn("schema version 2; 2 objects, 2 candidates, 2 selections, 1 pins", out)
        self.assertTrue(out.endswith("ok\n"))
        with sqlite3.connect(self.a) as db:
            db.execute("UPDATE objects SET bytes = x'00' WHERE rowid = 1")
        rc, out, _ = run("check", "--db", self.a)
        self.assertEqual(rc, 1)
        self.assertIn("is corrupt: its bytes hash to", out)
        report = json.loads(run("check", "--db", self.a, "--json")[1])
        self.assertEqual(len(report["problems"]), 1)

    def test_snapshot_is_a_readable_copy(self):
        dest = self.path("replica.db")
        rc, out, err = run("snapshot", dest, "--db", self.a)
        self.assertEqual(rc, 0, err)
        self.assertEqual(run("list", "--db", dest)[1], run("list", "--db", self.a)[1])
        self.assertEqual(run("check", "--db", dest)[0], 0)

    def test_misses(self):
        rc, out, err = run("misses", "--db", self.a)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.splitlines()[1].split()[:3], ["ln_modulate_fwd//sm_90/D=3072/2048", "nearest", "1"])
        self.assertEqual(json.loads(run("misses", "--db", self.a, "--json")[1])[0]["count"], 1)

    def test_why_explains_or_fails_in_one_line(self):
        # The fixture's plans are placeholders the op table does not read, so resolution fails;
        # the failure is one error line and exit 1, never a crash.
        self.assertError(run("why", KEY, "--db", self.a), 1, "")

    def test_usage_and_file_errors(self):
        self.assertEqual(run()[0], 2)
        self.assertEqual(run("--help")[0], 0)
        self.assertError(run("frobnicate", "--db", self.a), 2, "unknown command 'frobnicate'")
        self.assertError(run("list"), 2, "list needs --db DB")
        self.assertError(run("list", "--db", self.a, "--bogus"), 2, "unknown option --bogus")
        missing = self.path("missing.db")
        self.assertError(run("list", "--db", missing), 1, "cannot open " + missing + " read-only: no such file")
        self.assertFalse(os.path.exists(missing))
        text = self.path("text.db")
        with open(text, "w") as f:
            f.write("not a database " * 20)
        self.assertError(run("check", "--db", text), 1, "file is not a database")
        with sqlite3.connect(self.a) as db:
            db.execute("UPDATE meta SET value = 7")
        self.assertError(run("list", "--db", self.a), 1, "schema version 7 is newer than this build's 2")


if __name__ == "__main__":
    TOOL, FIXTURE = sys.argv[1], sys.argv[2]
    unittest.main(argv=[sys.argv[0], "-v"])
